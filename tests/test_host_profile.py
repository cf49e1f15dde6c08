"""measure/models/host_profile.py: self host time per operator name, summed per step, the largest first;
the CPU-profiler path on a CPU function; bad input exits 2 with a message."""

from __future__ import annotations

import pytest
from ssmbench.measure.models import host_profile as hp


def test_top_self_host_sums_per_name_and_step():
    events = [("aten::mm", 3e-6), ("aten::add", 1e-6), ("aten::mm", 5e-6), ("aten::add", 1e-6)]
    out = hp.top_self_host(events, steps=2, top=1)
    assert out["total_s"] == pytest.approx(5e-6)
    (mm,) = out["ops"]
    assert mm["name"] == "aten::mm" and mm["self_s"] == pytest.approx(4e-6) and mm["calls"] == 1.0
    assert mm["share"] == pytest.approx(0.8)
    with pytest.raises(ValueError):
        hp.top_self_host(events, steps=0)


def test_cpu_events_of_a_cpu_function():
    torch = pytest.importorskip("torch")
    a = torch.ones(64, 64)
    events = hp._cpu_events(lambda: a @ a + a, 3, lambda: None)
    out = hp.top_self_host(events, 3)
    names = [o["name"] for o in out["ops"]]
    assert "aten::mm" in names or "aten::matmul" in names
    assert out["total_s"] > 0 and all(o["calls"] > 0 for o in out["ops"])


def test_bad_input_exits_2(tmp_path, capsys):
    out = tmp_path / "x.json"
    out.write_text("{}")
    assert hp.main(["--suite", "nowhere.yaml", "--out", str(out)]) == 2
    assert "not overwritten" in capsys.readouterr().err
    assert hp.main(["--suite", "nowhere.yaml", "--out", str(tmp_path / "y.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert hp.main(["--suite", "nowhere.yaml", "--out", str(tmp_path / "y.json"), "--steps", "0"]) == 2


def test_show_prints_a_stored_profile_and_refuses_other_files(tmp_path, capsys):
    import json
    case = {"model": "m", "phase": "prefill", "batch": 1, "seqlen": 16, "runtime": "mamba-ssm", "status": "ok",
            "host_issue": {"issue_s": 2e-3}, "profiled_steps": 2,
            "self_host": hp.top_self_host([("LayerNormFn", 4e-4), ("aten::mm", 1e-4)] * 2, 2)}
    doc = {"kind": "ssmbench-host-profile", "label": "measurement", "method": "m",
           "cases": [case, {**case, "status": "error", "reason": "boom"}]}
    f = tmp_path / "p.json"
    f.write_text(json.dumps(doc))
    assert hp.main(["--show", str(f), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "| LayerNormFn | 400 us | 1 | 400.0 us | 80.0% |" in out and "aten::mm" not in out and "error: boom" in out
    doc["cases"][0].update(model="graph-mamba-style", batch=512, seqlen=256)  # a workload the spec estimates
    f.write_text(json.dumps(doc))
    assert hp.main(["--show", str(f), "--hw", "h200-sxm"]) == 0
    assert "(achievable estimate, h200-sxm's runtime terms): issue / estimate 0.50" in capsys.readouterr().out
    assert hp.main(["--show", str(f), "--hw", "nope"]) == 2 and "unknown spec id" in capsys.readouterr().err
    f.write_text(json.dumps({"kind": "other"}))
    assert hp.main(["--show", str(f)]) == 2 and "not a readable host profile" in capsys.readouterr().err
    assert hp.main(["--suite", "x.yaml"]) == 2 and "--out are both needed" in capsys.readouterr().err
