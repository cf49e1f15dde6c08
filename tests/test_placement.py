"""Which memory serves which bytes (analytic/workloads/placement.py): the recurrent state kept on chip in
decode where a spec declares a persistent on-chip level that holds it, and the flag on a processing-in-
memory spec whose DRAM bandwidth the bound applies to host-side GEMMs."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from ssmbench.analytic.roofline import COL, SpecTable
from ssmbench.analytic.workloads.evaluate import analyze
from ssmbench.analytic.workloads.models import get_model
from ssmbench.analytic.workloads.report import predict
from ssmbench.cli import main
from ssmbench.hwspecs import get_spec
from ssmbench.hwspecs.loader import SpecError, parse_spec

SPECS = Path(__file__).resolve().parents[1] / "hwspecs" / "specs"
MIB = 1 << 20


def _spec_data(spec_id: str) -> dict:
    return yaml.safe_load((SPECS / f"{spec_id}.yaml").read_text())


def test_state_stays_on_chip_when_the_whole_state_fits_and_not_beyond():
    m = get_model("mamba2-2.7b")
    asic = get_spec("ssm-sram-asic")
    per_seq = m.state_bytes_per_sequence("bf16")
    fits = int(512 * MIB // per_seq)  # sequences whose state fits in the 512 MiB SRAM
    assert fits >= 1
    r = analyze(m, "decode", SpecTable.of([asic]), [fits, fits + 1], [4096], keep_calls=True)
    on, off = r.residency[0].at(0, 0), r.residency[0].at(1, 0)
    assert on["on_chip"] and on["level"] == "sram" and on["capacity_bytes"] == 512 * MIB
    assert on["state_bytes"] == fits * per_seq and "fits in memory.sram" in on["result"]
    assert not off["on_chip"] and off["state_bytes"] == (fits + 1) * per_seq and "does not fit" in off["result"]
    # resident: every decode call's DRAM time drops by exactly its state bytes / DRAM bandwidth, and the
    # bytes are bounded by the SRAM's bandwidth instead
    W, proj = r.call_work, r.call_proj
    state_e = r.call_state[1]
    bw_dram, bw_sram = 4e12, 393.2e12
    assert state_e[:, 0, 0].sum() > 0
    np.testing.assert_allclose(proj.times["dram"][0, :, 0, 0], (W[:, COL["dram.executed"], 0, 0] - state_e[:, 0, 0]) / bw_dram)
    np.testing.assert_allclose(proj.times["cache"][0, :, 0, 0], W[:, COL["dram.executed"], 0, 0] / bw_sram)
    # not resident (one more sequence): every byte at the DRAM bandwidth, as before
    np.testing.assert_allclose(proj.times["dram"][0, :, 1, 0], W[:, COL["dram.executed"], 1, 0] / bw_dram)
    assert r.time_s[0, 0, 0] < r.time_s[0, 1, 0]


def test_a_gpu_never_keeps_the_state_on_chip_and_prefill_never_does():
    m = get_model("mamba2-2.7b")
    for spec in ("h200-sxm", "pim-hbm"):
        r = predict(m, get_spec(spec), "decode", 1, 4096, with_searches=False)
        s = r["total"]["state_residency"]
        assert s["level"] is None and not s["on_chip"] and "no device-scope sram level" in s["result"]
        assert all(not o["bytes_on_chip"] for o in r["ops"])
    r = analyze(m, "prefill", SpecTable.of([get_spec("ssm-sram-asic")]), [1], [4096])
    assert not r.residency[0].resident.any() and "only decode" in r.residency[0].reason
    assert "state_residency" not in predict(get_model("llama-3.2-1b"), get_spec("ssm-sram-asic"), "decode", 1, 4096,
                                           with_searches=False)["total"]  # no recurrent state


def test_predict_and_sweep_say_where_the_state_lives(capsys):
    r = predict(get_model("mamba2-2.7b"), get_spec("ssm-sram-asic"), "decode", 1, 4096, with_searches=False)
    s = r["total"]["state_residency"]
    assert s["on_chip"] and any(n.startswith("state on chip") for n in r["notes"])
    moved = sum(o["bytes_on_chip"].get("sram", 0) for o in r["ops"])
    assert moved > 0 and all(o["bytes_executed"] >= 0 for o in r["ops"])
    assert main(["predict", "--model", "mamba2-2.7b", "--hw", "ssm-sram-asic", "--phase", "decode"]) == 0
    assert "recurrent state (decode)" in capsys.readouterr().out
    assert main(["sweep", "--model", "mamba2-2.7b", "--hw", "ssm-sram-asic,h200-sxm", "--phase", "decode",
                 "--batch", "1,16", "--seqlen", "128"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["spec"], r["batch"], r["state_residency"]) for r in rows] == [
        ("ssm-sram-asic", "1", "on chip (sram)"), ("ssm-sram-asic", "16", "DRAM (exceeds sram)"),
        ("h200-sxm", "1", "DRAM"), ("h200-sxm", "16", "DRAM")]


def test_a_level_of_unknown_capacity_keeps_nothing_on_chip():
    d = _spec_data("ssm-sram-asic")
    d["memory"]["sram"]["capacity"] = {"unknown": "not decided"}
    r = analyze(get_model("mamba2-130m"), "decode", SpecTable.of([parse_spec(d)]), [1], [128])
    assert not r.residency[0].resident.any()
    assert "memory.sram.capacity unknown" in r.residency[0].at()["result"]


def test_pim_flags_host_gemms_and_gives_their_time_at_the_host_bandwidth(capsys):
    m, pim = get_model("mamba2-2.7b"), get_spec("pim-hbm")
    r = predict(m, pim, "decode", 8, 4096, with_searches=False)
    p = r["total"]["pim_caveat"]
    tensor_calls = [o["label"] for o in r["ops"] if o["flops_tensor"]]
    assert p["calls"] == tensor_calls and {"mamba.in_proj", "mamba.out_proj", "lm_head"} <= set(tensor_calls)
    assert p["in_memory_bandwidth"] == pytest.approx(19.66e12) and p["host_bandwidth"] == pytest.approx(4.8e12)
    # independent: the same spec with its DRAM at the host bandwidth, taken for the tensor calls only
    d = _spec_data("pim-hbm")
    d["memory"]["dram"]["bandwidth"] = {"value": "4.8 TB/s", "source": "design-pim"}
    host = predict(m, parse_spec(d), "decode", 8, 4096, with_searches=False)
    expect = sum(h["time_s"] if o["flops_tensor"] else o["time_s"] for o, h in zip(r["ops"], host["ops"]))
    assert p["time_s_host_gemms"] == pytest.approx(expect)
    assert p["time_s_host_gemms"] > r["total"]["time_s"]
    assert any(n.startswith("caveat: optimistic for host-side work") for n in r["notes"])
    for other in ("h200-sxm", "ssm-sram-asic"):
        assert "pim_caveat" not in predict(m, get_spec(other), "decode", 8, 4096, with_searches=False)["total"]
    assert main(["predict", "--model", "mamba2-2.7b", "--hw", "pim-hbm"]) == 0
    assert "caveat: PIM bandwidth applied to host GEMMs" in capsys.readouterr().out
    assert main(["sweep", "--model", "llama-3.2-1b", "--hw", "pim-hbm,h200-sxm", "--phase", "prefill",
                 "--batch", "1", "--seqlen", "512", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows[0]["caveat"].startswith("pim: GEMM / tensor work") and rows[0]["time_s_host_gemms"] > rows[0]["time_s"]
    assert rows[1]["caveat"] == "" and rows[1]["time_s_host_gemms"] is None


def test_host_bandwidth_belongs_to_dram_only():
    d = _spec_data("pim-hbm")
    d["memory"]["l2"]["host_bandwidth"] = {"value": "1 TB/s", "source": "design-pim"}
    with pytest.raises(SpecError, match="host_bandwidth belongs to memory.dram"):
        parse_spec(d)
