"""ssmbench probe on the CPU: writes a spec-shaped measured list and never overwrites a file."""

import json

import pytest
import yaml

pytest.importorskip("torch")

from ssmbench.hwspecs import units

SMALL = ["--copy-mib", "4", "--matmul-n", "64", "--vector-numel", "4096", "--target-time", "0.01"]


def _cli(monkeypatch, argv):
    import ssmbench.cli as cli

    monkeypatch.setattr(cli, "COMMAND_MODULES", ("ssmbench.commands.measure",))
    return cli.main(argv)


def test_probe_cpu_writes_and_refuses_to_overwrite(tmp_path, monkeypatch, capsys):
    out = tmp_path / "cpu-probe.yaml"
    assert _cli(monkeypatch, ["probe", "--device", "cpu", "--out", str(out), *SMALL]) == 0
    doc = yaml.safe_load(out.read_text())
    assert doc["kind"] == "ssmbench-probe" and doc["schema_version"] == 1
    keys = {m["key"] for m in doc["measured"]}
    assert {"memory.dram.bandwidth", "compute.tensor.fp32"} <= keys
    kinds = {"memory.dram.bandwidth": "bandwidth"}
    for m in doc["measured"]:
        assert {"key", "value", "date", "method"} <= set(m)
        assert units.parse(m["value"], kinds.get(m["key"], "flop_rate")) > 0  # a value with its unit
    assert {o["name"] for o in doc["observations"]} >= {"elementwise.fp32_eager", "exp.fp32_eager"}
    assert doc["meta"]["device"]["type"] == "cpu"
    before = out.read_text()
    capsys.readouterr()
    assert _cli(monkeypatch, ["probe", "--device", "cpu", "--out", str(out), *SMALL]) == 2
    assert "file exists" in capsys.readouterr().err
    assert out.read_text() == before


def test_probe_json_output_and_bad_arguments(tmp_path, monkeypatch, capsys):
    out = tmp_path / "p.json"
    assert _cli(monkeypatch, ["probe", "--device", "cpu", "--out", str(out), *SMALL]) == 0
    assert json.loads(out.read_text())["measured"]
    assert _cli(monkeypatch, ["probe", "--device", "cpu", "--out", str(tmp_path / "p.txt")]) == 2
    assert _cli(monkeypatch, ["probe", "--device", "cpu", "--out", str(tmp_path / "q.yaml"), "--matmul-n", "0"]) == 2
    assert _cli(monkeypatch, ["probe", "--device", "tpu", "--out", str(tmp_path / "r.yaml")]) == 2


def test_probe_measured_entries_fit_a_spec(tmp_path, monkeypatch):
    """The measured list can be pasted into a spec: the spec loader accepts it."""
    import copy

    from ssmbench.hwspecs import builtin_dir, load_spec, parse_spec

    out = tmp_path / "p.yaml"
    assert _cli(monkeypatch, ["probe", "--device", "cpu", "--out", str(out), *SMALL]) == 0
    measured = yaml.safe_load(out.read_text())["measured"]
    spec_path = builtin_dir() / "h200-sxm.yaml"
    data = copy.deepcopy(yaml.safe_load(spec_path.read_text()))
    data["measured"] = [m for m in measured if m["key"] in ("memory.dram.bandwidth", "compute.tensor.bf16")]
    spec = parse_spec(data, "pasted.yaml")
    assert {m.key for m in spec.measured} == {m["key"] for m in data["measured"]}
    assert load_spec(spec_path)  # the built-in file itself is untouched


@pytest.mark.gpu
def test_probe_cuda(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from ssmbench.measure.probe import ProbeSizes, run_probe

    doc = run_probe(torch.device("cuda"), ProbeSizes(copy_mib=256, matmul_n=4096, vector_numel=1 << 20, iters=512,
                                                     target_s=0.05))
    keys = {m["key"] for m in doc["measured"]}
    assert {"memory.dram.bandwidth", "compute.tensor.bf16", "launch.kernel", "launch.graph_node"} <= keys, doc["failed"]
