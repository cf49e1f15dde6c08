"""Metadata block and the ban on time.time() in measure/."""

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from ssmbench.measure import environment

MEASURE = Path(environment.__file__).resolve().parent


def test_metadata_has_required_keys():
    meta = environment.collect(torch.device("cpu"), seed=7, argv=["ssmbench", "measure"])
    for k in environment.REQUIRED_KEYS:
        assert k in meta, k
    assert meta["seed"] == 7 and meta["command_line"] == ["ssmbench", "measure"]
    assert set(meta["versions"]) >= {"torch", "triton", "mamba_ssm", "causal_conv1d", "flash_attn", "fla"}
    assert meta["versions"]["torch"] == torch.__version__
    assert {"commit", "dirty"} <= set(meta["git"])
    assert meta["device"]["type"] == "cpu" and meta["device"]["uuid"] is None
    assert meta["started_utc"].endswith("+00:00")


def test_metadata_keeps_the_full_torch_version(monkeypatch):
    """The local build tag ("+cu130": the CUDA the wheel was built for) is part of the version; a
    distribution's metadata may drop it, torch.__version__ keeps it."""
    monkeypatch.setattr(torch, "__version__", "2.14.1+cu130")
    meta = environment.collect(torch.device("cpu"), seed=0, argv=["ssmbench", "measure"])
    assert meta["versions"]["torch"] == "2.14.1+cu130"


def test_probe_file_keeps_the_full_torch_version(monkeypatch):
    from ssmbench.measure.probe import ProbeSizes, run_probe

    monkeypatch.setattr(torch, "__version__", "2.14.1+cu130")
    doc = run_probe(torch.device("cpu"), ProbeSizes(copy_mib=1, matmul_n=32, vector_numel=1024, iters=1,
                                                    target_s=0.001))
    assert doc["meta"]["versions"]["torch"] == "2.14.1+cu130"


def test_missing_library_version_is_none():
    assert environment.library_version(("no-such-dist-xyz",), "no_such_module_xyz") is None


def test_no_time_time_in_measure():
    """Wall-clock time.time() is not a timer (DESIGN.md traps); measure/ uses CUDA events and perf_counter_ns."""
    pattern = re.compile(r"\btime\.time\(|from\s+time\s+import\s+[^\n]*\btime\b")
    offenders = [str(p) for p in MEASURE.rglob("*.py") if pattern.search(p.read_text())]
    assert not offenders


@pytest.mark.gpu
def test_cuda_metadata():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    meta = environment.collect(torch.device("cuda"), seed=0)
    d = meta["device"]
    assert d["type"] == "cuda" and d["name"] and d["uuid"] and d["l2_bytes"]
    assert meta["cuda_version"]
