"""Runtime terms measured from whole-model records (calibrate/runtime_host.py), their copy in the
h200-sxm spec, the held-out characterization, and the calibrated step under a runtime
(calibrate/runtime_step.py)."""

from pathlib import Path

import pytest
import yaml

from ssmbench.calibrate.runtime_host import (
    FORWARD_KEYS,
    KEYS,
    base_spec,
    block_rows,
    derive,
    flash_attn_of,
    held_out_spec,
    known_values,
    rows_of,
)
from ssmbench.calibrate.runtime_step import compose
from ssmbench.hwspecs import get_spec
from ssmbench.hwspecs.units import parse
from ssmbench.measure.models.records import find_model_runs, standing_records
from ssmbench.measure.results import read_dir

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "results" / "h200" / "2026-12-03" / "models"
# the model calls scripts/characterize_h200.sh reads, and the op-level folders of its block cases
RUNS = (RUN, ROOT / "results" / "h200" / "2026-12-03" / "models-b", ROOT / "results" / "h200" / "2026-12-04" / "host-noise",
        ROOT / "results" / "h200" / "2026-12-04" / "host-noise-b", ROOT / "results" / "h200" / "2026-12-04" / "host-noise-hf",
        ROOT / "results" / "h200" / "2026-12-04" / "prefill-check", ROOT / "results" / "h200" / "2026-12-04" / "host-sync",
        ROOT / "results" / "h200" / "2026-12-05" / "train-issue")
BLOCKS = (ROOT / "results" / "h200" / "2026-12-02" / "default", ROOT / "results" / "h200" / "2026-12-03" / "pairs-blocks",
          ROOT / "results" / "h200" / "2026-12-03" / "fill")
FRAGMENT = RUN / "characterize" / "measured-runtime-h200-sxm.yaml"


@pytest.fixture(scope="module")
def rows():
    return rows_of(standing_records([p for run in RUNS for p in find_model_runs(run)]), lambda r: get_spec("h200-sxm"))


@pytest.fixture(scope="module")
def forward_rows():
    return block_rows([f for d in BLOCKS for f in read_dir(d)], lambda dev: get_spec("h200-sxm"))


def test_spec_entries_are_the_fragment():
    """The spec's runtime terms are the committed fragment's, with its method and date (no hand edit)."""
    frag = {e["key"]: e for e in yaml.safe_load(FRAGMENT.read_text())["measured"]}
    spec = {m.key: m for m in get_spec("h200-sxm").measured if m.key in KEYS + FORWARD_KEYS}
    assert set(spec) == set(frag) == set(KEYS + FORWARD_KEYS)
    for k, e in frag.items():
        assert (spec[k].value, str(spec[k].date), spec[k].method) == (e["value"], str(e["date"]), e["method"])


def test_derivation_does_not_read_its_own_values(rows, forward_rows):
    assert not any(m.key in KEYS for m in base_spec(get_spec("h200-sxm")).measured)
    assert not any(m.key in FORWARD_KEYS for m in base_spec(get_spec("h200-sxm"), FORWARD_KEYS).measured)
    # the stored fragment is what the block cases and the records give
    forward = derive(forward_rows, keys=FORWARD_KEYS)
    now = {e["key"]: e["value"] for e in forward + derive(rows, known=known_values(get_spec("h200-sxm")))}
    frag = {e["key"]: e["value"] for e in yaml.safe_load(FRAGMENT.read_text())["measured"]}
    assert now == frag


def test_forward_terms_come_from_host_bound_block_cases(forward_rows):
    """Each forward term is the median over its block's host-bound forward cases of (measured - plan host) /
    op calls; a case whose plan keeps the GPU busy over half the call is listed and not used."""
    import statistics
    used = [r for r in forward_rows if r["usable"]]
    assert {r["term"] for r in used} == set(FORWARD_KEYS)
    assert any(not r["usable"] for r in forward_rows)
    for r in forward_rows:
        assert r["usable"] == (r["plan_gpu_s"] <= 0.5 * r["measured_s"])
        assert r["value_s"] == pytest.approx((r["measured_s"] - r["plan_host_s"]) / r["op_calls_plan"])
    spec = known_values(get_spec("h200-sxm"))
    for key in FORWARD_KEYS:
        median = statistics.median(r["value_s"] for r in used if r["term"] == key)
        assert spec[key] == pytest.approx(median, rel=1e-3)
    # Mamba's fast path costs less Python per op call than Mamba2's and Mamba3's forwards
    assert spec["launch.host.ssm_forward"] < spec["launch.host.ssm_forward_mamba2"] < spec["launch.host.ssm_forward_mamba3"]


def test_prefill_pays_the_forward_class_and_decode_and_train_the_module_class():
    """mamba-ssm: a prefill op call of a Mamba-2 layer pays ssm_forward_mamba2, of another kind ssm_forward; a
    decode step's and a train step's ssm_module (the train forward records the autograd graph: runtime.FORWARD_PHASES)."""
    from ssmbench.analytic.runtime import RUNTIMES, call_host_s
    rt = RUNTIMES["mamba-ssm"]
    assert rt.module_class_of("mamba2", "prefill") == "ssm_forward_mamba2"
    assert rt.module_class_of("attention", "prefill") == "ssm_forward"
    assert rt.module_class_of("mamba2", "decode") == rt.module_class_of("mamba2", "train") == "ssm_module"
    # a class the spec does not know: its stand-ins in order
    costs = {"ssm_forward": 3.0, "ssm_module": 5.0}
    assert call_host_s(rt, 1.0, 0, 2, lambda c: costs.get(c, 0.0), "mamba2", "prefill") == 1.0 + 2 * 3.0
    assert call_host_s(rt, 1.0, 0, 2, lambda c: {"ssm_module": 5.0}.get(c, 0.0), "mamba2", "prefill") == 1.0 + 2 * 5.0
    assert call_host_s(rt, 1.0, 0, 2, lambda c: costs.get(c, 0.0), "mamba2", "decode") == 1.0 + 2 * 5.0


def test_held_out_leaves_the_model_out(rows):
    spec, used = held_out_spec(get_spec("h200-sxm"), rows, "qwen2.5-0.5b")
    hf = next(e for e in used if e["key"] == "launch.host.hf_module")
    assert "qwen2.5" not in hf["method"] and "llama-3.2-1b" in hf["method"]
    assert any(m.key == "launch.host.hf_module" and m.value == hf["value"] for m in spec.measured)
    # train steps do not enter the module terms: they give the backward's term, from host-bound records only
    train = [r for r in rows if r["phase"] == "train" and r["term"] != "launch.gemm_fixed"]
    assert {r["term"] for r in train} == {"launch.host.backward_launch"}
    assert all(r["usable"] == (r["host_idle_share"] >= 0.5) for r in train)


def _pred(runtime, phase="decode", batch=1):
    from ssmbench.analytic.workloads.models import get_model
    from ssmbench.analytic.workloads.report import predict
    return predict(get_model("mamba2-130m"), get_spec("h200-sxm"), phase, batch, 2048, with_searches=False,
                   runtime=runtime)


def test_compose_takes_host_share_out_under_a_graph():
    """A graph replay pays no per-call host cost: the composed calibrated step is the calibrated device
    times, below the eager op sum wherever a call was host-bound in isolation."""
    r = _pred("cuda-graph")
    r["total"]["calibrated"] = {"estimate_s": 1.0, "lo_s": 0.5, "hi_s": 2.0, "notes": []}
    for o in r["ops"]:
        a = o["achievable"]
        o["calibrated"] = {"estimate_s": max(a["host_eager_s"], a["gpu_s"]) * o["count"] / o["count"]}
    cal = compose(r)
    gpu = sum(o["achievable"]["gpu_s"] for o in r["ops"])
    assert cal["device_s"] == pytest.approx(gpu, rel=1e-9)  # each op's calibrated time = its isolated call
    assert cal["estimate_s"] == pytest.approx(max(gpu, cal["host_s"]))
    assert cal["hi_s"] / cal["lo_s"] == pytest.approx(4.0)
    assert compose(_pred(None) | {"total": {**_pred(None)["total"], "calibrated": None}}) is None


def test_calibrated_device_work_beyond_the_host_keeps_the_call_whole():
    """Where the calibrated model's device terms alone outlast the eager host time, the isolated call was
    device-bound however the achievable estimate split it: its calibrated time is the device time; where
    they do not, the achievable device share of it is."""
    from ssmbench.calibrate.runtime_step import device_s

    o = {"count": 24, "achievable": {"gpu_s": 0.017, "host_eager_s": 0.020}}
    fitted = {"estimate_s": 0.043, "count": 24, "terms_per_call_s": {"dram": 1.12e-3, "fixed": 0.68e-3}}
    assert device_s({**o, "calibrated": fitted}) == pytest.approx(0.043)  # 24 x 1.12 ms >= 20 ms of host
    small = {**fitted, "terms_per_call_s": {"dram": 0.2e-3, "fixed": 1.6e-3}}
    assert device_s({**o, "calibrated": small}) == pytest.approx(0.043 * 0.017 / 0.020)
    assert device_s({**o, "calibrated": {"estimate_s": 0.043}}) == pytest.approx(0.043 * 0.017 / 0.020)
    # a form on the achievable model's terms states its device side: that is the device time, whatever the
    # host (the chunked SSD at B = 16, L = 2048, H = 24: 453 us as a graph replay against 189 us achievable)
    assert device_s({**o, "calibrated": {**small, "device_per_call_s": 0.46e-3}}) == pytest.approx(24 * 0.46e-3)


def test_a_graph_replay_pays_the_achievable_fixed_time_not_the_eager_one():
    """A device-bound call inside a CUDA-graph replay: the form's fixed term per call (fitted on isolated eager
    calls, their gaps between kernels in it) gives way to the achievable model's fixed time; eager steps keep
    it (their kernels do leave gaps)."""
    from ssmbench.calibrate.runtime_step import device_s, replays_graph

    o = {"count": 24, "achievable": {"gpu_s": 24 * 17e-6, "host_eager_s": 24 * 11.5e-6, "fixed_s": 24 * 2.9e-6}}
    cal = {"estimate_s": 24 * 19.76e-6, "count": 24, "terms_per_call_s": {"dram": 14.0e-6, "fixed": 5.76e-6}}
    assert device_s({**o, "calibrated": cal}, graph=True) == pytest.approx(24 * (19.76e-6 - 5.76e-6 + 2.9e-6))
    assert device_s({**o, "calibrated": cal}) == pytest.approx(24 * 19.76e-6)
    assert replays_graph(_pred("cuda-graph")) and not replays_graph(_pred("mamba-ssm"))


def test_compose_keeps_runtime_host_in_eager():
    r = _pred("mamba-ssm")
    r["total"]["calibrated"] = {"estimate_s": 1e-3, "lo_s": None, "hi_s": None, "notes": []}
    cal = compose(r)
    assert cal["estimate_s"] == pytest.approx(r["total"]["achievable"]["host_s"])  # host-bound: the runtime's host


def test_mamba_ssm_without_flash_attn_copies_the_cache():
    """mamba-ssm's MHA without flash-attn hands SDPA copies of k and v (repeat_interleave at repeats 1):
    in decode the whole cache per attention layer, at the strided-copy path's rate."""
    from ssmbench.analytic.workloads.models import get_model
    from ssmbench.analytic.workloads.report import predict
    m, spec = get_model("transformerpp-125m"), get_spec("h200-sxm")
    fa = predict(m, spec, "decode", 32, 32768, with_searches=False, runtime="cuda-graph")
    sdpa = predict(m, spec, "decode", 32, 32768, with_searches=False, runtime="cuda-graph", flash_attn=False)
    assert not any(o["op"] == "repeat_kv" for o in fa["ops"])
    rk = [o for o in sdpa["ops"] if o["op"] == "repeat_kv"]
    assert [o["impl"] for o in rk] == ["repeat_interleave"]
    layers, cache = 12, 32 * 32768 * 2 * 12 * 64 * 2  # [B, S, 2, H, P] bf16 per layer
    assert rk[0]["bytes_executed"] == pytest.approx(2 * cache * layers)  # read and written once
    rate = parse(next(m.value for m in spec.measured if m.key == "memory.dram.path.strided_copy"), "bandwidth")
    assert rk[0]["achievable"]["dram_bytes"] / rate < rk[0]["achievable"]["gpu_s"] < 1.01 * rk[0]["bytes_executed"] / rate
    # prefill copies the prompt's k and v; the records say which software ran
    rec = {"runner": "mamba_ssm", "_versions": {"flash_attn": None}}
    assert not flash_attn_of(rec) and flash_attn_of({**rec, "_versions": {"flash_attn": "2.8.3"}})
    assert flash_attn_of({"runner": "hf", "_versions": {"flash_attn": None}}) and flash_attn_of({"runner": "mamba_ssm"})


def test_path_rows_are_the_profiled_copies(rows):
    path = [r for r in rows if r["term"] == "memory.dram.path.strided_copy"]
    assert {r["model"] for r in path} == {"transformerpp-125m", "mamba2-attn-k4-130m"}
    for r in path:  # the copy kernels' time is the plan's bytes at the value, plus the fixed time
        assert r["copy_measured_s"] == pytest.approx(r["copy_bytes"] / r["value_s"] + r["plan_gpu_s"], rel=1e-9)
    spec, used = held_out_spec(get_spec("h200-sxm"), rows, "transformerpp-125m")
    e = next(e for e in used if e["key"] == "memory.dram.path.strided_copy")
    assert "transformerpp" not in e["method"] and "mamba2-attn-k4-130m" in e["method"]


def test_hf_mamba2_mixer_pays_its_own_module_cost(rows):
    """HF's Mamba2Mixer op calls pay launch.host.hf_ssm_module, the model ends hf_module; held out for
    the one model with that kind, its calls fall back to hf_module (and the key is not modelled)."""
    from ssmbench.analytic.workloads.models import get_model
    from ssmbench.analytic.workloads.report import predict
    spec = get_spec("h200-sxm")
    values = {m.key: parse(m.value, "time") for m in spec.measured if m.key in KEYS and "host" in m.key}
    p = predict(get_model("mamba2-130m"), spec, "prefill", 1, 2048, with_searches=False, runtime="hf-eager")
    calls = {k: sum(o["count"] for o in p["ops"] if (o["block"] == "mamba") == k) for k in (True, False)}
    assert {o["impl"] for o in p["ops"] if o["op"] == "gated_rmsnorm"} == {"torch_eager"}  # MambaRMSNormGated
    base = predict(get_model("mamba2-130m"), base_spec(spec), "prefill", 1, 2048, with_searches=False,
                   runtime="hf-eager")["total"]["achievable"]["host_s"]
    charged = p["total"]["achievable"]["host_s"] - base
    assert charged == pytest.approx(calls[True] * values["launch.host.hf_ssm_module"]
                                    + calls[False] * values["launch.host.hf_module"], rel=1e-6)
    held, used = held_out_spec(spec, rows, "mamba2-130m")
    assert "launch.host.hf_ssm_module" not in {e["key"] for e in used}
    h = predict(get_model("mamba2-130m"), held, "prefill", 1, 2048, with_searches=False, runtime="hf-eager")
    hf = parse(next(e["value"] for e in used if e["key"] == "launch.host.hf_module"), "time")
    assert h["total"]["achievable"]["host_s"] - base == pytest.approx((calls[True] + calls[False]) * hf, rel=1e-6)
    assert "launch.host.hf_ssm_module" in h["total"]["achievable"]["not_modelled"]


def test_vim_flips_between_layers():
    from ssmbench.analytic.workloads.models import get_model
    from ssmbench.analytic.workloads.phases import plan
    m = get_model("vim-s-bidir")
    flips = {c.label: c.count for c in plan(m, "prefill") if c.label.startswith("flip_")}
    assert flips == {"flip_hidden": 23, "flip_residual": 23}
    assert {c.label: c.count for c in plan(m, "train") if c.label.startswith("flip_")} == \
        {"flip_hidden": 46, "flip_residual": 46}  # and the gradients' flips
    assert not any(c.label.startswith("flip_") for c in plan(get_model("mamba-130m"), "prefill"))


def test_graph_rows_charge_the_gap_between_nodes(rows):
    """The GEMM and library-kernel fixed costs of a CUDA-graph record compare each profiled kernel plus
    the record's mean gap between graph nodes with the plan's device time (launch.graph_node is a replay
    time per node: kernel and gap); records whose plan is mostly long DRAM-bound kernels do not count."""
    graph = [r for r in rows if r["term"] in ("launch.gemm_fixed", "launch.library_fixed")]
    for r in graph:
        assert r["gap_s"] == pytest.approx(max(0.0, r["measured_s"] - r["busy_s"]) / r["launches_measured"], rel=1e-9)
        if r["term"] == "launch.gemm_fixed":
            assert r["value_s"] * r["gemm_kernels"] == pytest.approx(
                r["gemm_measured_s"] + r["gap_s"] * r["gemm_kernels"] - r["gemm_plan_s"], rel=1e-9)
    lib = {r["key"]: r for r in graph if r["term"] == "launch.library_fixed"}
    # a decode step's fused norms, conv updates and state updates (at B = 32 the Mamba-2 state update's
    # programs, analytic/chain.py state_tile_cta)
    for b in (1, 32):
        assert lib[f"model/mamba2-130m/mamba_ssm/decode/cuda-graph/b{b}_l2048"]["lib_parts"] == [
            "conv1d", "norm", "ssm_scan"]
    # at B = 1 transformerpp's SDPA (cuDNN) decode runs a split kernel and its reduction (lean_reduction_kernel,
    # in the attention part since measure/models/kernel_map.py maps cuDNN's helper kernels): two launches per call,
    # as the plan's split-KV pair, so the attention part counts too
    assert lib["model/transformerpp-125m/mamba_ssm/decode/cuda-graph/b1_l2048"]["lib_parts"] == ["attention", "norm"]
    for r in lib.values():
        assert r["value_s"] * r["lib_kernels"] == pytest.approx(
            r["lib_measured_s"] + r["gap_s"] * r["lib_kernels"] - r["lib_plan_s"], rel=1e-9)
    usable = {r["key"] for r in lib.values() if r["usable"]}
    assert "model/transformerpp-125m/mamba_ssm/decode/cuda-graph/b32_l2048" not in usable
    assert "model/mamba-130m/mamba_ssm/decode/cuda-graph/b1_l2048" in usable
    spec, used = held_out_spec(get_spec("h200-sxm"), rows, "mamba2-130m")
    e = next(e for e in used if e["key"] == "launch.library_fixed")
    assert "mamba2-130m/" not in e["method"] and "mamba-130m/" in e["method"]


def test_library_kernels_pay_the_library_fixed_time():
    """Each Triton or CUDA-extension launch of a call adds launch.library_fixed to its device time; ATen
    and cuBLAS launches do not."""
    from ssmbench.analytic.workloads.models import get_model
    from ssmbench.analytic.workloads.report import predict
    spec = get_spec("h200-sxm")
    value = parse(next(m.value for m in spec.measured if m.key == "launch.library_fixed"), "time")
    no_lib = base_spec(spec)
    ops = [predict(get_model("mamba2-130m"), s, "decode", 1, 2048, with_searches=False, runtime="cuda-graph")["ops"]
           for s in (spec, no_lib)]
    gemm = parse(next(m.value for m in spec.measured if m.key == "launch.gemm_fixed"), "time")
    for with_, without in zip(*ops):
        extra = {"conv1d": 1, "ssd": 1, "rmsnorm": 1, "gated_rmsnorm": 1}.get(with_["op"], 0) * value
        extra += gemm if with_["impl"] == "cublas" else 0.0
        assert with_["achievable"]["gpu_s"] - without["achievable"]["gpu_s"] == pytest.approx(
            with_["launches"] * extra, rel=1e-6, abs=1e-12), with_["op"]


def test_a_repeated_key_stands_for_its_median_record():
    """Three records of one key (results/h200/2026-12-04/host-noise): the median one stands, not the latest."""
    from ssmbench.measure.models.records import latest_records
    paths = find_model_runs(ROOT / "results" / "h200" / "2026-12-04" / "host-noise")
    key = "model/mamba2-130m/mamba_ssm/decode/mamba-ssm/b1_l2048"
    latest = next(r for r in latest_records(paths) if r["key"] == key)
    standing = next(r for r in standing_records(paths) if r["key"] == key)
    times = sorted(r["time_s"]["median"] for r in __import__("json").loads(paths[0].read_text())["records"]
                   if r["key"] == key and r["status"] == "ok")
    assert len(times) == 3
    assert standing["time_s"]["median"] == times[1] != latest["time_s"]["median"]


def test_a_skipped_record_does_not_stand_for_a_key_measured_before(tmp_path):
    """results/h200/2026-12-05/train-issue skipped mamba2-attn-k4-130m's training step (the deadline came first):
    the record of 2026-12-03 keeps standing for the key; a key with only a skipped record keeps that one."""
    import json

    from ssmbench.measure.models.records import latest_records
    key = "model/mamba2-attn-k4-130m/mamba_ssm/train/mamba-ssm/b8_l2048"
    paths = [p for run in (RUN, ROOT / "results" / "h200" / "2026-12-05" / "train-issue") for p in find_model_runs(run)]
    skipped = [r for p in paths for r in json.loads(p.read_text())["records"] if r["key"] == key]
    assert sorted(r["status"] for r in skipped) == ["ok", "skipped"]
    for pick in (latest_records, standing_records):
        assert next(r for r in pick(paths) if r["key"] == key)["status"] == "ok"
    only = [p for p in paths if "train-issue" in str(p)]
    assert next(r for r in latest_records(only) if r["key"] == key)["status"] == "skipped"


def test_repeats_carry_the_host_reference_where_the_records_have_one():
    """results/h200/2026-12-04/host-noise-b: each key's Python-step range of its host reference (two host
    states, ~30 and ~50 ns); the records of 2026-12-03 have none."""
    from ssmbench.measure.models.records import repeat_spread
    rows = {r["key"]: r for r in repeat_spread(find_model_runs(ROOT / "results" / "h200" / "2026-12-04" / "host-noise-b"))}
    lo, hi = rows["model/transformerpp-125m/mamba_ssm/decode/mamba-ssm/b1_l2048"]["host_python_s"]
    assert 25e-9 < lo < 35e-9 and 45e-9 < hi < 60e-9
    old = repeat_spread(find_model_runs(RUN))
    assert all(r["host_python_s"] is None for r in old)
