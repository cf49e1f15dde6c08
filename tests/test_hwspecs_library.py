"""The shipped spec library: every file loads, ids are unique and match file names, sources are honest
(no tag A on real devices, derivations state their method, dense tensor rates are half the sparse ones
the notes quote), derived values agree with their stated formula, and ceilings prefer measurements."""

import re
from pathlib import Path

import pytest
from ssmbench.hwspecs import builtin_dir, ceiling, load_all, load_spec

EXPECTED_IDS = {
    "h200-sxm", "h100-sxm", "h100-pcie", "h200-nvl", "a100-40gb-sxm", "a100-80gb-sxm", "a100-80gb-pcie",
    "l40s", "l4", "t4", "b200", "gb200", "mi300x", "rtx-4090", "ssm-sram-asic", "pim-hbm",
}
SPECS = load_all()
REAL_NVIDIA = [s for s in SPECS.values() if not s.hypothetical and s.vendor == "NVIDIA"]

# FP32 lanes per SM: 64 on GA100 and Turing, 128 on GH100, Ada and Blackwell.
FP32_LANES = {"Ampere (GA100)": 64, "Turing (TU104)": 64}


def test_every_expected_spec_ships_and_loads():
    assert set(SPECS) == EXPECTED_IDS
    files = sorted(builtin_dir().glob("*.yaml"))
    assert len(files) == len(EXPECTED_IDS)


@pytest.mark.parametrize("path", sorted(builtin_dir().glob("*.yaml")), ids=lambda p: p.stem)
def test_id_matches_file_name(path):
    assert load_spec(path).id == path.stem


def test_at_least_two_hypothetical_designs():
    hypothetical = {s.id for s in SPECS.values() if s.hypothetical}
    assert {"ssm-sram-asic", "pim-hbm"} <= hypothetical


@pytest.mark.parametrize("spec", SPECS.values(), ids=lambda s: s.id)
def test_sources_are_original_and_honestly_tagged(spec):
    for sid, src in spec.sources.items():
        assert "REFERENCES" not in src.title and "REFERENCES" not in (src.url or ""), sid
        if src.tag == "D":
            assert src.title.lower().lstrip().startswith("derived"), f"{sid}: a derived source states its method"
        if src.tag == "A":
            assert spec.hypothetical
    if spec.hypothetical:
        tags = {spec.sources[d.source].tag for _, d in spec.data() if d.source}
        assert tags == {"A"}, "every value of a hypothetical device is a design assumption"


@pytest.mark.parametrize("spec", SPECS.values(), ids=lambda s: s.id)
def test_every_declared_source_is_used(spec):
    cited = {d.source for _, d in spec.data() if d.source} | {m.source for m in spec.measured if m.source}
    text = " ".join(filter(None, [spec.notes] + [src.title for src in spec.sources.values()]
                           + [d.note for _, d in spec.data()]))
    for sid in spec.sources:
        assert sid in cited or f"source {sid}" in text, f"{spec.id}: source {sid!r} is declared but not used"


@pytest.mark.parametrize("spec", SPECS.values(), ids=lambda s: s.id)
def test_dense_tensor_rates_are_half_the_sparse_rates_quoted(spec):
    """Notes quote the sparse rate the datasheet prints; the value must be half of it."""
    pattern = re.compile(r"([\d.,]+)\s*(P(?:FL)?OP/s)?\s*with sparsity")
    for key, datum in spec.data():
        m = pattern.search(datum.note or "")
        if not key.startswith("compute.tensor.") or m is None:
            continue
        sparse = float(m.group(1).replace(",", "")) * (1e15 if m.group(2) else 1e12)
        assert datum.si == pytest.approx(sparse / 2, rel=0.015), f"{spec.id} {key}"  # L40S prints 362.05 | 733


@pytest.mark.parametrize("spec", REAL_NVIDIA, ids=lambda s: s.id)
def test_derived_rates_follow_their_formula(spec):
    """SFU = 16 results/clock/SM, shared memory = 32 banks x 4 B/clock/SM, FP32 = lanes x 2 FLOP/clock/SM."""
    sms, clock = spec.compute.sm_count.si, spec.compute.clock_boost.si
    if sms is None or clock is None:
        assert spec.compute.special_function.si is None
        return
    assert spec.compute.special_function.si == pytest.approx(16 * sms * clock, rel=0.01)
    assert spec.memory["shared"].bandwidth.si == pytest.approx(128 * sms * clock, rel=0.01)
    lanes = FP32_LANES.get(spec.architecture, 128)
    assert spec.compute.vector["fp32"].si == pytest.approx(lanes * 2 * sms * clock, rel=0.02)


@pytest.mark.parametrize("spec", REAL_NVIDIA, ids=lambda s: s.id)
def test_nvidia_register_file_is_256_kib_per_sm(spec):
    assert spec.memory["registers"].capacity.si == 256 * 1024
    assert spec.memory["registers"].scope == "per_sm"


def test_gpus_without_a_value_say_why():
    gb200 = SPECS["gb200"]
    assert gb200.compute.special_function.si is None and gb200.compute.special_function.unknown
    assert "bf16" not in SPECS["t4"].compute.tensor  # not supported: absent, not unknown
    assert SPECS["rtx-4090"].compute.tensor["fp8"].unknown
    for spec in SPECS.values():
        if not spec.hypothetical:
            # launch overheads of real devices come from measurement: their own, or a same-die device's taken over
            k = spec.launch.kernel
            assert k.si is None or (spec.sources[k.source].tag == "D" and "measured" in spec.sources[k.source].title), spec.id


def test_mi300x_memory_levels():
    mi = SPECS["mi300x"]
    assert list(mi.memory) == ["registers", "shared", "llc", "dram"]  # per-XCD L2 is not one level
    assert mi.memory["llc"].capacity.si == 256 * 2**20
    assert mi.memory["llc"].bandwidth.si == pytest.approx(17e12)


def test_ssm_asic_holds_a_whole_model_state_on_chip():
    asic = SPECS["ssm-sram-asic"]
    mamba2_2p7b_state = 64 * 80 * 64 * 128 * 4  # layers x heads x headdim x d_state x FP32 bytes
    assert asic.memory["sram"].scope == "device"
    assert asic.memory["sram"].capacity.si > 3 * mamba2_2p7b_state
    h100 = SPECS["h100-sxm"].compute
    ratio = asic.compute.tensor["bf16"].si / asic.compute.special_function.si
    assert ratio < h100.tensor["bf16"].si / h100.special_function.si / 10


def test_pim_design_has_more_bandwidth_at_memory_than_a_gpu():
    pim, h200 = SPECS["pim-hbm"], SPECS["h200-sxm"]
    assert pim.memory["dram"].bandwidth.si > 4 * h200.memory["dram"].bandwidth.si
    assert pim.compute.tensor["bf16"].si < h200.compute.tensor["bf16"].si


def test_ceilings_prefer_measured_values():
    h200 = SPECS["h200-sxm"]
    c = ceiling(h200, "memory.dram.bandwidth")
    assert (c.origin, c.value) == ("measured", pytest.approx(4186e9))
    assert "2026-12-02" in c.provenance
    c = ceiling(h200, "memory.dram.bandwidth", prefer="datasheet")
    assert (c.origin, c.value) == ("datasheet", pytest.approx(4.8e12))
    assert ceiling(h200, "power.idle").value == pytest.approx(100.0)
    assert ceiling(h200, "power.idle", prefer="datasheet").origin == "unknown"
    c = ceiling(SPECS["a100-80gb-sxm"], "memory.dram.bandwidth")
    assert c.origin == "datasheet", "without a measurement the datasheet value is the ceiling"


def test_ceiling_of_an_unknown_key_names_the_known_ones():
    with pytest.raises(KeyError, match="memory.dram.bandwidth"):
        ceiling(SPECS["h200-sxm"], "memory.dram.bandwith")


def test_value_kind_reads_the_schema():
    """The kind of a spec value path, from the schema alone, is the kind every built-in spec gives it."""
    from ssmbench.hwspecs import load_all
    from ssmbench.hwspecs.schema import value_kind

    for spec in load_all().values():
        for key, datum in spec.data():
            assert value_kind(key) == datum.kind, (spec.id, key)
    for bad in ("compute", "compute.tensor", "compute.sm_count.x", "memory.dram.scope", "interconnect.x.bandwidth", "id"):
        with pytest.raises(ValueError, match="is not a spec value path"):
            value_kind(bad)


# The H100 SXM takes the H200 SXM's attained per-kernel parameters over unchanged (same GH100 die, SM count
# and clock; same host stack; a software DRAM path's rate is set by its kernel's issue on the SMs: the
# transfer check of results/h100/2026-12-05/transfer found the probed paths at 0.77-0.98x of the H200's,
# against a datasheet DRAM ratio of 0.70x), and holds its own probe's measurements beside them.
H100_DERIVED = ("derived-h200-achievable", "derived-h200-paths")
H100_PROBES = ("results/h100/2026-12-05/transfer/probe-h100-sxm.yaml",
               "results/h100/2026-12-05/transfer/probe-energy-h100-sxm.yaml")


def test_h100_derived_values_are_the_h200_measurements():
    h100, h200 = SPECS["h100-sxm"], SPECS["h200-sxm"]
    derived = {key: d for key, d in h100.data() if d.source in H100_DERIVED}
    assert len(derived) >= 40
    for key, d in derived.items():
        base = ceiling(h200, key)
        assert base.origin == "measured", key
        assert d.source != "derived-h200-paths" or key.startswith("memory.dram.path."), key
        assert d.si == pytest.approx(base.value, rel=5e-4), key
        assert ceiling(h100, key, prefer="datasheet").origin == "derived", key
    # what the H100 has a datasheet value for stays the datasheet's without its probe
    for key in ("memory.dram.bandwidth", "compute.tensor.bf16", "memory.l2.capacity"):
        assert key not in derived and ceiling(h100, key, prefer="datasheet").origin == "datasheet"


def test_h100_measured_entries_are_its_probes():
    """Every measured entry of the H100 spec is an entry of its stored probe files, as written there."""
    import yaml

    root = Path(__file__).resolve().parent.parent
    probed = {}
    for f in H100_PROBES:
        data = yaml.safe_load((root / f).read_text())
        assert data["meta"]["device"]["name"] == "NVIDIA H100 80GB HBM3"
        probed.update({e["key"]: e for e in data["measured"]})
    h100 = SPECS["h100-sxm"]
    assert len(h100.measured) >= 30
    for m in h100.measured:
        e = probed[m.key]
        assert (m.value, m.date, m.method) == (str(e["value"]), e["date"], e["method"]), m.key
    assert ceiling(h100, "memory.dram.bandwidth").origin == "measured"
