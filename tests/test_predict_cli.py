"""CLI: ``models list``, ``predict``, ``sweep`` and ``plot``; JSON keys; bad input exits 2 without a traceback."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest

import ssmbench.cli as cli

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
    (["plot", "roofline", "--out", "x.pdf"], "must end in .png or .svg"),
    (["sweep", "--models", "mamba-130m", "--phases", "serve"], "unknown phase 'serve'"),
    (["sweep", "--models", "mamba-130m", "--batch", "-1"], "positive integer"),
    (["predict", "--impl", "ssd"], "write op=implementation"),
    (["predict", "--model", "llama-3.2-1b", "--impl", "attention_causal=flash9"], "no implementation 'flash9'"),
])
def test_bad_input_exits_2_with_one_message(run, argv, message):
    code, out, err = run(*argv)
    assert code == 2
    assert message in err
    assert "Traceback" not in err and err.count("ssmbench: error:") == 1


def test_unknown_phase_is_an_argparse_error(run):
    code, _, err = run("predict", "--phase", "serve")
    assert code == 2 and "invalid choice: 'serve'" in err and "Traceback" not in err


def test_unsupported_config_json_in_a_real_process(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "rwkv", "hidden_size": 1}))
    code = f"import sys, ssmbench.cli as c; c.COMMAND_MODULES = {MODULES!r}; sys.exit(c.main(sys.argv[1:]))"
    p = subprocess.run([sys.executable, "-c", code, "predict", "--model", str(cfg)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2
    assert "model_type 'rwkv' is not supported" in p.stderr and "Traceback" not in p.stderr
