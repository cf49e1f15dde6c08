"""Bad spec files through the CLI: exit code 2, no traceback, and one clear message naming the file, the
key path and what was expected. Each case mutates the shipped H200 spec in one place (or writes broken
YAML), so the message must point at exactly that place."""

import subprocess
import sys

import pytest


def _set(path, value):
    def mutate(d):
        node = d
        for p in path[:-1]:
            node = node[p]
        node[path[-1]] = value
    return mutate


def _delete(path):
    def mutate(d):
        node = d
        for p in path[:-1]:
            node = node[p]
        del node[path[-1]]
    return mutate


def _reorder_memory(d):
    mem = d["memory"]
    d["memory"] = {"dram": mem["dram"], **{k: v for k, v in mem.items() if k != "dram"}}


def _per_sm_outside(d):
    d["memory"] = {**{k: v for k, v in d["memory"].items() if k != "dram"},
                   "llc": {"scope": "per_sm", "capacity": {"value": "1 GB", "source": "nvidia-h200"},
                           "bandwidth": {"unknown": "x"}},
                   "dram": d["memory"]["dram"]}


def _hypothetical_with_measurements(d):
    d["hypothetical"] = True


MUTATIONS = [
    # (case id, mutation, substrings the message must contain)
    ("unknown-top-level-key", _set(["vendr"], "NVIDIA"), ["vendr: unknown key"]),
    ("unknown-nested-key", _set(["memory", "dram", "bandwith"], "4.8 TB/s"), ["memory.dram.bandwith: unknown key"]),
    ("unknown-datum-key", _set(["compute", "sm_count", "sorce"], "x"), ["compute.sm_count.sorce: unknown key"]),
    ("computed-key-set", _set(["memory", "l2", "bandwidth", "si"], 5.0), ["memory.l2.bandwidth", "unknown key 'si'"]),
    ("missing-required-value", _delete(["compute", "sm_count"]), ["compute.sm_count: required key is missing"]),
    ("missing-section", _delete(["power"]), ["power: required key is missing"]),
    ("datum-without-value", _set(["compute", "clock_boost"], {"source": "nvidia-h200"}),
     ["compute.clock_boost", "missing 'value'", "unknown: <reason>"]),
    ("value-without-source", _set(["power", "tdp"], {"value": "700 W"}), ["power.tdp", "missing 'source'"]),
    ("value-and-unknown", _set(["power", "tdp"], {"value": "700 W", "source": "nvidia-h200", "unknown": "x"}),
     ["power.tdp", "either 'value'", "or 'unknown'"]),
    ("missing-unit", _set(["memory", "dram", "bandwidth", "value"], "4.8"),
     ["memory.dram.bandwidth", "a number, a space, then a unit"]),
    ("bare-number", _set(["memory", "dram", "bandwidth", "value"], 4.8),
     ["memory.dram.bandwidth", "no unit", "4.8 TB/s"]),
    ("wrong-unit", _set(["memory", "dram", "bandwidth", "value"], "4.8 TB"),
     ["memory.dram.bandwidth", "'4.8 TB' has unit 'terabyte'", "expected a bandwidth"]),
    ("frequency-as-bandwidth", _set(["memory", "dram", "bandwidth", "value"], "4.8 GHz"),
     ["memory.dram.bandwidth", "expected a bandwidth"]),
    ("unknown-unit", _set(["compute", "clock_boost", "value"], "1.98 GHzz"), ["compute.clock_boost", "unknown unit"]),
    ("zero-rate", _set(["compute", "tensor", "bf16", "value"], "0 TFLOP/s"),
     ["compute.tensor.bf16", "must be greater than zero"]),
    ("negative-capacity", _set(["memory", "dram", "capacity", "value"], "-141 GB"),
     ["memory.dram.capacity", "must be greater than zero"]),
    ("negative-count", _set(["compute", "sm_count", "value"], -132), ["compute.sm_count", "greater than zero"]),
    ("fractional-count", _set(["compute", "sm_count", "value"], 131.5), ["compute.sm_count", "whole number"]),
    ("unknown-dtype", _set(["compute", "tensor", "bf17"], {"value": "1 TFLOP/s", "source": "nvidia-h200"}),
     ["compute.tensor", "unknown dtype", "bf17", "expected some of"]),
    ("missing-fp32-vector", _delete(["compute", "vector", "fp32"]), ["compute.vector", "needs an 'fp32' rate"]),
    ("l2-larger-than-dram", _set(["memory", "l2", "capacity", "value"], "200 GB"),
     ["memory.dram.capacity", "not larger than the closer level 'l2'", "grow from on-chip to off-chip"]),
    ("bandwidth-growing-outward", _set(["memory", "dram", "bandwidth", "value"], "50 TB/s"),
     ["memory.dram.bandwidth", "exceeds the closer level 'shared'", "must not grow"]),
    ("missing-dram", _delete(["memory", "dram"]), ["memory", "needs a 'dram' level"]),
    ("levels-out-of-order", _reorder_memory, ["memory", "from on-chip to off-chip"]),
    ("per-sm-level-outside-device-level", _per_sm_outside, ["memory.llc.scope", "per-SM level", "'l2'"]),
    ("unknown-memory-level", _set(["memory", "l3"], {"scope": "device"}), ["memory", "unknown memory level", "l3"]),
    ("bad-scope", _set(["memory", "l2", "scope"], "global"), ["memory.l2.scope", "'per_sm'", "'global'"]),
    ("unknown-source-id", _set(["compute", "sm_count", "source"], "nvidia-h2000"),
     ["compute.sm_count.source", "unknown source 'nvidia-h2000'", "declared sources"]),
    ("bad-source-tag", _set(["sources", "nvidia-h200", "tag"], "X"), ["sources.nvidia-h200.tag", "'X'"]),
    ("assumption-on-real-device", _set(["sources", "nvidia-h200", "tag"], "A"),
     ["compute.sm_count.source", "design assumption", "hypothetical"]),
    ("measured-key-does-not-exist", _set(["measured", 0, "key"], "memory.dram.bandwith"),
     ["measured[0].key", "'memory.dram.bandwith' is not a value of this spec", "memory.dram.bandwidth"]),
    ("measured-wrong-unit", _set(["measured", 0, "value"], "4186 GB"), ["measured[0].value", "expected a bandwidth"]),
    ("measured-negative", _set(["measured", 1, "value"], "-787 TFLOP/s"), ["measured[1].value", "greater than zero"]),
    ("measured-bad-date", _set(["measured", 0, "date"], "yesterday"), ["measured.0.date"]),
    ("measured-duplicate-key", lambda d: d["measured"].append(dict(d["measured"][0])),
     ["measured", "memory.dram.bandwidth", "more than once"]),
    ("measured-on-hypothetical", _hypothetical_with_measurements, ["measured", "hypothetical device"]),
    ("schema-version", _set(["schema_version"], 2), ["schema_version: expected 1, got 2"]),
    ("bad-id", _set(["id"], "H200 SXM"), ["id", "lower case"]),
    ("bool-as-value", _set(["power", "tdp", "value"], True), ["power.tdp", "got True"]),
    ("device-names-not-a-list", _set(["device_names"], "NVIDIA H200"),
     ["device_names", "expected a list of device names", "got 'NVIDIA H200'"]),
    ("device-names-not-strings", _set(["device_names"], ["NVIDIA H200", 200]),
     ["device_names", "[1]", "expected a list of device names", "got 200"]),
    ("device-names-padded", _set(["device_names"], [" NVIDIA H200"]), ["device_names", "surrounding spaces"]),
    ("device-names-twice", _set(["device_names"], ["NVIDIA H200", "NVIDIA H200"]),
     ["device_names", "more than once"]),
]


def _one_message(err: str, path: str) -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one message, got:\n{err}"
    assert lines[0].startswith(f"ssmbench: error: {path}: ")
    return lines[0]


@pytest.mark.parametrize("mutate, expected", [m[1:] for m in MUTATIONS], ids=[m[0] for m in MUTATIONS])
def test_bad_spec_gives_one_clear_message(h200_dict, write_spec, run_cli, mutate, expected):
    mutate(h200_dict)
    path = write_spec(h200_dict)
    code, out, err = run_cli("specs", "validate", path)
    assert code == 2
    assert "OK" not in out
    message = _one_message(err, path)
    for text in expected:
        assert text in message


@pytest.mark.parametrize("text, expected", [
    ("schema_version: 1\nid: [unclosed\n", ["line 3", "not valid YAML"]),
    ("schema_version: 1\nid: a\nname: x\nid: b\n", ["line 4", "key 'id' appears twice"]),
    ("compute:\n  sm_count: 1\n  sm_count: 2\n", ["line 3", "key 'sm_count' appears twice"]),
    ("schema_version: 1\n\tid: x\n", ["not valid YAML"]),
    ("? [a, b]\n: 1\n", ["not valid YAML", "unhashable"]),
    ("", ["expected a mapping of spec keys", "NoneType"]),
    ("- 1\n- 2\n", ["expected a mapping of spec keys", "list"]),
    ("a: 1\n---\nb: 2\n", ["not valid YAML"]),
])
def test_broken_yaml_gives_one_clear_message(write_spec, run_cli, text, expected):
    path = write_spec(text)
    code, _, err = run_cli("specs", "validate", path)
    assert code == 2
    message = _one_message(err, path)
    for part in expected:
        assert part in message


def test_duplicate_id_across_files_names_both(h200_dict, write_spec, run_cli):
    first = write_spec(h200_dict, "first.yaml")
    second = write_spec(h200_dict, "second.yaml")
    code, out, err = run_cli("specs", "validate", first, second)
    assert code == 2
    assert f"OK    {first}" in out
    message = _one_message(err, second)
    assert "id: 'h200-sxm' is already used by" in message and first in message


def test_duplicate_id_in_the_library_is_refused(h200_dict, write_spec):
    from ssmbench.hwspecs import SpecError, load_all

    paths = [write_spec(h200_dict, "a.yaml"), write_spec(h200_dict, "b.yaml")]
    with pytest.raises(SpecError, match="ids must be unique"):
        load_all(paths)


def test_missing_file_and_directory(run_cli, tmp_path):
    code, _, err = run_cli("specs", "validate", str(tmp_path / "nope.yaml"))
    assert code == 2 and "nope.yaml: file not found" in err
    code, _, err = run_cli("specs", "show", str(tmp_path))
    assert code == 2 and "is a directory" in err


def test_show_and_diff_refuse_broken_specs(h200_dict, write_spec, run_cli):
    _set(["memory", "dram", "bandwidth", "value"], "4.8 TB")(h200_dict)
    path = write_spec(h200_dict)
    for argv in (("specs", "show", path), ("specs", "diff", "h100-sxm", path), ("specs", "show", "h300")):
        code, _, err = run_cli(*argv)
        assert code == 2 and "Traceback" not in err and err.startswith("ssmbench: error: ")


def test_several_problems_are_all_reported(h200_dict, write_spec, run_cli):
    h200_dict["vendr"] = "x"
    h200_dict["power"]["tdp"]["value"] = "700"
    path = write_spec(h200_dict)
    _, _, err = run_cli("specs", "validate", path)
    assert "vendr: unknown key" in err and "power.tdp" in err


def test_validate_in_a_separate_process_has_no_traceback(h200_dict, write_spec):
    h200_dict["memory"]["l2"]["capacity"]["value"] = "200 GB"
    path = write_spec(h200_dict)
    # Only the hwspecs commands are wired in, so that the test does not depend on other subsystems.
    code = ("import sys, ssmbench.cli as c; c.COMMAND_MODULES = ('ssmbench.commands.specs',); "
            "sys.exit(c.main(sys.argv[1:]))")
    proc = subprocess.run([sys.executable, "-c", code, "specs", "validate", path],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"{path}: memory.dram.capacity" in proc.stderr
