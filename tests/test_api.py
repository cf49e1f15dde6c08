"""The Python API (ssmbench/api.py): results equal the JSON of the matching command, the result object
is read-only and documented, ``import ssmbench`` stays cheap, and the README's example runs as written."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ssmbench
import ssmbench.cli as cli
from ssmbench.errors import UserError

REPO = Path(__file__).resolve().parent.parent
PROFILE = REPO / "results" / "h200" / "2026-12-02" / "calibration" / "profile.json"


def _cli_json(capsys, *argv: str):
    assert cli.main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def _python(code: str) -> str:
    """Run ``code`` in a fresh interpreter outside the checkout (the installed package, as a user has it)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_is_cheap_and_torch_free():
    out = _python("import sys, ssmbench; print(sorted(m for m in sys.modules if m.split('.')[0] in "
                  "('numpy', 'sympy', 'torch') or m.startswith('ssmbench.')))")
    assert out.strip() == "[]"
    assert {"predict", "point", "spec_table", "sweep", "cost", "get_spec", "get_model", "Prediction"} <= set(dir(ssmbench))
    with pytest.raises(AttributeError, match="no attribute 'predcit'"):
        ssmbench.predcit  # noqa: B018


def test_readme_python_block_runs_as_written():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Python API\n(.*?)(?=^## )", text, re.S | re.M)
    assert section, "README.md has no '## Python API' section"
    blocks = re.findall(r"```python\n(.*?)```", section.group(1), re.S)
    assert len(blocks) == 2 and "predict(" in blocks[0] and "point(" in blocks[1]
    out = _python(blocks[0] + "\nimport sys\nassert 'torch' not in sys.modules, 'the API imported torch'\n")
    time_s, bottleneck = out.splitlines()[0].split()
    assert float(time_s) > 0 and bottleneck == "tensor"
    bound, bottleneck, achievable = _python(blocks[1]).split()
    assert 0 < float(bound) < float(achievable) and bottleneck == "dram"


@pytest.mark.parametrize("argv,kwargs", [
    (("--model", "mamba2-2.7b", "--hw", "h200-sxm", "--phase", "prefill", "--batch", "1", "--seqlen", "4096"),
     dict(model="mamba2-2.7b", hw="h200-sxm", phase="prefill", batch=1, seqlen=4096)),
    (("--model", "jamba-v0.1", "--hw", "b200", "--phase", "decode", "--batch", "8", "--seqlen", "16",
      "--context", "8192", "--dtype", "fp16", "--impl", "attention_causal=splitkv"),
     dict(model="jamba-v0.1", hw="b200", phase="decode", batch=8, seqlen=16, context=8192, dtype="fp16",
          impls={"attention_causal": "splitkv"})),
    (("--model", "mamba2-2.7b", "--hw", "h200-sxm", "--phase", "prefill", "--batch", "1", "--seqlen", "2048",
      "--calibration", str(PROFILE)),
     dict(model="mamba2-2.7b", hw="h200-sxm", phase="prefill", batch=1, seqlen=2048, calibration=str(PROFILE))),
])
def test_predict_equals_the_cli_json(capsys, argv, kwargs):
    model = kwargs.pop("model")
    r = ssmbench.predict(model, **kwargs)
    expected = _cli_json(capsys, "predict", *argv, "--json")
    assert r.to_dict() == expected
    t = expected["total"]
    assert (r.time_s, r.bottleneck, r.tokens_per_s, dict(r.memory_bytes)) == (
        t["time_s"], t["bottleneck"], t["tokens_per_s"], t["memory_bytes"])
    assert (r.model, r.spec, r.label, len(r.ops)) == (model, kwargs["hw"], "analytic bound", len(expected["ops"]))
    assert (r.calibrated is not None) == ("calibration" in kwargs)


def test_prediction_is_read_only_and_documented():
    r = ssmbench.predict("mamba2-2.7b", hw="h200-sxm", phase="prefill", batch=1, seqlen=1024)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.time_s = 0.0
    with pytest.raises(TypeError):
        r.memory_bytes["weights"] = 0.0
    d = r.to_dict()
    d["total"]["time_s"] = -1.0
    assert r.to_dict()["total"]["time_s"] == r.time_s > 0  # a copy: the result is unchanged
    doc = ssmbench.Prediction.__doc__
    for f in dataclasses.fields(ssmbench.Prediction):
        assert f.name.startswith("_") or re.search(rf"\b{f.name}\b", doc), f"field {f.name} is not documented"


def test_bad_input_is_a_user_error():
    with pytest.raises(UserError, match="unknown option.*dtyp; expected any of dtype"):
        ssmbench.predict("mamba2-2.7b", hw="h200-sxm", phase="prefill", batch=1, seqlen=8, dtyp="bf16")
    with pytest.raises(UserError, match="calibration backends .* need a calibration"):
        ssmbench.predict("mamba2-2.7b", hw="h200-sxm", phase="prefill", batch=1, seqlen=8,
                         calibration_backends={"attention_causal": "torch.sdpa.flash"})
    with pytest.raises(UserError, match="unknown spec id 'h300'"):
        ssmbench.predict("mamba2-2.7b", hw="h300", phase="prefill", batch=1, seqlen=8)
    with pytest.raises(UserError, match="batch must be a positive integer"):
        ssmbench.predict("mamba2-2.7b", hw="h200-sxm", phase="prefill", batch=0, seqlen=8)


def test_sweep_and_cost_equal_the_cli_json(capsys):
    rows = ssmbench.sweep(["mamba2-2.7b", "llama-3-8b"], hw="h200-sxm", phases=["decode", "prefill"],
                          batches=[1, 4], lengths=[512, 2048])
    expected = _cli_json(capsys, "sweep", "--models", "mamba2-2.7b,llama-3-8b", "--hw", "h200-sxm",
                         "--phases", "decode,prefill", "--batch", "1,4", "--seqlen", "512,2048", "--format", "json")
    assert rows == expected["rows"] and len(rows) == 16
    c = ssmbench.cost("rmsnorm", {"B": 1, "L": 64, "D": 256}, dtype="bf16", mode="fwd")
    assert c == _cli_json(capsys, "cost", "rmsnorm", "--dims", "B=1,L=64,D=256", "--json")
    assert ssmbench.get_spec("h200-sxm").id == "h200-sxm" and ssmbench.get_model("mamba2-2.7b").id == "mamba2-2.7b"
