"""A ceiling says what it is: a hypothetical design's values are design assumptions and a derived
value is derived, never printed as a datasheet value."""

from ssmbench.cli import main
from ssmbench.hwspecs import ceiling, get_spec


def test_a_hypothetical_designs_values_are_design_assumptions():
    c = ceiling(get_spec("ssm-sram-asic"), "compute.tensor.bf16")
    assert c.origin == "design assumption" and "[A]" in c.provenance


def test_a_derived_value_is_labelled_derived_and_a_published_one_datasheet():
    spec = get_spec("h200-sxm")
    origins = {ceiling(spec, k, "datasheet").origin for k in ("compute.tensor.bf16", "memory.dram.bandwidth",
                                                                "compute.tensor.fp8", "memory.dram.capacity")}
    data = dict(spec.data())
    tags = {spec.sources[data[k].source].tag for k in ("compute.tensor.bf16", "memory.dram.bandwidth",
                                                            "compute.tensor.fp8", "memory.dram.capacity")}
    assert origins <= {"datasheet", "derived"} and ("derived" in origins) == ("D" in tags)


def test_predict_on_a_hypothetical_spec_prints_no_datasheet_ceiling(capsys):
    assert main(["predict", "--hw", "ssm-sram-asic"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    ceilings = out[out.index("Ceilings:"):]
    assert "(design assumption)" in ceilings
    assert "TFLOP/s (datasheet)" not in ceilings and "TB/s (datasheet)" not in ceilings


# Every hypothetical spec, every output that prints an origin ---------------------------------------------

import csv  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from ssmbench.hwspecs.loader import load_all  # noqa: E402

HYPOTHETICAL = sorted(s.id for s in load_all().values() if s.hypothetical)
ASSUMED = {"design assumption", "unknown"}  # what a hypothetical spec's values may print as
RESULTS = Path(__file__).resolve().parents[1] / "results/h200/2026-12-02/default/run-20261202T211048.516144Z-916.json"


def _run(capsys, *argv):
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_there_are_hypothetical_specs():
    assert {"ssm-sram-asic", "pim-hbm"} <= set(HYPOTHETICAL)


@pytest.mark.parametrize("spec", HYPOTHETICAL)
def test_predict_prints_design_assumptions(spec, capsys):
    r = json.loads(_run(capsys, "predict", "--hw", spec, "--json"))
    assert {c["origin"] for c in r["spec"]["ceilings"]} <= ASSUMED
    out = " ".join(_run(capsys, "predict", "--hw", spec).split())
    caption = out[out.index("Ceilings:"):]
    assert "(datasheet)" not in caption and "(design assumption)" in caption
    both = " ".join(_run(capsys, "predict", "--hw", f"{spec},h200-sxm").split())  # side by side
    assert "datasheet ceilings" not in both


@pytest.mark.parametrize("spec", HYPOTHETICAL)
def test_sweep_labels_a_hypothetical_specs_ceilings_design_assumptions(spec, capsys):
    rows = list(csv.DictReader(io.StringIO(_run(capsys, "sweep", "--model", "mamba-130m", "--hw", f"{spec},h200-sxm",
                                                "--phase", "decode", "--batch", "1", "--seqlen", "128"))))
    kinds = {r["spec"]: r["ceilings"] for r in rows}
    assert kinds == {spec: "design assumptions", "h200-sxm": "datasheet"}
    for prefer in ("measured", "datasheet"):
        j = json.loads(_run(capsys, "sweep", "--model", "mamba-130m", "--hw", spec, "--phase", "decode",
                            "--batch", "1", "--seqlen", "128", "--json", "--prefer", prefer))
        assert "datasheet ceilings" not in j["meta"]["ceilings"]
        assert {r["ceilings"] for r in j["rows"]} == {"design assumptions"}


@pytest.mark.parametrize("spec", HYPOTHETICAL)
def test_specs_show_and_list_mark_every_value_a_design_assumption(spec, capsys):
    j = json.loads(_run(capsys, "specs", "show", spec, "--json"))
    assert {v["origin"] for v in j["values"]} <= ASSUMED
    assert all(v["display"].endswith("[a]") or v["display"] == "unknown" for v in j["values"])
    assert {v["used"]["origin"] for v in j["values"] if v.get("used")} <= ASSUMED
    text = _run(capsys, "specs", "show", spec)
    assert "every ceiling is a design assumption" in text
    listed = next(s for s in json.loads(_run(capsys, "specs", "list", "--json"))["specs"] if s["id"] == spec)
    assert {v["origin"] for v in listed["values"].values()} <= ASSUMED | {"n/a"}


@pytest.mark.parametrize("spec", HYPOTHETICAL)
def test_gap_report_prints_design_assumptions(spec, capsys):
    args = ("gap", "--results", str(RESULTS), "--hw", spec, "--allow-device-mismatch", "--skip-unpredicted")
    j = json.loads(_run(capsys, *args, "--json"))
    assert {c["origin"] for c in j["spec"]["ceilings"].values()} <= ASSUMED
    md = _run(capsys, *args)
    table = [ln for ln in md.splitlines() if ln.startswith("| ") and ("TB/s" in ln or "FLOP/s" in ln)]
    assert table and all("| design assumption |" in ln or "| unknown |" in ln for ln in table)
