"""``ssmbench predict --calibration FILE``: calibrated estimates beside the analytic bounds, per op and in
total, each labelled; with a profile fitted here on synthetic results from known parameters
(calibrate/synthetic.py), and with a profile fitted on the real H200 results in results/h200/."""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ssmbench.calibrate.estimate import calibrated_estimate
from ssmbench.calibrate.models import MaxEff, Overlap
from ssmbench.calibrate.synthetic import SyntheticGroup, true_time, write_synthetic
from ssmbench.calibrate.profile import read_profile
from ssmbench.calibrate.transfer import TRANSFER_MIN_LOG, TRANSFER_WIDEN
from ssmbench.hwspecs import builtin_dir, get_spec

import ssmbench.cli as cli

ROOT = Path(__file__).resolve().parents[1]
REAL_RESULTS = ROOT / "results" / "h200" / "2026-12-02" / "calibration-torchref"
PREDICT = "ssmbench.commands.predict"
MODEL = ("--model", "llama-3.2-1b")  # H = 32, G = 8, P = 64, d_model 2048, 16 layers

LINEAR = [dict(B=1, L=L, I=I, O=O) for L, I, O in itertools.product([16, 512, 4096], [1024, 4096], [2048, 8192])]
NORM = [dict(B=1, L=L, D=D) for L, D in itertools.product([128, 2048, 16384], [1024, 2048, 8192])]
DECODE_ATTN = [dict(B=B, L=1, S=S, H=32, G=8, P=64) for B, S in itertools.product([1, 4, 16], [1024, 4096, 16384])]


def _groups():
    return [
        SyntheticGroup("linear", "cublas", "torch.matmul", "bf16", "fwd", LINEAR,
                       MaxEff({"t0_s_per_launch": 6e-6, "eff.tensor": 0.7, "eff.dram": 0.85}, ("tensor", "dram"))),
        SyntheticGroup("rmsnorm", "fused", "mamba_ssm", "bf16", "fwd", NORM,
                       Overlap({"t0_s_per_launch": 5e-6, "eff": 0.8, "p": 3.0}, ("dram",))),
        SyntheticGroup("attention_causal", "splitkv", "fa.splitkv", "bf16", "decode", DECODE_ATTN,
                       Overlap({"t0_s_per_launch": 8e-6, "eff": 0.6, "p": 2.0}, ("dram",))),
    ]


def _run(monkeypatch, modules, *argv):
    monkeypatch.setattr(cli, "COMMAND_MODULES", modules)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main([str(a) for a in argv])
        except SystemExit as exc:  # argparse's own errors
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def _calibrate(results, out: Path) -> Path:
    mp = pytest.MonkeyPatch()
    try:
        code, _, err = _run(mp, ("ssmbench.commands.calibrate",), "calibrate", "--results", results,
                            "--hw", "h200-sxm", "--out", out)
    finally:
        mp.undo()
    assert code == 0, err
    return out


@pytest.fixture(scope="module")
def synthetic_profile(tmp_path_factory):
    d = tmp_path_factory.mktemp("synthetic-predict")
    write_synthetic(d / "fit", get_spec("h200-sxm"), _groups(), "NVIDIA H200", noise=0.03, seed=0)
    return _calibrate(d / "fit", d / "h200.calibration.json")


@pytest.fixture(scope="module")
def real_profile(tmp_path_factory):
    if not REAL_RESULTS.is_dir():
        pytest.skip(f"{REAL_RESULTS} not present")
    return _calibrate(REAL_RESULTS, tmp_path_factory.mktemp("real") / "h200.calibration.json")


@pytest.fixture
def predict(monkeypatch):
    def _predict(*argv):
        return _run(monkeypatch, (PREDICT,), "predict", *MODEL, "--hw", "h200-sxm", *argv)
    return _predict


def _json(predict, *argv) -> dict:
    code, out, err = predict(*argv, "--json")
    assert code == 0, err
    return json.loads(out)


PREFILL = ("--phase", "prefill", "--batch", "2", "--seqlen", "1024")


def test_prefill_rows_and_total_json(synthetic_profile, predict):
    plain = _json(predict, *PREFILL)
    r = _json(predict, *PREFILL, "--calibration", synthetic_profile)
    spec = get_spec("h200-sxm")
    truth = {g.op: g for g in _groups()}
    assert [o["time_s"] for o in r["ops"]] == [o["time_s"] for o in plain["ops"]]  # the bounds stay
    assert r["total"]["time_s"] == plain["total"]["time_s"] and r["label"] == "analytic bound"
    covered, uncovered = [], []
    for o in r["ops"]:
        c = o["calibrated"]
        if o["op"] in ("linear", "rmsnorm"):
            covered.append(o)
            assert c["label"] == "calibrated" and c["level"] == 0.8
            assert c["lo_s"] <= c["estimate_s"] <= c["hi_s"]
            assert c["estimate_s"] == pytest.approx(c["per_call_s"] * o["count"])
            # the estimate recovers the synthetic truth at this (unfitted) shape, for every call
            assert c["estimate_s"] == pytest.approx(true_time(truth[o["op"]], spec, o["shape"]) * o["count"], rel=0.1)
        else:
            uncovered.append(o)
            assert c is None
            assert o["calibration_note"].startswith(f"no calibrated group for {o['op']}/{o['impl']} bf16 fwd")
            assert "the profile holds" not in o["calibration_note"]
            assert str(synthetic_profile) not in o["calibration_note"]
    assert {o["op"] for o in uncovered} == {"embedding", "attention_causal", "gated_mlp", "lm_head"} | {"add", "rope", "kv_append"}
    attn = next(o for o in r["ops"] if o["op"] == "attention_causal")
    assert attn["shape"] == {"B": 2, "L": 1024, "S": 1024, "H": 32, "G": 8, "P": 64}

    t = r["total"]["calibrated"]
    bound_part = sum(o["time_s"] for o in uncovered)
    assert t["label"] == "calibrated + analytic bound" and t["level"] == 0.8
    assert t["bound_part_s"] == pytest.approx(bound_part)
    assert t["bound_part_op_calls"] == sum(o["count"] for o in uncovered)
    assert t["estimate_s"] == pytest.approx(sum(o["calibrated"]["estimate_s"] for o in covered) + bound_part)
    assert t["lo_s"] == pytest.approx(sum(o["calibrated"]["lo_s"] for o in covered) + bound_part)
    assert t["hi_s"] is None  # the ops left at their bound have no upper end
    part = t["calibrated_part"]
    assert part["hi_s"] == pytest.approx(sum(o["calibrated"]["hi_s"] for o in covered))
    assert part["op_calls"] == sum(o["count"] for o in covered)
    assert t["not_covered"] == [o["label"] for o in uncovered]
    assert t["tokens_per_s"] == pytest.approx(r["total"]["tokens"] / t["estimate_s"])
    cal = r["calibration"]
    assert cal["profile"] == str(synthetic_profile) and cal["label"] == "calibrated"
    assert cal["profile_spec"] == cal["target_spec"] == "h200-sxm"
    assert "linear/cublas bf16 fwd (torch.matmul)" in cal["holds"]


def test_table_labels_every_number(synthetic_profile, predict, monkeypatch):
    monkeypatch.setenv("COLUMNS", "600")  # wide enough that rich folds no cell over lines
    code, out, err = predict(*PREFILL, "--calibration", synthetic_profile)
    assert code == 0, err
    text = " ".join(out.split())
    for label in ("Per op: analytic bound and calibrated estimate (80% interval)", "analytic bound",
                  "calibrated estimate", "80% interval", "analytic bound (not calibrated)",
                  "no calibrated group for attention_causal/fa2 bf16 fwd",
                  "calibrated + analytic bound estimate (sum over ops)", "of which calibrated",
                  "of which analytic bound", "no upper end", "analytic bound: time (max per op, summed)",
                  "tokens / s (calibrated + analytic bound estimate)", "(torch.matmul)"):
        assert label in text, label


def test_named_backend_reaches_the_profile_and_brackets_print(synthetic_profile, predict, monkeypatch):
    monkeypatch.setenv("COLUMNS", "600")
    code, out, err = predict(*PREFILL, "--calibration", synthetic_profile, "--calibration-backend", "linear=cudnn")
    assert code == 0, err
    # the reason holds "[cudnn]": printed as text, not swallowed as rich markup
    assert "no calibrated group for linear/cublas bf16 fwd [cudnn]" in out


def test_csv_has_calibrated_columns(synthetic_profile, predict):
    code, out, err = predict(*PREFILL, "--calibration", synthetic_profile, "--csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    lin = next(r for r in rows if r["op"] == "linear")
    assert lin["calibrated_label"] == "calibrated" and float(lin["calibrated_level"]) == 0.8
    assert float(lin["calibrated_lo_s"]) <= float(lin["calibrated_estimate_s"]) <= float(lin["calibrated_hi_s"])
    att = next(r for r in rows if r["op"] == "attention_causal")
    assert att["calibrated_label"] == "analytic bound (not calibrated)" and att["calibrated_estimate_s"] == ""
    assert "no calibrated group" in att["calibration_note"]
    code, out, _ = predict(*PREFILL, "--csv")
    assert "calibrated_label" not in out.splitlines()[0]


def test_decode_at_a_mean_context_rounds_and_says_so(synthetic_profile, predict):
    r = _json(predict, "--phase", "decode", "--batch", "8", "--seqlen", "100", "--context", "4000",
              "--calibration", synthetic_profile)
    attn = next(o for o in r["ops"] if o["op"] == "attention_causal")
    assert attn["impl"] == "splitkv" and attn["mode"] == "decode"
    assert attn["shape"]["S"] == 4000 + 99 / 2  # mean context of 100 steps
    s = round(attn["shape"]["S"])
    assert f"S = 4049.5 rounded to {s}" in attn["calibration_note"]
    dims = {**attn["shape"], "S": s}
    e = calibrated_estimate(str(synthetic_profile), "attention_causal", "splitkv", dims, "bf16", "decode")
    assert attn["calibrated"]["estimate_s"] == pytest.approx(e.estimate_s * attn["count"])
    assert attn["calibrated"]["label"] == "calibrated"
    lin = next(o for o in r["ops"] if o["op"] == "linear")
    assert lin["calibrated"] is None and "linear/cublas bf16 decode" in lin["calibration_note"]


def _halfbw_spec(tmp_path) -> Path:
    """The H200 spec under another id with half its datasheet bandwidth and no measured ceilings."""
    data = yaml.safe_load((builtin_dir() / "h200-sxm.yaml").read_text())
    data.update(id="h200-halfbw-test", name="Test accelerator (H200 with half the bandwidth)", hypothetical=True)
    data["memory"]["dram"]["bandwidth"]["value"] = "2.4 TB/s"
    data.pop("measured")
    path = tmp_path / "halfbw.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_another_spec_gives_transferred_estimates(synthetic_profile, monkeypatch, tmp_path):
    spec_file = _halfbw_spec(tmp_path)
    base = ("predict", *MODEL, *PREFILL, "--calibration", synthetic_profile, "--json")
    code, out, err = _run(monkeypatch, (PREDICT,), *base, "--hw", "h200-sxm")
    assert code == 0, err
    own = {o["label"]: o for o in json.loads(out)["ops"]}
    code, out, err = _run(monkeypatch, (PREDICT,), *base, "--hw", spec_file)
    assert code == 0, err
    r = json.loads(out)
    assert r["calibration"]["label"] == "transferred" and r["calibration"]["target_spec"] == "h200-halfbw-test"
    assert "transferred: calibrated interval log bounds" in r["calibration"]["note"]
    assert r["total"]["calibrated"]["label"] == "transferred + analytic bound"
    norm = next(o for o in r["ops"] if o["op"] == "rmsnorm")
    c, c0 = norm["calibrated"], own[norm["label"]]["calibrated"]
    assert c["label"] == "transferred" and c0["label"] == "calibrated"
    assert c["estimate_s"] > c0["estimate_s"]  # half the bandwidth, memory-bound norm
    # the transfer rule widens the group's calibrated interval (on H200 this small norm is host-bound, so
    # its own interval also holds the spread of host speed between machines; on the half-bandwidth spec
    # it is memory-bound and that spread no longer applies)
    group = next(g for g in read_profile(synthetic_profile).groups if g["key"]["op"] == "rmsnorm")
    assert math.log(c["estimate_s"] / c["lo_s"]) >= max(TRANSFER_MIN_LOG,
                                                       -TRANSFER_WIDEN * group["interval"]["log_lo"] - 1e-12)
    monkeypatch.setenv("COLUMNS", "600")
    code, out, _ = _run(monkeypatch, (PREDICT,), *base[:-1], "--hw", spec_file)
    assert "transferred estimate" in out and "transferred + analytic bound estimate (sum over ops)" in out


@pytest.mark.parametrize("content, message", [
    (None, "calibration profile not found"),
    ("{not json", "not valid JSON"),
    ('{"kind": "ssmbench.results", "schema_version": 1}', "not a calibration profile"),
    ('{"kind": "ssmbench.calibration_profile", "schema_version": 99}', "schema_version 99 is not supported"),
])
def test_bad_profile_file_exits_2(predict, tmp_path, content, message):
    path = tmp_path / "profile.json"
    if content is not None:
        path.write_text(content)
    code, out, err = predict("--seqlen", "256", "--calibration", path)
    assert code == 2 and message in err and "Traceback" not in err and out == ""


@pytest.mark.parametrize("argv, message", [
    (("--calibration-backend", "linear=torch_ref"), "--calibration-backend / calibration_backends) need a calibration"),
    (("--calibration-backend", "linear", "--calibration", "P"), "write op=backend"),
    (("--calibration-backend", "conv1d=torch.conv1d", "--calibration", "P"), "which this prediction does not run"),
])
def test_bad_backend_option_exits_2(synthetic_profile, predict, argv, message):
    argv = [synthetic_profile if a == "P" else a for a in argv]
    code, _, err = predict("--seqlen", "256", *argv)
    assert code == 2 and message in err and "Traceback" not in err


def test_predict_without_calibration_does_not_import_calibrate():
    code = ("import sys, io, contextlib\n"
            "import ssmbench.cli as cli\n"
            f"cli.COMMAND_MODULES = ({PREDICT!r},)\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert cli.main(['predict', '--model', 'llama-3.2-1b', '--seqlen', '128', '--json']) == 0\n"
            "loaded = sorted(m for m in sys.modules if m.startswith('ssmbench.calibrate'))\n"
            "assert not loaded, loaded\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr


# Real H200 data --------------------------------------------------------------------------------------

REAL = ("--phase", "prefill", "--batch", "1", "--seqlen", "1024",
        "--impl", "rmsnorm=torch_eager", "--impl", "gated_mlp=torch_eager")


# ops of the block plans that the stored H200 measurements do not cover yet (RoPE, the KV-cache write,
# the residual add, layout copies, casts, A = -exp(A_log), Mamba-3's pre-processing): left at their bound
UNMEASURED = {"add", "rope", "kv_append", "copy", "cast", "a_from_log", "mamba3_prep"}


def test_real_profile_covers_a_plain_pytorch_llama(real_profile, predict):
    """Every op of a Llama prefill in plain PyTorch (and SDPA's flash backend) that the H200 measured is
    calibrated by the H200 profile; the small ops not measured yet stay at their analytic bound, and the
    total says so."""
    r = _json(predict, *REAL, "--calibration", real_profile, "--calibration-backend",
              "attention_causal=torch.sdpa.flash")
    left = [o for o in r["ops"] if o["op"] in UNMEASURED]
    assert {o["op"] for o in left} == {"add", "rope", "kv_append"}
    for o in r["ops"]:
        c = o["calibrated"]
        if o["op"] in UNMEASURED:
            assert c is None and o["calibration_note"].startswith(f"no calibrated group for {o['op']}/")
            continue
        assert c is not None, (o["label"], o["calibration_note"])
        assert c["label"] == "calibrated" and c["lo_s"] <= c["estimate_s"] <= c["hi_s"]
        backend = "torch.sdpa.flash" if o["op"] == "attention_causal" else None
        e = calibrated_estimate(str(real_profile), o["op"], o["impl"], o["shape"], "bf16", o["mode"], backend=backend)
        assert c["estimate_s"] == pytest.approx(e.estimate_s * o["count"])
        assert c["group"].startswith("NVIDIA H200: ")
    t = r["total"]["calibrated"]
    assert t["label"] == "calibrated + analytic bound" and t["not_covered"] == [o["label"] for o in left]
    assert t["bound_part_s"] == pytest.approx(sum(o["time_s"] for o in left))
    assert t["estimate_s"] == pytest.approx(sum(o["calibrated"]["estimate_s"] for o in r["ops"] if o["calibrated"])
                                            + t["bound_part_s"])
    assert r["calibration"]["results"] and all(len(f["sha256"]) == 64 for f in r["calibration"]["results"])


def test_real_profile_with_two_backends_asks_for_one(real_profile, predict):
    r = _json(predict, *REAL, "--calibration", real_profile)
    attn = next(o for o in r["ops"] if o["op"] == "attention_causal")
    assert attn["calibrated"] is None
    assert "several backends (torch.sdpa.cudnn, torch.sdpa.flash)" in attn["calibration_note"]
    assert r["total"]["calibrated"]["not_covered"] == [o["label"] for o in r["ops"]
                                                       if o["op"] in UNMEASURED or o is attn]
