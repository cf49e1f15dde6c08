"""Whole-model tooling (issue #15) on the CPU: the kernel map, workload files as library configs, the
model suite, model-run files and their schema, ``predict --runtime``, and ``ssmbench characterize`` on a
SYNTHETIC model-run file written by this test (a test fixture: made-up times, never results).
The GPU runner itself is exercised by ``test_gpu_model_runner`` (gpu marker)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ssmbench.analytic.registry import all_ops
from ssmbench.analytic.workloads.hf_config import model_from_hf
from ssmbench.analytic.workloads.models import get_model
from ssmbench.cli import main
from ssmbench.errors import UserError
from ssmbench.measure.models import configs, kernel_map
from ssmbench.measure.models.records import ModelRunWriter, new_record, read_model_run
from ssmbench.measure.models.suite import SuiteError, load_suite

REPO = Path(__file__).resolve().parent.parent
SUITE = REPO / "measure" / "suites" / "models" / "models_h200.yaml"

KERNELS = {  # names as torch.profiler reports them (H200, torch 2.11) -> expected part
    "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT": "gemm",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas": "gemm",
    "void selective_scan_fwd_kernel<Selective_Scan_fwd_kernel_traits<32, 16, 1, true, true, true, false, c10::BFloat16, float, c10::BFloat16> >(SSMParamsBase)": "ssm_scan",
    "_chunk_scan_fwd_kernel": "ssm_scan",
    "_selective_scan_update_kernel": "ssm_scan",
    "mamba3_siso_fwd_kernel": "ssm_scan",
    "void causal_conv1d_fwd_kernel<Causal_conv1d_fwd_kernel_traits<128, 4, true, c10::BFloat16, c10::BFloat16> >(ConvParamsBase)": "conv1d",
    "_layer_norm_fwd_1pass_kernel": "norm",
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4> >(pytorch_flash::Flash_fwd_params)": "attention",
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x128x128_4x1x1_kernel0_0": "attention",
    # cuDNN SDPA's helper kernels, as the whole-model profiles of 2026-12-03/04 name them
    "void cudnn::fusion::lean_reduction_kernel<false, false, false>(void*, float*, float*, float*, float*, "
    "float const*, float*, float*, float*, float*, float*, unsigned int, unsigned int)": "attention",
    "void cudnn::fusion::compute_dot_do_o_specialized<true, 64>(void const*, void const*, void*, void*, "
    "unsigned int)": "attention",
    "void cudnn::fusion::convert_dq_to_16bits<true>(void const*, void*, unsigned int, unsigned int)": "attention",
    # nn.Embedding's backward for many indices (sort, then PyTorch's segment kernels and cub's unique), and the
    # generic scans and roll of the training steps
    "void at::native::(anonymous namespace)::krn_partials_per_segment<long>(long*, long const*, long const*, long)":
        "embedding",
    "void at_cuda_detail::cub::detail::unique_by_key::DeviceUniqueByKeySweepKernel<at_cuda_detail::cub::detail::"
    "unique_by_key::policy_hub<long, int>::Policy1000, long const*>": "embedding",
    "void at_cuda_detail::cub::detail::scan::DeviceScanKernel<at_cuda_detail::cub::detail::scan::policy_hub<long, "
    "long, long, unsigned int>::Policy1000, long const*, long*>": "elementwise",
    "void at::native::tensor_kernel_scan_innermost_dim<float, std::plus<float> >(float*, float const*)": "elementwise",
    "void at::native::roll_cuda_kernel<long>(long const*, long*, long, long, long, long, long, long)": "elementwise",
    "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>": "embedding",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3> >": "elementwise",
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>": "loss",
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<4> >": "optimizer",
    "Memcpy DtoD (Device -> Device)": "memory",
    "triton_poi_fused_add_mul_0": "elementwise",
}


@pytest.mark.parametrize("name,part", sorted(KERNELS.items()))
def test_kernel_names_map_to_their_part(name, part):
    rule = kernel_map.classify(name)
    assert rule is not None and rule.part == part, (name, rule)


def test_unknown_kernels_are_reported_unmapped_with_their_share():
    b = kernel_map.breakdown([("nvjet_tst_x", 3e-3), ("mystery_kernel_xyz", 1e-3), ("nvjet_tst_x", 2e-3)], steps=2)
    assert b["busy_s"] == pytest.approx(3e-3) and b["launches"] == pytest.approx(1.5)
    assert b["parts"]["gemm"]["share"] == pytest.approx(5 / 6)
    assert b["unmapped"]["names"] == ["mystery_kernel_xyz"] and b["unmapped"]["share"] == pytest.approx(1 / 6)


def test_stored_profiles_are_reclassified_with_the_current_table():
    # a profile stored when cuDNN's reduction kernel was unmapped: its rows (per step) give the parts again
    lean = "void cudnn::fusion::lean_reduction_kernel<false, false, false>(void*)"
    stored = {"busy_s": 9e-6, "launches": 2.0, "host_idle_s": 1e-6,
              "parts": {"attention": {"time_s": 7e-6, "share": 7 / 9, "launches": 1.0}},
              "kernels": [{"name": "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16", "part": "attention",
                           "op": "attention_causal", "time_s": 7e-6, "count": 1.0},
                          {"name": lean, "part": "unmapped", "op": None, "time_s": 2e-6, "count": 1.5}],
              "unmapped": {"time_s": 2e-6, "share": 2 / 9, "names": [lean]}}
    fresh = kernel_map.reclassified(stored)
    assert fresh["parts"]["attention"]["time_s"] == pytest.approx(9e-6)
    assert fresh["parts"]["attention"]["launches"] == pytest.approx(2.5)
    assert fresh["unmapped"]["time_s"] == pytest.approx(0.0) and fresh["unmapped"]["names"] == []
    assert fresh["host_idle_s"] == stored["host_idle_s"] and fresh["busy_s"] == stored["busy_s"]
    assert kernel_map.reclassified({"busy_s": 1.0}) == {"busy_s": 1.0}  # no per-kernel rows: unchanged
    # a record keeps its longest kernels only: the time of those it left out stays in the parts it was counted in
    truncated = {**stored, "busy_s": 10e-6, "parts": {"attention": {"time_s": 7e-6, "share": 0.7, "launches": 1.0},
                                                      "gemm": {"time_s": 1e-6, "share": 0.1, "launches": 1.0}}}
    fresh = kernel_map.reclassified(truncated)
    assert fresh["parts"]["gemm"] == {"time_s": 1e-6, "share": pytest.approx(0.1), "launches": 1.0}
    assert fresh["parts"]["attention"]["share"] == pytest.approx(0.9)


def test_range_annotations_on_the_gpu_timeline_are_not_counted_as_kernel_time():
    # a training step profiled with CPU activity: torch.optim's range is mirrored onto the GPU timeline and spans
    # the optimizer's own kernels (results/h200/2026-12-05/train-issue, Llama-3.2-1B: 16.3 ms of 178.8 ms "busy")
    adam = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdam>"
    stored = {"busy_s": 12e-3, "launches": 3.0, "host_idle_s": 0.0,
              "parts": {"optimizer": {"time_s": 5e-3, "share": 5 / 12, "launches": 2.0},
                        "gemm": {"time_s": 1e-3, "share": 1 / 12, "launches": 0.0}},
              "kernels": [{"name": "Optimizer.step#AdamW.step", "part": "unmapped", "op": None, "time_s": 6e-3,
                           "count": 1.0},
                          {"name": adam, "part": "optimizer", "op": "adamw", "time_s": 5e-3, "count": 2.0}],
              "unmapped": {"time_s": 6e-3, "share": 0.5, "names": ["Optimizer.step#AdamW.step"]}}
    assert kernel_map.is_annotation("Optimizer.step#AdamW.step") and not kernel_map.is_annotation(adam)
    fresh = kernel_map.measured_profile({"profile": stored, "time_s": {"median": 10e-3}})
    assert fresh["busy_s"] == pytest.approx(6e-3) and fresh["launches"] == pytest.approx(2.0)
    assert fresh["host_idle_s"] == pytest.approx(4e-3)  # the step less the kernels, no longer clipped at zero
    assert fresh["unmapped"]["time_s"] == pytest.approx(0.0) and fresh["unmapped"]["names"] == []
    assert fresh["parts"]["optimizer"]["share"] == pytest.approx(5 / 6)
    assert fresh["annotations_dropped"] == ["Optimizer.step#AdamW.step"]
    assert stored["busy_s"] == 12e-3  # the stored record is not changed
    # without the step, the idle time grows by the dropped span
    assert kernel_map.reclassified(stored)["host_idle_s"] == pytest.approx(6e-3)


def test_every_registered_op_has_a_part():
    import ssmbench.analytic  # noqa: F401  (registers every op)
    missing = [op for op in all_ops() if op not in kernel_map.PART_OF_OP]
    assert not missing
    assert set(kernel_map.PART_OF_OP.values()) <= set(kernel_map.PARTS)


@pytest.mark.parametrize("model_id", ["mamba-130m", "mamba2-130m", "mamba2-attn-k4-130m", "vim-s-bidir",
                                      "graph-mamba-style"])
def test_mamba_ssm_config_round_trips_to_the_same_model(model_id):
    m = get_model(model_id)
    back = model_from_hf(configs.mamba_ssm_config(m), "test")
    assert back.params == m.params and back.layer_sequence == m.layer_sequence


@pytest.mark.parametrize("model_id,arch", [("qwen2.5-0.5b", "qwen2"), ("llama-3.2-1b", "llama"), ("mamba2-130m", "mamba2")])
def test_hf_config_round_trips_to_the_same_model(model_id, arch):
    m = get_model(model_id)
    back = model_from_hf(configs.hf_config(m, arch), "test")
    assert back.params == m.params and back.layer_sequence == m.layer_sequence


def test_configs_refuse_what_the_library_cannot_build():
    with pytest.raises(configs.ConfigError, match="RoPE"):
        configs.mamba_ssm_config(get_model("mamba2attn-2.7b"))  # rope_dim 64: needs flash-attn's rotary
    with pytest.raises(configs.ConfigError, match="attention, gated MLP"):
        configs.hf_config(get_model("mamba-130m"), "llama")
    with pytest.raises(configs.ConfigError, match="expected one of"):
        configs.hf_config(get_model("llama-3.2-1b"), "gpt2")


def test_the_device_suite_loads_and_lists_its_cases():
    s = load_suite(SUITE)
    cases = [c for _, cs in s.by_entry() for c in cs]
    assert {c.phase for c in cases} == {"prefill", "decode", "train"}
    assert {c.runtime for c in cases} >= {"hf-eager", "mamba-ssm", "cuda-graph"}
    runners = [e["runner"] for e in s.entries]
    assert runners[:2] == ["hf", "hf"]  # no mamba-ssm while selective_scan_cuda compiles
    assert {"vision", "graph"} <= set(runners)


def test_bad_suites_are_refused_with_the_reason(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("entries:\n  - {model: mamba-130m, runner: mamba_ssm, prefill: [[1, 0]]}\n")
    with pytest.raises(SuiteError, match="positive integers"):
        load_suite(p)
    p.write_text("entries:\n  - {model: mamba2attn-2.7b, runner: mamba_ssm}\n")
    with pytest.raises(SuiteError, match="RoPE"):
        load_suite(p)
    p.write_text("entries:\n  - {model: mamba-130m, runner: hf, arch: llama}\n")
    with pytest.raises(SuiteError, match="attention, gated MLP"):
        load_suite(p)


def _synthetic_run(folder: Path) -> Path:
    """A model-run file of made-up records (TEST FIXTURE, not measurements)."""
    w = ModelRunWriter(folder, {"device": {"name": "NVIDIA H200"}, "note": "synthetic test fixture"})
    entry = {"model": "mamba2-130m", "runner": "mamba_ssm"}
    for phase, runtime, b, s, t in (("prefill", "mamba-ssm", 4, 2048, 6e-3), ("decode", "cuda-graph", 1, 2048, 4e-4),
                                    ("train", "mamba-ssm", 4, 2048, 30e-3)):
        r = new_record(entry, phase, runtime, b, s, "bf16")
        kernels = [("nvjet_tst_128x256", 0.45 * t), ("_chunk_scan_fwd_kernel", 0.25 * t),
                   ("causal_conv1d_fwd_kernel", 0.05 * t), ("_layer_norm_fwd_1pass_kernel", 0.1 * t),
                   ("unknown_kernel_abc", 0.05 * t)]
        prof = kernel_map.breakdown(kernels, 1)
        prof.update(steps=1, host_idle_s=max(0.0, t - prof["busy_s"]), method="synthetic")
        r.update(status="ok", time_s={"median": t, "p20": t, "p80": t, "p95": t, "mean": t, "min": t, "max": t, "n": 5},
                 energy={"joules_per_call": 600.0 * t, "avg_power_w": 600.0, "wall_s_per_call": t}, profile=prof,
                 params=128989632, duration_s=1.0)
        w.add(r)
    skipped = new_record(entry, "train", "mamba-ssm", 64, 2048, "bf16")
    skipped.update(status="oom", reason="CUDA out of memory (synthetic)")
    w.add(skipped)
    return w.finish()


def test_model_run_files_match_their_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    path = _synthetic_run(tmp_path)
    doc = read_model_run(path)
    schema = json.loads((REPO / "docs" / "schemas" / "model.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(doc))
    assert not errors, errors[:3]
    bad = dict(doc, records=[dict(doc["records"][0], status="finished")])
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(bad))
    # the host reference (measure/models/host_reference.py), optional: records before 2026-12-04 lack it
    ref = {"label": "measurement", "method": "m", "before": {"launch_s": 4e-6, "python_s": 3e-8},
           "after": {"launch_s": 5e-6, "python_s": 3e-8}}
    v = jsonschema.Draft202012Validator(schema)
    assert not list(v.iter_errors(dict(doc, records=[dict(doc["records"][0], host_reference=ref)])))
    for broken in ({**ref, "before": {"launch_s": 0, "python_s": 3e-8}}, {**ref, "after": None}):
        assert list(v.iter_errors(dict(doc, records=[dict(doc["records"][0], host_reference=broken)])))
    # the host's runtime API calls and PyTorch's sync report (measure/models/host_api.py), optional
    r0 = doc["records"][0]
    api = {"runtime_api": {"cudaLaunchKernel": {"calls": 40.0, "time_s": 2e-4}}, "syncs": {"count": 0, "messages": []}}
    assert not list(v.iter_errors(dict(doc, records=[dict(r0, profile={**r0["profile"], **api})])))
    for broken in ({"runtime_api": {"cudaMalloc": {"calls": 1.0}}}, {"syncs": {"count": 1}}):
        assert list(v.iter_errors(dict(doc, records=[dict(r0, profile={**r0["profile"], **broken})])))
    # the autotuners' picks (measure/autotune_picks.py), optional: records before 2026-12-05 lack them
    picks = {"method": "m", "kernels": {"mamba_ssm.ops.triton.ssd_chunk_scan._chunk_scan_fwd_kernel": {
        "picks": [{"key": ["256", "64", "128", "True", "torch.bfloat16"], "config": "BLOCK_SIZE_M: 64, num_warps: 4"}],
        "last_timings_ms": {"BLOCK_SIZE_M: 64, num_warps: 4": [0.30, 0.29, 0.31]}}}}
    assert not list(v.iter_errors(dict(doc, records=[dict(r0, autotune_picks=picks)])))
    kernel = picks["kernels"]["mamba_ssm.ops.triton.ssd_chunk_scan._chunk_scan_fwd_kernel"]
    for broken in ({"method": "m"}, {**picks, "kernels": {"k": {**kernel, "picks": [{"key": ["1"]}]}}}):
        assert list(v.iter_errors(dict(doc, records=[dict(r0, autotune_picks=broken)])))


def test_runtime_api_summary_per_step():
    from ssmbench.measure.models.host_api import runtime_api
    events = [("cudaLaunchKernel", 2e-6)] * 6 + [("cudaStreamSynchronize", 3e-3)] * 2 + [("aten::mm", 1e-5)]
    out = runtime_api(events, steps=2)
    assert list(out) == ["cudaStreamSynchronize", "cudaLaunchKernel"]  # by host time, the longest first
    assert out["cudaLaunchKernel"] == pytest.approx({"calls": 3.0, "time_s": 6e-6})
    assert out["cudaStreamSynchronize"] == pytest.approx({"calls": 1.0, "time_s": 3e-3})
    with pytest.raises(ValueError):
        runtime_api(events, steps=0)


def test_model_run_files_are_not_read_as_op_results(tmp_path):
    from ssmbench.measure.results import find_results
    path = _synthetic_run(tmp_path)
    found = find_results(tmp_path)
    assert not found.files and found.skipped[0]["path"] == str(path)


def test_characterize_on_a_synthetic_run(tmp_path, capsys):
    _synthetic_run(tmp_path / "runs")
    assert main(["characterize", "--results", str(tmp_path / "runs"), "--format", "json",
                 "--out", str(tmp_path / "c.json"), "--plot", str(tmp_path / "c.png")]) == 0
    doc = json.loads((tmp_path / "c.json").read_text())
    assert (tmp_path / "c.png").stat().st_size > 0
    assert [s["status"] for s in doc["skipped"]] == ["oom"]
    recs = {r["phase"]: r for r in doc["records"]}
    assert set(recs) == {"prefill", "decode", "train"}
    pre = recs["prefill"]
    parts = {p["part"]: p for p in pre["parts"]}
    assert parts["gemm"]["measured_share"] == pytest.approx(0.45) and parts["unmapped"]["predicted_class"] is None
    assert pre["achievable_error"] == pytest.approx(pre["achievable_s"] / 6e-3 - 1)
    assert pre["calibrated_s"] is None and pre["energy_calibrated_at_measured_time_j"] is None
    assert pre["energy_calibrated_j"] is None and doc["summary"]["energy"]["energy_calibrated"]["n"] == 0
    # the energy model alone at the measured time: static power x the window's time + the predicted dynamic energy
    from ssmbench.analytic.workloads.report import predict
    from ssmbench.hwspecs import get_spec
    e = predict(get_model("mamba2-130m"), get_spec("h200-sxm"), "prefill", 4, 2048, with_searches=False,
                runtime="mamba-ssm", dtype="bf16")["total"]["energy"]
    static_w = e["static_j"] / e["time_s_after_power_limit"]
    assert pre["energy_at_measured_time_j"] == pytest.approx(min(static_w * 6e-3 + sum(e["dynamic_j"].values()),
                                                                 700.0 * 6e-3))
    assert pre["energy_at_measured_time_error"] == pytest.approx(pre["energy_at_measured_time_j"] / 3.6 - 1)
    assert doc["summary"]["energy"]["energy_at_measured_time"]["n"] == 3
    assert 0 <= pre["class_agreement_share"] <= 1
    assert doc["summary"]["by_phase"]["train"]["achievable"]["n"] == 1
    assert main(["characterize", "--results", str(tmp_path / "runs")]) == 0
    md = capsys.readouterr().out
    assert "| part |" in md and "what would move it" in md and "analytic estimate at the measured time" in md


def test_characterize_names_a_folder_without_runs(tmp_path, capsys):
    assert main(["characterize", "--results", str(tmp_path)]) == 2
    assert "no model-run files" in capsys.readouterr().err


def test_roof_class_rule():
    from ssmbench.calibrate.characterize import roof_class
    assert roof_class({"dram": 0.8e-3, "tensor": 0.1e-3}, 1e-3)[0] == "dram"
    assert roof_class({"dram": 0.2e-3, "tensor": 0.1e-3}, 1e-3)[0] == "latency"
    assert roof_class({}, 1e-3)[0] == "latency" and roof_class({"dram": 1.0}, 0.0)[0] is None


def test_predict_runtime_option(capsys):
    from ssmbench import predict
    kw = dict(hw="h200-sxm", phase="decode", batch=1, seqlen=2048)
    eager = predict("qwen2.5-0.5b", runtime="mamba-ssm", **kw).to_dict()["total"]["achievable"]
    hf = predict("qwen2.5-0.5b", runtime="hf-eager", **kw).to_dict()["total"]["achievable"]
    graph = predict("qwen2.5-0.5b", runtime="cuda-graph", **kw).to_dict()["total"]["achievable"]
    assert graph["launch_regime"] == "graph" and eager["launch_regime"] == "eager"
    assert graph["host_s"] < eager["host_s"]
    # hf_module and compiled are measured on the H200 (whole-model records; runtime probe): charged, not named
    assert "launch.host.hf_module" not in hf["not_modelled"]
    assert hf["runtimes"]["hf-eager"]["host_unknown"] == [] and hf["host_s"] > eager["host_s"]
    assert hf["runtimes"]["torch-compile"]["host_unknown"] == []
    assert eager["runtimes"]["cuda-graph"]["saving_s"] >= 0
    with pytest.raises(UserError, match="contradicts"):
        predict("qwen2.5-0.5b", runtime="cuda-graph", launch="eager", **kw)


def test_runtime_probe_arithmetic():
    from ssmbench.measure.models.runtime_probe import TINY_LLAMA, hf_module_cost, plan_op_calls
    assert plan_op_calls(TINY_LLAMA) == 23  # embedding + 2 x (norm, qkv, rope, kv_append, attention, o, add, norm, mlp, add) + norm + head
    assert hf_module_cost(5e-6, 1e-3, 20, 23) == pytest.approx((1e-3 - 20 * 5e-6) / 23)
    with pytest.raises(RuntimeError, match="no module cost"):
        hf_module_cost(5e-6, 50e-6, 20, 23)


def test_native_backward_cost_arithmetic():
    from ssmbench.measure.models.runtime_probe import backward_kernel_cost
    assert backward_kernel_cost(3e-3, 1e-3, 150, 50) == pytest.approx(2e-3 / 100)
    for bad in ((1e-3, 1e-3, 150, 50), (3e-3, 1e-3, 50, 50)):
        with pytest.raises(RuntimeError, match="no per-kernel cost"):
            backward_kernel_cost(*bad)


@pytest.mark.gpu
def test_gpu_model_runner(tmp_path):
    """One small model through the runner on a GPU: a record per case, a profile with parts."""
    pytest.importorskip("torch").cuda.is_available() or pytest.skip("no CUDA device")
    suite = tmp_path / "s.yaml"
    suite.write_text("timing: {target_s: 0.05}\nenergy_window_s: 0.2\nentries:\n"
                     "  - {model: graph-mamba-style, runner: graph, prefill: [[8, 64]], train: [[8, 64]]}\n")
    from ssmbench.measure.models.runner import run
    assert run(str(suite), str(tmp_path / "out"), 120.0) == 0
    doc = read_model_run(next((tmp_path / "out").glob("model-run-*.json")))
    assert [r["phase"] for r in doc["records"]] == ["prefill", "train"]
    ok = [r for r in doc["records"] if r["status"] == "ok"]
    assert all(r["profile"]["busy_s"] > 0 for r in ok)
    # the host reference around the timed calls: a launch costs microseconds of host time, a loop step less
    for r in ok:
        for side in ("before", "after"):
            ref = r["host_reference"][side]
            assert 1e-7 < ref["launch_s"] < 1e-3 and 0 < ref["python_s"] < ref["launch_s"]
        # the host's runtime API calls: at least one kernel launch per step
        assert any(v["calls"] >= 1 for k, v in r["profile"]["runtime_api"].items() if "Launch" in k)
        assert r["profile"]["syncs"]["count"] >= 0


def test_runtime_probe_observation_is_formatted_in_a_spec_unit():
    """2026-12-03 on the device: the probe died formatting its torch_eager observation (kind 'duration')."""
    from ssmbench.hwspecs.units import parse
    from ssmbench.measure.models.runtime_probe import eager_observation

    obs = eager_observation(4.27e-6)
    assert obs["value"] == "4.27 us" and abs(parse(obs["value"], "time") - 4.27e-6) < 1e-12
    assert obs["name"].startswith("launch.host.torch_eager")


def test_unknown_quantity_kind_names_the_known_ones():
    from ssmbench.hwspecs.units import format_quantity

    with pytest.raises(ValueError, match="unknown quantity kind 'duration'.*time"):
        format_quantity(1.0, "duration")


def test_model_entries_name_the_extension_builds_they_wait_for():
    from ssmbench.measure.models.build import HF_ATTENTION, needed_extensions

    assert needed_extensions({"runner": "hf", "arch": "llama"}) == ()
    for entry in ({"runner": "mamba_ssm"}, {"runner": "vision"}, {"runner": "graph"}, {"runner": "hf", "arch": "mamba2"}):
        assert needed_extensions(entry) == ("selective_scan_cuda", "causal_conv1d_cuda")
    assert HF_ATTENTION["mamba2"] == "eager"  # transformers refuses sdpa for Mamba2ForCausalLM


def test_the_second_device_suite_pairs_whole_models_at_the_same_points():
    """models_h200_b measures Mamba-2 130M and its attention-only partner at identical points first (#16)."""
    from ssmbench.figures.report.wholemodel import ATTENTION, SSM, _info, _matched

    s = load_suite(SUITE.with_name("models_h200_b.yaml"))
    first, second = s.entries[:2]
    points = [{(c.phase, c.runtime, c.batch, c.seqlen) for c in cs} for e, cs in s.by_entry() if e in (first, second)]
    assert points[0] == points[1]
    infos = [_info({"model": e["model"], "params": get_model(e["model"]).params}) for e in (first, second)]
    assert {i.kind for i in infos} == {SSM, ATTENTION} and _matched(*infos)
    assert configs.mamba_ssm_config(get_model(first["model"]))["attn_layer_idx"] == list(range(12))


def test_stored_runtime_probe_files_load_as_spec_fragments():
    """Every committed runtime-probe file is a spec fragment of the two runtime keys, measured in the H200 spec."""
    from ssmbench.hwspecs.ceilings import ceiling
    from ssmbench.hwspecs import get_spec
    from ssmbench.hwspecs.fragment import load_fragment

    files = sorted((REPO / "results" / "h200").rglob("probe-runtime-*.yaml"))
    assert files
    spec = get_spec("h200-sxm")
    for p in files:
        entries = load_fragment(p).entries
        assert {e["key"] for e in entries} == {"launch.host.hf_module", "launch.host.compiled"}
        for e in entries:
            assert ceiling(spec, e["key"]).origin == "measured"


@pytest.mark.gpu
def test_profiled_optimizer_step_lists_its_kernels_not_its_range():
    # torch.optim wraps step() in a record_function range, which kineto mirrors onto the GPU timeline when CPU
    # activity is collected: profile_gpu keeps the kernels and skips the range
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from ssmbench.measure._probe_achievable import profile_gpu

    w = torch.nn.Parameter(torch.randn(1024, 1024, device="cuda"))
    opt = torch.optim.AdamW([w])

    def step():
        w.grad = torch.ones_like(w)
        opt.step()

    step()
    gpu, _host = profile_gpu(step, 2, cpu=True)
    assert gpu and not [n for n, _ in gpu if kernel_map.is_annotation(n)]
    # what it skips: the raw profile holds the range as a device-side event (kineto's gpu_user_annotation)
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        step()
        torch.cuda.synchronize()
    mirrored = [e.name for e in prof.events() if e.device_type == DeviceType.CUDA and e.is_user_annotation]
    assert mirrored and all(kernel_map.is_annotation(n) for n in mirrored), mirrored
