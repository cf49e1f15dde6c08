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
