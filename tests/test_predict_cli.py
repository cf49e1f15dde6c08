"""CLI: ``models list``, ``predict``, ``sweep`` and ``plot``; JSON keys; bad input exits 2 without a traceback."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest

import ssmbench.cli as cli
from ssmbench.analytic import sweep
from ssmbench.analytic.registry import AnalyticError
from ssmbench.analytic.workloads.evaluate import analyze
from ssmbench.analytic.workloads.models import get_model
from ssmbench.analytic.workloads.phases import plan
from ssmbench.analytic.roofline import SpecTable
from ssmbench.hwspecs import get_spec

MODULES = ("ssmbench.commands.predict", "ssmbench.commands.plot")


@pytest.fixture
def run(monkeypatch, capsys):
    # only these modules' commands: the test does not depend on other subsystems' command modules
    monkeypatch.setattr(cli, "COMMAND_MODULES", MODULES)

    def _run(*argv):
        try:
            code = cli.main(list(argv))
        except SystemExit as exc:  # argparse's own errors
            code = exc.code
        out = capsys.readouterr()
        return code, out.out, out.err
    return _run


def test_models_list_json(run):
    code, out, _ = run("models", "list", "--json")
    assert code == 0
    models = {m["id"]: m for m in json.loads(out)["models"]}
    assert {"mamba-130m", "jamba-v0.1", "llama-3-8b", "nemotron-h-8b"} <= set(models)
    assert models["jamba-v0.1"]["active_params"] < models["jamba-v0.1"]["params"]


def test_models_list_table(run):
    code, out, _ = run("models", "list")
    assert code == 0 and "mamba2-2.7b" in out and "KV/token" in out


def test_predict_json_has_total_and_per_op_rows(run):
    code, out, _ = run("predict", "--model", "llama-3.2-1b", "--hw", "h200-sxm", "--phase", "prefill",
                       "--batch", "2", "--seqlen", "1024", "--json")
    assert code == 0
    r = json.loads(out)
    t = r["total"]
    assert t["time_s"] > 0 and t["bottleneck"] in ("tensor", "vector", "special_function", "dram", "cache", "launch")
    assert t["label"] == "analytic bound" and r["label"] == "analytic bound"
    assert set(t["memory_bytes"]) >= {"weights", "kv_cache", "state", "activations"}
    ops = r["ops"]
    assert ops and {"label", "op", "impl", "mode", "flops_tensor", "bytes_executed", "intensity_flop_per_byte",
                    "time_s", "bottleneck", "bound_s"} <= set(ops[0])
    assert any(o["op"] == "attention_causal" for o in ops)
    assert sum(o["time_s"] for o in ops) == pytest.approx(t["time_s"])
    assert r["layers"] and all(c["origin"] in ("measured", "datasheet", "unknown") for c in r["spec"]["ceilings"])


def test_predict_decode_reports_both_launch_regimes_and_searches(run):
    code, out, _ = run("predict", "--model", "mamba-1.4b", "--phase", "decode", "--batch", "4", "--seqlen", "16",
                       "--context", "2048", "--json")
    assert code == 0
    t = json.loads(out)["total"]
    assert set(t["regimes"]) == {"eager", "graph"}
    assert t["generated_tokens"] == 16 and t["mean_context"] == pytest.approx(2048 + 7.5)
    assert "compute_bound_batch" in t and "crossover" in t


def test_predict_csv_and_table(run):
    code, out, _ = run("predict", "--model", "mamba-130m", "--seqlen", "512", "--csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows and rows[0]["op"] == "embedding" and "bound_dram_s" in rows[0]
    code, out, _ = run("predict", "--model", "mamba-130m", "--seqlen", "512")
    assert code == 0 and "analytic bound" in out and "Per layer block" in out


def test_predict_from_config_json(run, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8,
        "num_key_value_heads": 2, "intermediate_size": 1024, "vocab_size": 32000}))
    code, out, _ = run("predict", "--model", str(tmp_path / "config.json"), "--json", "--seqlen", "256")
    assert code == 0 and json.loads(out)["model"]["layers"] == 4


def test_sweep_writes_csv_and_json(run, tmp_path):
    out_csv = tmp_path / "s.csv"
    code, _, err = run("sweep", "--models", "mamba-130m,qwen2.5-0.5b", "--hw", "h200-sxm", "--phases",
                       "prefill,decode", "--batch", "1,8", "--seqlen", "256:1024:x2", "--out", str(out_csv))
    assert code == 0 and "wrote 24 rows" in err
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 24 and float(rows[0]["time_s"]) > 0
    out_json = tmp_path / "s.json"
    code, _, _ = run("sweep", "--models", "mamba-130m", "--hw", "h200-sxm", "--phases", "train", "--batch", "1",
                     "--seqlen", "512", "--out", str(out_json))
    data = json.loads(out_json.read_text())
    assert code == 0 and data["rows"][0]["phase"] == "train" and "analytic bound" in data["label"]


@pytest.mark.parametrize("kind, extra", [
    ("roofline", []), ("roofline", ["--model", "none"]),
    ("scaling", ["--model", "mamba-130m,qwen2.5-0.5b", "--lengths", "256:4096:x4"]),
    ("crossover", ["--model", "mamba-2.8b", "--baseline", "gpt3-2.7b", "--lengths", "256:65536:x4"]),
])
@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plots_are_written(run, tmp_path, kind, extra, suffix):
    if "--model" not in extra:
        extra = ["--model", "mamba-2.8b"] + extra
    path = tmp_path / f"fig{suffix}"
    code, _, err = run("plot", kind, "--out", str(path), *extra)
    assert code == 0, err
    assert path.stat().st_size > 1000
    if suffix == ".svg":
        text = path.read_text()
        assert "analytic bound" in text
        if kind == "roofline":
            assert "FLOP" in text and "dram bandwidth" in text and "tensor bf16" in text


def test_predict_plot_option(run, tmp_path):
    path = tmp_path / "r.png"
    code, _, _ = run("predict", "--model", "mamba-130m", "--seqlen", "256", "--plot", str(path))
    assert code == 0 and path.stat().st_size > 1000


@pytest.mark.parametrize("argv, message", [
    (["predict", "--model", "mamba-9b"], "unknown model 'mamba-9b'"),
    (["predict", "--hw", "tpu-v9"], "unknown spec id 'tpu-v9'"),
    (["predict", "--batch", "0"], "batch must be a positive integer"),
    (["predict", "--phase", "prefill", "--context", "100"], "--context applies to the decode phase only"),
    (["predict", "--phase", "decode", "--optimizer", "adamw"], "an optimizer step ends a train step"),
    (["plot", "roofline", "--out", "x.pdf"], "must end in .png or .svg"),
    (["sweep", "--models", "mamba-130m", "--batch", "-1"], "positive integer"),
    (["predict", "--impl", "ssd"], "write op=implementation"),
    (["predict", "--model", "llama-3.2-1b", "--impl", "attention_causal=flash9"], "no implementation 'flash9'"),
])
def test_bad_input_exits_2_with_one_message(run, argv, message):
    code, out, err = run(*argv)
    assert code == 2
    assert message in err
    assert "Traceback" not in err and err.count("ssmbench: error:") == 1


@pytest.mark.parametrize("command", ["predict", "sweep", "plot"])
def test_unknown_phase_is_an_argparse_error(run, command, tmp_path):
    extra = ["crossover", "--out", str(tmp_path / "x.png")] if command == "plot" else []
    code, _, err = run(command, *extra, "--phases", "prefill,serve")
    assert code == 2 and "invalid choice: 'serve'" in err and "Traceback" not in err


def test_unsupported_config_json_in_a_real_process(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "rwkv", "hidden_size": 1}))
    code = f"import sys, ssmbench.cli as c; c.COMMAND_MODULES = {MODULES!r}; sys.exit(c.main(sys.argv[1:]))"
    p = subprocess.run([sys.executable, "-c", code, "predict", "--model", str(cfg)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2
    assert "model_type 'rwkv' is not supported" in p.stderr and "Traceback" not in p.stderr


# --impl: checked, and the same choices in the crossover ---------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["--impl", "foo=bar"], "unknown op 'foo'; valid ops: a_from_log, adamw, add, attention_causal"),
    (["--impl", "ssd=nope"], "no implementation 'nope'; valid: chunked, quadratic, recurrent"),
    (["--phase", "decode", "--impl", "ssd=quadratic"],
     "'quadratic' has no rule for mode 'decode' (its modes: fwd); implementations with a decode rule: chunked, recurrent"),
    (["--impl", "attention_causal=fa3"], "attention_causal, which mamba2-2.7b does not run in prefill"),
    (["--phase", "decode", "--logits", "all"], "--logits all applies to prefill only"),
])
def test_predict_impl_and_logits_errors(run, argv, message):
    code, _, err = run("predict", "--model", "mamba2-2.7b", *argv)
    assert code == 2 and message in err and err.count("ssmbench: error:") == 1


def test_decode_does_not_run_another_implementations_forward():
    with pytest.raises(AnalyticError, match="no rule for mode 'decode'"):
        plan(get_model("mamba2-2.7b"), "decode", {"ssd": "quadratic"})
    calls = plan(get_model("mamba2-2.7b"), "decode", {"ssd": "recurrent"})
    assert {(c.impl, c.mode) for c in calls if c.op == "ssd"} == {("recurrent", "decode")}


def test_crossover_uses_the_predictions_impls(run):
    base = ["predict", "--model", "mamba2-2.7b", "--json"]
    _, out, _ = run(*base)
    default = json.loads(out)["total"]["crossover"]
    code, out, _ = run(*base, "--impl", "ssd=quadratic")
    c = json.loads(out)["total"]["crossover"]
    assert code == 0 and c["impls"] == {"ssd": "quadratic"}
    expected = sweep.crossover(get_model("mamba2-2.7b"), None, get_spec("h200-sxm"), impls={"ssd": "quadratic"})
    assert c["length"] == expected["length"] != default["length"]


# verdict at the requested point, capacity beside the compute-bound batch --------------------------------

def test_predict_verdict_at_the_requested_point(run, monkeypatch):
    code, out, _ = run("predict", "--model", "mamba2-2.7b", "--batch", "2", "--seqlen", "8192", "--json")
    t = json.loads(out)["total"]
    v = t["verdict"]
    assert code == 0 and v["baseline"] == t["crossover"]["baseline"] == "gpt3-2.7b"
    _, out, _ = run("predict", "--model", "gpt3-2.7b", "--batch", "2", "--seqlen", "8192", "--json")
    assert v["baseline_time_s"] == pytest.approx(json.loads(out)["total"]["time_s_ignoring_capacity"])
    assert v["model_time_s"] == pytest.approx(t["time_s_ignoring_capacity"])
    assert v["speedup"] == pytest.approx(v["baseline_time_s"] / v["model_time_s"])
    assert (v["batch"], v["length"], v["phase"]) == (2, 8192, "prefill")
    monkeypatch.setenv("COLUMNS", "400")
    _, out, _ = run("predict", "--model", "mamba2-2.7b", "--batch", "2", "--seqlen", "8192")
    assert "baseline gpt3-2.7b: time (analytic bound)" in out and f"speedup {v['speedup']:.3g}x" in out


PROFILE = "results/h200/2026-12-02/calibration/profile.json"


def test_calibrated_verdict_names_the_ops_not_covered(run):
    code, out, _ = run("predict", "--model", "mamba-130m", "--impl", "rmsnorm=torch_eager", "--calibration", PROFILE,
                       "--calibration-backend", "conv1d=causal_conv1d.causal_conv1d_fn",
                       "--calibration-backend", "attention_causal=torch.sdpa.flash", "--json")
    c = json.loads(out)["total"]["verdict"]["calibrated"]
    assert code == 0 and c["speedup"] is None and c["crossover"] is None
    # besides mlp.mlp, the small ops of the block plans that the H200 has not measured (left at their bound)
    assert c["not_covered"] == {"model": ["mamba.A", "mamba.dt_bias_fp32", "mamba.conv_out_rows", "mamba.bc_contiguous",
                                          "mamba.residual"],
                                "baseline": ["attn.kv_append", "attn.residual", "mlp.mlp", "mlp.residual"]}
    # the default baseline is the transformer nearest in parameters: Transformer++ 125M (no RoPE)
    assert "baseline (transformerpp-125m): attn.kv_append, attn.residual, mlp.mlp" in c["result"]


def test_calibrated_verdict_where_both_models_are_covered(monkeypatch, request):
    from ssmbench.analytic.workloads.report import predict
    from ssmbench.calibrate.apply import add_calibration
    from ssmbench.calibrate.profile import read_profile
    from ssmbench.verdict import add_calibrated_verdict
    # the small block-plan ops the H200 has not measured yet (residual adds, copies, RoPE, the cache
    # write, A = -exp(A_log)) are taken out of the plans here: this test is about the verdict where the
    # profile covers everything else
    from ssmbench.analytic.workloads import phases
    real_add = phases._Builder.add

    def add(self, label, block, n, op, *a, **k):
        if op not in ("add", "copy", "cast", "rope", "kv_append", "a_from_log"):
            real_add(self, label, block, n, op, *a, **k)

    monkeypatch.setattr(phases._Builder, "add", add)
    phases._plan.cache_clear()
    request.addfinalizer(phases._plan.cache_clear)  # no plan without them outlives this test
    m, spec, profile = get_model("mamba-130m"), get_spec("h200-sxm"), read_profile(PROFILE)
    kw = dict(dtype="bf16", prefer="measured", launch=None, bytes_basis="executed", recompute=False, logits="last",
              impls={"rmsnorm": "torch_eager", "gated_mlp": "torch_eager"})
    backends = {"conv1d": "causal_conv1d.causal_conv1d_fn", "attention_causal": "torch.sdpa.flash"}
    r = predict(m, spec, "prefill", 1, 4096, **{**kw, "impls": {"rmsnorm": "torch_eager"}})
    add_calibration(r, profile, spec, {"conv1d": backends["conv1d"]})
    add_calibrated_verdict(r, m, profile, spec, backends, kw)
    c = r["total"]["verdict"]["calibrated"]
    b = predict(get_model(r["total"]["verdict"]["baseline"]), spec, "prefill", 1, 4096, with_searches=False,
                **{**kw, "impls": {"rmsnorm": "torch_eager", "gated_mlp": "torch_eager"}})
    add_calibration(b, profile, spec, {"attention_causal": backends["attention_causal"]})
    assert c["label"] == "calibrated" and c["not_covered"] == {"model": [], "baseline": []}
    assert c["baseline_estimate_s"] == pytest.approx(b["total"]["calibrated"]["estimate_s"])
    assert c["speedup"] == pytest.approx(c["baseline_estimate_s"] / r["total"]["calibrated"]["estimate_s"])
    assert c["crossover"]["result"] and c["crossover"]["range"] == [16, 1 << 20]


def test_decode_reports_the_largest_batch_in_device_memory(run, monkeypatch):
    code, out, _ = run("predict", "--model", "llama-3.2-1b", "--phase", "decode", "--seqlen", "32768", "--json")
    t = json.loads(out)["total"]
    most = t["max_batch_in_memory"]["batch"]
    table = SpecTable.of([get_spec("h200-sxm")])
    fits = analyze(get_model("llama-3.2-1b"), "decode", table, [most, most + 1], [32768]).fits[0, :, 0]
    assert code == 0 and list(fits) == [True, False] and "analytic estimate" in t["max_batch_in_memory"]["label"]
    assert t["compute_bound_batch"]["batch"] is None and f"batches above {most} do not fit" in t["compute_bound_batch"]["result"]
    monkeypatch.setenv("COLUMNS", "400")
    _, out, _ = run("predict", "--model", "llama-3.2-1b", "--phase", "decode", "--seqlen", "32768")
    assert f"largest batch in device memory at context 32768 (analytic estimate) │ batch {most}" in out


# one flag vocabulary; several specs or models side by side ---------------------------------------------

def test_predict_several_specs_side_by_side(run, monkeypatch):
    code, out, _ = run("predict", "--hw", "h200-sxm,a100-80gb-sxm", "--seqlen", "1024", "--json")
    rs = json.loads(out)
    assert code == 0 and [r["spec"]["id"] for r in rs] == ["h200-sxm", "a100-80gb-sxm"]
    # a100-80gb-sxm has no measured values: both specs on datasheet ceilings
    assert {r["spec"]["prefer"] for r in rs} == {"datasheet"} and "a100-80gb-sxm has no measured" in rs[0]["spec"]["ceilings_rule"]
    monkeypatch.setenv("COLUMNS", "400")
    code, out, _ = run("predict", "--models", "mamba-130m,qwen2.5-0.5b", "--seqlen", "1024")
    assert code == 0 and out.count("Totals side by side") == 1 and "Per op" not in out
    header = next(line for line in out.splitlines() if "quantity" in line)
    assert "mamba-130m" in header and "qwen2.5-0.5b" in header
    code, _, err = run("predict", "--hw", "h200-sxm,h100-sxm", "--csv")
    assert code == 2 and "--csv: give one value each" in err


def test_flag_spellings_across_commands(run, tmp_path):
    code, out, _ = run("predict", "--models", "mamba-130m", "--phases", "prefill,decode", "--batch", "1,2",
                       "--seqlen", "256", "--json")
    assert code == 0 and [(r["phase"], r["batch"]) for r in json.loads(out)] == [
        ("prefill", 1), ("prefill", 2), ("decode", 1), ("decode", 2)]
    code, out, _ = run("sweep", "--model", "mamba-130m", "--phase", "decode", "--hw", "h200-sxm", "--batch", "4",
                       "--seqlen", "512", "--json")
    assert code == 0 and json.loads(out)["rows"][0]["phase"] == "decode"
    code, _, err = run("plot", "crossover", "--out", str(tmp_path / "c.png"), "--model", "mamba-130m",
                       "--seqlen", "256:4096:x4", "--batch", "1,2")
    assert code == 2 and "--batch: plot crossover draws one value, got 2" in err


def test_sweep_across_specs_uses_one_kind_of_ceiling(run):
    code, out, err = run("sweep", "--models", "mamba-130m", "--hw", "h200-sxm,a100-80gb-sxm", "--phases", "prefill",
                         "--batch", "1", "--seqlen", "1024", "--json")
    data = json.loads(out)
    assert code == 0 and data["meta"]["prefer"] == "datasheet" and "a100-80gb-sxm has no measured" in data["meta"]["ceilings"]
    h200 = next(r for r in data["rows"] if r["spec"] == "h200-sxm")
    cols = sweep.sweep([get_model("mamba-130m")], [get_spec("h200-sxm")], ["prefill"], [1], [1024], prefer="datasheet")
    assert h200["time_s"] == pytest.approx(cols["time_s"][0]) and h200["ceilings"] == "datasheet"
    code, out, _ = run("sweep", "--models", "mamba-130m", "--hw", "h200-sxm", "--phases", "prefill", "--batch", "1",
                       "--seqlen", "1024", "--json")
    assert json.loads(out)["rows"][0]["ceilings"] == "measured where present"


# sweep output: exact counts, formats ------------------------------------------------------------------

SWEEP = ("sweep", "--models", "mamba-130m", "--hw", "h200-sxm", "--phases", "prefill", "--batch", "1",
         "--seqlen", "1000000,1048576")


def test_sweep_counts_stay_exact_integers(run, tmp_path):
    code, out, _ = run(*SWEEP)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and [r["length"] for r in rows] == ["1000000", "1048576"] and rows[0]["batch"] == "1"
    assert all("e+" not in r[c] and "." not in r[c] for r in rows for c in sweep.COUNT_COLUMNS if r[c])
    code, out, _ = run(*SWEEP, "--json")
    rows = json.loads(out)["rows"]
    assert [r["length"] for r in rows] == [1000000, 1048576]
    assert all(type(r[c]) is int for r in rows for c in ("batch", "length", "weights_bytes"))


@pytest.mark.parametrize("argv, message", [
    (["--out", "sweep.xlsx"], "cannot tell the format from the extension .xlsx"),
    (["--out", "sweep"], "cannot tell the format from the extension (none)"),
    (["--format", "parquet"], "parquet is a binary format: give --out FILE.parquet"),
    (["--json", "--out", "s.json"], "--json prints JSON to stdout"),
])
def test_sweep_output_format_errors(run, argv, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(*SWEEP, *argv)
    assert code == 2 and message in err and not list(tmp_path.iterdir())


def test_sweep_parquet_without_pyarrow_says_to_install_it(run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    code, _, err = run(*SWEEP, "--out", str(tmp_path / "s.parquet"))
    assert code == 2 and "pip install pyarrow" in err and not (tmp_path / "s.parquet").exists()


def test_sweep_writes_parquet_with_pyarrow(run, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    code, _, err = run(*SWEEP, "--out", str(tmp_path / "s.parquet"))
    table = pq.read_table(tmp_path / "s.parquet").to_pydict()
    assert code == 0 and "as parquet" in err and table["length"] == [1000000, 1048576]


# plot crossover -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["--lengths", "0,100"], "--seqlen must be a positive integer, got 0"),
    (["--seqlen=-5:100:+5"], "--seqlen must be a positive integer, got -5"),
    (["--baseline", "mamba-2.8b"], "the model and the baseline are both mamba-2.8b"),
])
def test_plot_crossover_bad_input(run, tmp_path, argv, message):
    path = tmp_path / "c.png"
    code, _, err = run("plot", "crossover", "--out", str(path), "--model", "mamba-2.8b", *argv)
    assert code == 2 and message in err and not path.exists()


def test_plot_crossover_outside_the_plotted_range_is_said_so(run, tmp_path):
    path = tmp_path / "c.svg"
    found = sweep.crossover(get_model("mamba-2.8b"), get_model("gpt3-2.7b"), get_spec("h200-sxm"))["length"]
    assert found > 2048
    code, _, err = run("plot", "crossover", "--out", str(path), "--model", "mamba-2.8b", "--baseline", "gpt3-2.7b",
                       "--lengths", "256:2048:x2")
    assert code == 0 and f"faster from length {found}: outside the plotted range 256..2048 (not drawn)" in err
    assert "crossover: " not in path.read_text()
