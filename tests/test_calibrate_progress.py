"""``ssmbench calibrate`` and ``gap`` report progress per fitted group on stderr (calibrate/progress.py):
plain lines off a terminal, a bar on one; stdout keeps only the result."""

import io
import itertools

import pytest
from ssmbench.calibrate.models import MaxEff, Overlap
from ssmbench.calibrate.progress import group_progress
from ssmbench.calibrate.synthetic import SyntheticGroup, write_synthetic
from ssmbench.hwspecs import get_spec

import ssmbench.cli as cli

LINEAR = [dict(B=1, L=L, I=I, O=O) for L, I, O in itertools.product([16, 512, 4096], [1024, 4096], [2048])]
NORM = [dict(B=1, L=L, D=D) for L, D in itertools.product([128, 2048, 16384], [1024, 4096])]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("progress")
    groups = [
        SyntheticGroup("linear", "cublas", "torch.matmul", "bf16", "fwd", LINEAR,
                       MaxEff({"t0_s_per_launch": 6e-6, "eff.tensor": 0.7, "eff.dram": 0.85}, ("tensor", "dram"))),
        SyntheticGroup("rmsnorm", "torch_eager", "torch_ref", "bf16", "fwd", NORM,
                       Overlap({"t0_s_per_launch": 1.2e-5, "eff": 0.75, "p": 4.0}, ("dram",))),
        SyntheticGroup("silu", "torch_eager", "torch_ref", "bf16", "fwd", NORM[:2],  # too few shapes
                       Overlap({"t0_s_per_launch": 1.2e-5, "eff": 0.75, "p": 4.0}, ("dram",))),
    ]
    write_synthetic(d, get_spec("h200-sxm"), groups, "NVIDIA H200", noise=0.03, seed=0)
    return d


def _run(monkeypatch, capsys, *argv):
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("ssmbench.commands.calibrate",))
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", ["calibrate", "gap"])
def test_progress_line_per_group_on_stderr(monkeypatch, capsys, tmp_path, results, command):
    extra = ["--out", str(tmp_path / "profile.json")] if command == "calibrate" else ["--format", "json"]
    code, out, err = _run(monkeypatch, capsys, command, "--results", str(results), "--hw", "h200-sxm", *extra)
    assert code == 0
    lines = [line for line in err.splitlines() if line.startswith("calibrate: group ")]
    assert len(lines) == 3, err
    assert lines[0].startswith("calibrate: group 1/3 ") and lines[-1].startswith("calibrate: group 3/3 ")
    assert any("linear/" in line and ": calibrated (" in line for line in lines)
    # silu is alone in its family: it borrows from every case
    assert any("silu/" in line and ": pooled from all (achievable_eff)" in line for line in lines)
    assert all(line.endswith(" s") and "fit time" in line for line in lines)
    assert "calibrate: group" not in out  # stdout is the result only


def test_bar_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    report = group_progress(stream)
    report(1, 2, "linear/cublas", {"status": "calibrated", "model": {"name": "max_eff"}}, 0.1)
    report(2, 2, "silu/torch_ref", {"status": "not_calibrated", "model": None}, 0.1)
    assert "calibrate: fitting groups" in stream.getvalue()
    assert "calibrate: group" not in stream.getvalue()  # the bar, not the plain lines
