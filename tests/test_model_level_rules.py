"""Model-level rules of the whole-model prediction (issue #15), each from a hand derivation:

- the cache re-reads of a kernel (``execution.Traits.l2_rereads``) are part of a model step's device
  time, as they are of the op-level estimate: Mamba-1's selective scan re-reads B and C once per channel;
- the causal attention of the Hugging Face and SDPA-fallback modules runs on SDPA's cuDNN backend in
  prefill and training (``phases.SDPA_BACKEND``): cuDNN's traits (wgmma, softmax phased between the GEMMs), not
  FlashAttention-2's, and the calibrated estimate takes the cuDNN group;
- an eager norm's kernels are ``elementwise`` in the kernel map (``kernel_map.PART_OF_IMPL``);
- the class rule counts the SM's engines together (``characterize.roof_class``).
"""

from __future__ import annotations

import numpy as np
import pytest
from ssmbench.analytic.achievable import AchievableTable
from ssmbench.analytic.execution import traits
from ssmbench.analytic.workloads.models import get_model
from ssmbench.analytic.workloads.phases import SDPA_BACKEND, plan
from ssmbench.analytic.workloads.report import predict
from ssmbench.calibrate.characterize import roof_class
from ssmbench.hwspecs import get_spec
from ssmbench.hwspecs.ceilings import ceiling
from ssmbench.measure.models.kernel_map import part_of_op


@pytest.fixture(scope="module")
def spec():
    return get_spec("h200-sxm")


def _row(p: dict, op: str) -> dict:
    return next(o for o in p["ops"] if o["op"] == op)


def test_scan_rereads_are_in_the_model_step(spec):
    # mamba-130m (E = 1536, N = 16, 24 layers) prefill at B = 16, L = 2048: each of the 24 scan calls
    # re-reads B and C [B, N, L] once per channel: 2 x B x E x L x N x 2 bytes (bf16)
    B, E, L, N, layers = 16, 1536, 2048, 16, 24
    reread = layers * 2 * B * E * L * N * 2
    p = predict(get_model("mamba-130m"), spec, "prefill", B, L, with_searches=False)
    row = _row(p, "mamba1_scan")
    l2_bw = float(AchievableTable.of([spec]).l2_bw[0])
    # the scan's phases run one after another (serial): its engines' times plus the re-read time; its
    # (chunk, state) chain paced by the SM's intake of B and C (analytic/chain.py, lane_state_cta) is the other
    # term of the max: per layer ceil(16 x 1536 / (132 x 4)) = 47 waves x 16 steps x 4 blocks x 8 KiB x
    # compute.chain_step.lane_state_cta, which binds here
    t = {r: row["bound_s"].get(r) or 0.0 for r in ("vector", "special_function")}
    serial = t["vector"] + t["special_function"] + reread / l2_bw
    step = ceiling(spec, "compute.chain_step.lane_state_cta").value
    chain = layers * 47 * 16 * 4 * 8 * step
    assert chain > serial
    node = row["achievable"]["gpu_s"] - max(serial, chain)
    assert 0 <= node < 1e-3 * row["achievable"]["gpu_s"] + 24 * 20e-6  # only the per-kernel fixed time is left
    assert p["total"]["achievable"]["gpu_s"] >= row["achievable"]["gpu_s"]


def test_rereads_agree_on_the_point_path(spec):
    from ssmbench.analytic.roofline import SpecTable
    from ssmbench.analytic.workloads.point import FAST, analyze_point
    model, table = get_model("mamba-130m"), SpecTable.of([spec], "measured")
    general = predict(model, spec, "prefill", 16, 2048, with_searches=False)["total"]["achievable"]["gpu_s"]
    fast = analyze_point(model, "prefill", table, 16, 2048, achievable=True)[0]
    assert fast.path == FAST and fast.achievable["gpu_s"] == pytest.approx(general, rel=1e-9)


def test_sdpa_modules_run_cudnn_in_prefill_and_train():
    model = get_model("transformerpp-125m")
    for phase in ("prefill", "train"):
        for style, expect in (("hf", SDPA_BACKEND), ("library_sdpa", SDPA_BACKEND), ("library", None)):
            att = [c for c in plan(model, phase, modules=style) if c.op == "attention_causal"]
            assert att and all(c.backend == expect for c in att), (phase, style)
    # decode keeps its split-KV rule, with the implementation's own traits
    assert all(c.backend is None for c in plan(model, "decode", modules="hf"))


def test_cudnn_attention_is_timed_with_cudnn_traits(spec):
    # at B = 4, L = 32768 the attention is FLOP-bound: with cuDNN's traits (wgmma at the full tensor rate, the
    # softmax phased between the GEMMs) its device time is the tensor time + the larger of the softmax's
    # special-function and vector times, below FlashAttention-2's (mma.sync rate, every phase added)
    model = get_model("transformerpp-125m")
    sdpa = _row(predict(model, spec, "prefill", 4, 32768, with_searches=False, flash_attn=False), "attention_causal")
    fa2 = _row(predict(model, spec, "prefill", 4, 32768, with_searches=False, flash_attn=True), "attention_causal")
    assert sdpa["backend"] == SDPA_BACKEND and fa2["backend"] is None
    t = traits("attention_causal", "fa2", SDPA_BACKEND)
    assert t.engines == "phased" and t.tensor_instr == "full"
    b = sdpa["bound_s"]  # the bound's times at the attained rates: the cuDNN call's engine times
    assert sdpa["achievable"]["gpu_s"] == pytest.approx(b["tensor"] + max(b["special_function"], b["vector"]),
                                                        rel=0.01)
    assert fa2["achievable"]["gpu_s"] > 1.2 * sdpa["achievable"]["gpu_s"]


def test_cudnn_rows_take_the_cudnn_group():
    from pathlib import Path

    from ssmbench.calibrate.apply import add_calibration
    from ssmbench.calibrate.profile import read_profile
    prof = Path(__file__).resolve().parent.parent / "results" / "h200" / "2026-12-02" / "calibration" / "profile.json"
    spec = get_spec("h200-sxm")
    p = predict(get_model("transformerpp-125m"), spec, "prefill", 1, 2048, with_searches=False, flash_attn=False)
    add_calibration(p, read_profile(prof), spec)
    row = _row(p, "attention_causal")
    assert row["calibrated"] is not None and SDPA_BACKEND in row["calibrated"]["group"]


def test_eager_norms_land_in_elementwise():
    assert part_of_op("rmsnorm", "torch_eager") == "elementwise"
    assert part_of_op("gated_rmsnorm", "torch_eager") == "elementwise"
    assert part_of_op("rmsnorm", "fused") == part_of_op("rmsnorm") == "norm"


def test_engines_together_bind():
    # tensor at 0.49 and special function at 0.41 of their roofs: the SMs ~90% busy -> tensor-bound
    cls, frac = roof_class({"tensor": 0.49e-3, "special_function": 0.41e-3, "dram": 0.1e-3}, 1e-3)
    assert cls == "tensor" and frac["tensor"] == pytest.approx(0.49)
    # engines together at 0.4, DRAM at 0.3: nothing near its roof -> latency
    assert roof_class({"tensor": 0.2e-3, "vector": 0.2e-3, "dram": 0.3e-3}, 1e-3)[0] == "latency"
    # one resource at its roof still wins over the engines' sum
    assert roof_class({"dram": 0.6e-3, "tensor": 0.3e-3, "vector": 0.3e-3}, 1e-3)[0] == "dram"
    assert np.isclose(sum(roof_class({"vector": 0.3e-3, "special_function": 0.25e-3}, 1e-3)[1].values()), 0.55)


def test_fused_add_norm_moves_an_fp32_residual():
    from ssmbench.analytic.cases import case_cost
    # n = 2 x 3 x 4 = 24 elements: the fp32 residual read (4 B each) and written (4 B each), one add per element,
    # no launch of its own (inside the norm's kernel), whatever the model dtype
    for dtype in ("bf16", "fp32"):
        c = case_cost("add", {"B": 2, "L": 3, "D": 4}, impl="fused_norm", dtype=dtype)
        assert (c.bytes_read, c.bytes_written, c.vector, c.launches) == (96, 96, 24, 0)


def test_mamba_ssm_blocks_fuse_the_residual_add():
    model = get_model("mamba2-130m")
    adds = {c.impl for c in plan(model, "prefill") if c.op == "add"}
    assert adds == {"fused_norm"}
    assert {c.impl for c in plan(model, "prefill", modules="hf") if c.op == "add"} == {"torch_eager"}
    assert part_of_op("add", "fused_norm") == "norm" and part_of_op("add", "torch_eager") == "elementwise"


def test_class_judged_at_the_calibrated_part_time():
    from ssmbench.calibrate.characterize import CLASS_BASIS, characterize_record
    # one part (gemm), bound 0.6 ms on the tensor engine; achievable 0.7 ms (0.86 of the roof: tensor), the
    # calibrated estimate 1.5 ms (0.4: latency), measured 1.4 ms (0.43: latency): the class is judged at 1.5 ms
    op = {"op": "linear", "impl": "cublas", "bound_s": {"tensor": 0.6e-3},
          "achievable": {"gpu_s": 0.7e-3, "host_eager_s": 0.1e-3}, "calibrated": {"estimate_s": 1.5e-3}}
    pred = {"total": {"achievable": {"time_s": 0.7e-3, "host_s": 0.1e-3, "gpu_s": 0.7e-3}}, "ops": [op]}
    rec = {"key": "k", "model": "m", "runner": "r", "phase": "prefill", "runtime": "mamba-ssm", "batch": 1,
           "seqlen": 1, "time_s": {"median": 1.4e-3},
           "profile": {"parts": {"gemm": {"time_s": 1.4e-3}}, "host_idle_s": 0.0}}
    row = next(p for p in characterize_record(rec, pred)["parts"] if p["part"] == "gemm")
    assert (row["predicted_class"], row["measured_class"]) == ("latency", "latency")
    assert row["predicted_class_basis"] == CLASS_BASIS[0]
    # an isolated eager call that was host-bound (3 ms to issue, 0.7 ms on the device): its calibrated time
    # counts at its device share, 1.5 x 0.7 / 3 = 0.35 ms, as the calibrated step composes it: tensor
    op["achievable"]["host_eager_s"] = 3e-3
    row = next(p for p in characterize_record(rec, pred)["parts"] if p["part"] == "gemm")
    assert row["predicted_class"] == "tensor" and row["measured_class"] == "latency"
    op["achievable"]["host_eager_s"] = 0.1e-3
    op.pop("calibrated")
    row = next(p for p in characterize_record(rec, pred)["parts"] if p["part"] == "gemm")
    assert row["predicted_class"] == "tensor" and row["predicted_class_basis"] == CLASS_BASIS[1]


def test_host_noise_suite_and_summary(tmp_path):
    import json
    import sys
    from pathlib import Path

    from ssmbench.measure.models.suite import load_suite
    repo = Path(__file__).resolve().parents[1]
    suite = load_suite(repo / "measure" / "suites" / "models" / "host_noise_h200.yaml")
    keys = [(e["model"], c.phase, c.batch) for e, cases in suite.by_entry() for c in cases]
    assert len(keys) == 18 and all(keys.count(k) == 3 for k in keys)  # each host-bound case three times
    sys.path.insert(0, str(repo / "scripts"))
    import host_noise

    # a synthetic model-run file (made-up times, a fixture): one key at 10, 12 and 11 ms, one record not ok
    recs = [{"key": "model/m/r/prefill/e/b1_l2048", "status": "ok", "time_s": {"median": t},
             "profile": {"host_idle_s": 0.8 * t}} for t in (0.010, 0.012, 0.011)]
    recs.append({"key": "model/m/r/decode/e/b1_l2048", "status": "error"})
    (tmp_path / "model-run-x.json").write_text(json.dumps({"records": recs}))
    (row,) = host_noise.rows(sorted(tmp_path.glob("model-run-*.json")))
    assert (row["n"], row["median_s"], row["in_order_s"]) == (3, 0.011, [0.010, 0.012, 0.011])
    assert row["spread"] == pytest.approx(0.002 / 0.011) and row["idle_share"] == pytest.approx(0.8)
    assert host_noise.main([str(tmp_path)]) == 0 and host_noise.main([]) == 2
    assert host_noise.host_speed(sorted(tmp_path.glob("model-run-*.json"))) is None  # no host reference
    # steps that follow the host's Python speed exactly (synthetic): correlation 1, slope 1, nothing left
    ref = [{"key": f"model/m/r/{ph}/e/b1_l2048", "status": "ok", "time_s": {"median": t * q / 30e-9},
            "host_reference": {"before": {"python_s": q, "launch_s": 1e-5}, "after": {"python_s": q, "launch_s": 1e-5}}}
           for ph, t in (("prefill", 0.01), ("decode", 0.02)) for q in (30e-9, 50e-9, 33e-9)]
    (tmp_path / "model-run-y.json").write_text(json.dumps({"records": ref}))
    h = host_noise.host_speed([tmp_path / "model-run-y.json"])
    assert (h["n"], h["correlation"], h["slope"]) == (6, pytest.approx(1.0), pytest.approx(1.0))
    assert h["sd_raw"] > 0.1 and h["sd_after"] == pytest.approx(0.0, abs=1e-12)


def test_repeats_split_keys_by_pace_and_report_their_spread():
    from ssmbench.calibrate.characterize import repeats

    rows = [{"key": "a", "n": 2, "spread": 0.40, "idle_share": 0.97, "in_order_s": [1.0, 1.4]},  # host-bound
            {"key": "b", "n": 2, "spread": 0.02, "idle_share": 0.10, "in_order_s": [1.0, 1.02]},
            {"key": "c", "n": 3, "spread": 0.10, "idle_share": 0.60, "in_order_s": [1.0, 1.1, 1.0]},
            {"key": "d", "n": 1, "spread": 0.0, "idle_share": 0.99, "in_order_s": [1.0]}]    # measured once: not a repeat
    rep = repeats(rows)
    assert [r["key"] for r in rep["rows"]] == ["a", "b", "c"]
    host = rep["by_pace"]["host"]
    assert (host["n_keys"], host["median_spread"], host["max_spread"]) == (2, pytest.approx(0.25), 0.40)
    assert rep["by_pace"]["gpu"]["n_keys"] == 1 and rep["by_pace"]["gpu"]["max_spread"] == 0.02
    # each record of "c" (three records) against the median of the other two: 1.0 / 1.05, 1.1 / 1.0, 1.0 / 1.05
    loo = host["leave_one_out"]
    assert loo["n"] == 3 and loo["median_abs"] == pytest.approx(1 - 1 / 1.05) and loo["p90_abs"] == pytest.approx(
        0.1 - 0.2 * (0.1 - (1 - 1 / 1.05)))
    assert rep["by_pace"]["gpu"]["leave_one_out"]["n"] == 0  # no GPU-bound key was measured three times


def test_dram_roof_of_path_kernels_is_the_path_rate():
    """Bytes moved by ATen's non-vectorized kernels are at their DRAM roof at the path's attained rate: a
    part at 0.4 of the copy-bandwidth bound whose kernels' path runs at 0.6 of the copy rate is DRAM-bound."""
    from ssmbench.calibrate.characterize import characterize_record
    op = {"op": "add", "impl": "torch_eager", "bound_s": {"dram": 0.4e-3},
          "achievable": {"gpu_s": 0.7e-3, "host_eager_s": 0.0, "dram_path_factor": 1.0}}
    pred = {"total": {"achievable": {"time_s": 1e-3, "host_s": 0.0, "gpu_s": 1e-3}}, "ops": [op]}
    rec = {"key": "k", "model": "m", "runner": "r", "phase": "prefill", "runtime": "mamba-ssm", "batch": 1,
           "seqlen": 1, "time_s": {"median": 1e-3},
           "profile": {"parts": {"elementwise": {"time_s": 1e-3}}, "host_idle_s": 0.0}}
    row = next(p for p in characterize_record(rec, pred)["parts"] if p["part"] == "elementwise")
    assert row["measured_class"] == "latency"
    op["achievable"]["dram_path_factor"] = 1 / 0.6
    row = next(p for p in characterize_record(rec, pred)["parts"] if p["part"] == "elementwise")
    assert row["measured_class"] == "dram" and row["measured_roof_fraction"]["dram"] == pytest.approx(0.4 / 0.6)


def test_dram_path_factor_of_a_prediction():
    """The achievable row's dram_path_factor: the copy bandwidth over the path's rate for a strided copy, 1
    for a contiguous kernel."""
    from ssmbench.analytic.workloads.models import get_model
    from ssmbench.analytic.workloads.report import predict
    from ssmbench.hwspecs import get_spec
    from ssmbench.hwspecs.units import parse
    spec = get_spec("h200-sxm")
    p = predict(get_model("transformerpp-125m"), spec, "decode", 32, 32768, with_searches=False,
                runtime="cuda-graph", flash_attn=False)
    rate = {m.key: parse(m.value, "bandwidth") for m in spec.measured
            if m.key in ("memory.dram.bandwidth", "memory.dram.path.strided_copy")}
    rk = next(o for o in p["ops"] if o["op"] == "repeat_kv")
    assert rk["achievable"]["dram_path_factor"] == pytest.approx(
        rate["memory.dram.bandwidth"] / rate["memory.dram.path.strided_copy"], rel=1e-6)
    assert next(o for o in p["ops"] if o["op"] == "lm_head")["achievable"]["dram_path_factor"] == 1.0


def test_host_reference_check_conditions_on_each_reference(tmp_path):
    """scripts/host_reference_check.py: host-bound records whose steps follow the launch reference exactly
    (synthetic times on a stored record's workload) leave no error once conditioned on it, and bad input
    exits 2."""
    import json
    import sys
    from pathlib import Path

    import numpy as np

    repo = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(repo / "scripts"))
    import host_reference_check as hrc

    src = json.loads((repo / "results/h200/2026-12-03/models-b/model-run-20261203T181901.343056Z-905.json")
                     .read_text(encoding="utf-8"))
    base = next(r for r in src["records"] if r["key"] == "model/mamba-130m/mamba_ssm/prefill/mamba-ssm/b1_l2048")
    recs = []
    for launch in (8e-6, 10e-6, 13e-6):  # the step is 2 ms per us of launch reference (made-up, a fixture)
        step = 2e-3 * launch / 1e-6
        ref = {"launch_s": launch, "python_s": 40e-9}
        recs.append({**base, "time_s": {"median": step}, "profile": {"host_idle_s": 0.9 * step},
                     "host_reference": {"before": ref, "after": ref}})
    recs.append({**base, "time_s": {"median": 0.02}, "profile": {"host_idle_s": 0.001}})  # GPU-bound: left out
    (tmp_path / "model-run-x.json").write_text(json.dumps({"meta": src.get("meta"), "records": recs}))
    found = hrc.rows(sorted(tmp_path.glob("model-run-*.json")))
    assert len(found) == 3
    ratio = np.array([r["step_s"] / r["host_s"] for r in found])
    launch = np.array([r["launch_s"] for r in found])
    assert hrc.errors(ratio / (np.median(ratio / launch) * launch)) == "median 0.0 %, p90 0.0 %"
    assert hrc.main([str(tmp_path)]) == 0
    assert hrc.main([]) == 2 and hrc.main([str(tmp_path / "nothing-here")]) == 2


def test_host_issue_check_sets_the_step_against_its_measured_parts(tmp_path, capsys):
    """scripts/host_issue_check.py: on a stored record's workload with made-up parts (a fixture), the issue time
    over the host estimate and the step over the larger part come out as built; records without host_issue are
    left out; no record or a bad folder exits 2."""
    import json
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(repo / "scripts"))
    import host_issue_check as hic

    src = json.loads((repo / "results/h200/2026-12-03/models-b/model-run-20261203T181901.343056Z-905.json")
                     .read_text(encoding="utf-8"))
    base = next(r for r in src["records"] if r["key"] == "model/mamba-130m/mamba_ssm/prefill/mamba-ssm/b1_l2048")
    (tmp_path / "model-run-x.json").write_text(json.dumps({"meta": src.get("meta"), "records": [base]}))
    assert hic.main([str(tmp_path)]) == 2  # stored records carry no host_issue
    recs = [{**base, "time_s": {"median": 0.03}, "profile": {**base["profile"], "busy_s": 0.01},
             "host_issue": {"issue_s": 0.024}},
            {**base, "time_s": {"median": 0.02}, "profile": {**base["profile"], "busy_s": 0.02},
             "host_issue": {"issue_s": 0.005}}]
    (tmp_path / "model-run-x.json").write_text(json.dumps({"meta": src.get("meta"), "records": recs}))
    found = hic.rows([tmp_path / "model-run-x.json"])
    assert [r["step_s"] / max(r["issue_s"], r["busy_s"]) for r in found] == [1.25, 1.0]
    assert found[0]["host_s"] == found[1]["host_s"] > 0  # the same workload, the spec's runtime terms
    assert hic.main([str(tmp_path)]) == 0
    assert "step / max(issue, busy) - 1|: median 12.5 %" in capsys.readouterr().out
    assert hic.main([]) == 2 and hic.main([str(tmp_path / "nothing-here")]) == 2


def test_host_issue_check_sets_a_runs_training_factor_beside_its_forward_factor(tmp_path, capsys):
    """scripts/host_issue_check.py's per run and model table: issue / host estimate of the host-paced forward and
    training steps (issue >= busy; a record whose kernels outlast its issue is left out), and their ratio."""
    import json
    import sys
    from pathlib import Path

    import pytest

    repo = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(repo / "scripts"))
    import host_issue_check as hic

    src = json.loads((repo / "results/h200/2026-12-03/models-b/model-run-20261203T181901.343056Z-905.json")
                     .read_text(encoding="utf-8"))
    base = next(r for r in src["records"] if r["key"] == "model/mamba-130m/mamba_ssm/prefill/mamba-ssm/b1_l2048")
    prof = {**base["profile"], "busy_s": 0.01}
    recs = [{**base, "time_s": {"median": 0.03}, "profile": prof, "host_issue": {"issue_s": 0.024}},
            {**base, "time_s": {"median": 0.03}, "profile": {**prof, "busy_s": 0.05}, "host_issue": {"issue_s": 0.02}},
            {**base, "key": base["key"].replace("prefill", "train"), "phase": "train", "time_s": {"median": 0.09},
             "profile": prof, "host_issue": {"issue_s": 0.08}}]
    (tmp_path / "model-run-x.json").write_text(json.dumps({"meta": src.get("meta"), "records": recs}))
    found = hic.rows([tmp_path / "model-run-x.json"])
    fwd, train = found[0], found[2]
    (g,) = hic.by_run_and_model(found)
    assert (g["model"], g["n_forward"], g["n_train"]) == ("mamba-130m", 1, 1)  # the queue-bound record left out
    assert g["forward"] == pytest.approx(0.024 / fwd["host_s"]) and g["train"] == pytest.approx(0.08 / train["host_s"])
    assert g["train_over_forward"] == pytest.approx(g["train"] / g["forward"])
    assert hic.main([str(tmp_path)]) == 0
    assert "| mamba-130m | 1 |" in capsys.readouterr().out
