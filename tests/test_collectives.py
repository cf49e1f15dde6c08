"""Collectives: the alpha-beta model with nccl-tests' bus-bandwidth factors (analytic/collectives.py), the
spec's interconnect keys, and ``probe --collectives`` (measure/collectives.py) under torchrun with gloo."""

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ssmbench.analytic.collectives import bus_factor, for_spec, ring_steps
from ssmbench.hwspecs import get_spec
from ssmbench.hwspecs.fragment import with_measured
from ssmbench.hwspecs.schema import COLLECTIVES, Spec

from ssmbench.errors import UserError

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_bus_factors_are_nccl_tests(n):
    # nccl-tests doc/PERFORMANCE.md, "Summary"
    assert bus_factor("all_reduce", n) == pytest.approx(2 * (n - 1) / n)
    for c in ("all_gather", "reduce_scatter", "all_to_all"):
        assert bus_factor(c, n) == pytest.approx((n - 1) / n)
    assert bus_factor("send_recv", n) == 1.0
    assert ring_steps("all_reduce", n) == 2 * (n - 1) and ring_steps("all_gather", n) == n - 1


def test_datasheet_link_time_is_bytes_over_half_the_bidirectional_figure():
    spec = get_spec("h200-sxm")
    link = for_spec(spec)
    assert link.name == "NVLink 4" and link.per_direction.value == pytest.approx(450e9)
    S, n = 64 * 2**20, 8
    t = link.time(spec, "all_reduce", S, n)
    assert t.bandwidth_s == pytest.approx(S * 2 * (n - 1) / n / 450e9)
    assert t.latency_s == 0 and not t.latency_known and "lower bound" in t.provenance
    assert link.time(spec, "all_reduce", S, 1).time_s == 0  # one rank: no communication
    # more ranks never make an all-reduce of the same buffer cheaper on the same link
    assert link.time(spec, "all_reduce", S, 2).time_s < link.time(spec, "all_reduce", S, 8).time_s


def _with_collectives(spec, entries):
    return Spec.model_validate(with_measured(spec, tuple(entries)))


def test_measured_collectives_replace_the_link_model():
    from ssmbench.measure.collectives import measured_entries

    fits = {"all_reduce": {"latency_s": 20e-6, "bus_bandwidth_bytes_per_s": 360e9, "method": "m"}}
    entries = measured_entries(fits, 0, "test", dt.date(2026, 12, 3))
    assert [e["key"] for e in entries] == ["interconnect.0.collectives.all_reduce.latency",
                                           "interconnect.0.collectives.all_reduce.bus_bandwidth"]
    spec = _with_collectives(get_spec("h200-sxm"), entries)
    link = for_spec(spec)
    t = link.time(spec, "all_reduce", 1e9, 4)
    assert t.origin == "measured" and t.latency_known
    assert t.time_s == pytest.approx(20e-6 + 1e9 * 1.5 / 360e9, rel=1e-3)
    # a collective without a measurement keeps the datasheet link
    assert link.time(spec, "all_gather", 1e9, 4).origin == "datasheet"


def test_link_errors_name_what_is_wrong():
    with pytest.raises(UserError, match="no interconnect"):
        for_spec(get_spec("t4"))
    with pytest.raises(UserError, match="its links: NVLink 4, PCIe Gen5 x16"):
        for_spec(get_spec("h200-sxm"), link="NVLink 9")
    data = get_spec("h100-sxm").model_dump(mode="python", exclude_none=True)
    data["interconnect"][0].pop("direction")
    with pytest.raises(UserError, match="direction: bidirectional"):
        for_spec(Spec.model_validate(data))
    data["interconnect"][0]["collectives"] = {"allreduce": {}}
    with pytest.raises(Exception, match="unknown collective"):
        Spec.model_validate(data)


def test_fit_recovers_alpha_and_beta():
    from ssmbench.measure.collectives import fit

    alpha, bw = 15e-6, 200e9
    pts = [{"wire_bytes": s, "time_s": alpha + s / bw} for s in (2.0**k for k in range(10, 31, 2))]
    f = fit(pts)
    assert f["latency_s"] == pytest.approx(alpha, rel=1e-6)
    assert f["bus_bandwidth_bytes_per_s"] == pytest.approx(bw, rel=1e-6)
    assert f["max_relative_error"] < 1e-9


def test_probe_collectives_under_torchrun_with_gloo(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    pytest.importorskip("torch")
    out = tmp_path / "coll.yaml"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
           "--master-port", "29671", "-m", "ssmbench", "probe", "--collectives", "--device", "cpu",
           "--out", str(out), "--max-bytes", "16384", "--target-time", "0.005"]
    done = subprocess.run(cmd, check=False, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    doc = yaml.safe_load(out.read_text())
    schema = json.loads((REPO / "docs" / "schemas" / "probe.schema.json").read_text())
    assert not list(jsonschema.Draft202012Validator(schema).iter_errors(doc))
    c = doc["collectives"]
    assert c["ranks"] == 2 and "gloo" in c["transport"] and "not an interconnect ceiling" in c["transport"]
    assert set(c["fits"]) == set(COLLECTIVES)
    assert doc["measured"] == []  # gloo over loopback is no GPU link: nothing to merge into a spec
    for name, points in c["curves"].items():
        for p in points:
            assert p["busbw_bytes_per_s"] == pytest.approx(p["algbw_bytes_per_s"] * bus_factor(name, 2))
            assert p["algbw_bytes_per_s"] == pytest.approx(p["bytes"] / p["time_s"])
    assert len(doc["meta"]["distributed"]["ranks"]) == 2


def test_probe_collectives_needs_torchrun(tmp_path, monkeypatch, capsys):
    from ssmbench.cli import main

    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(k, raising=False)
    assert main(["probe", "--collectives", "--device", "cpu", "--out", str(tmp_path / "x.yaml")]) == 2
    assert "torchrun --nproc-per-node" in capsys.readouterr().err
