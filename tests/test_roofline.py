"""Roofline projection: bounds as formulas on a small hand-built spec, unknown ceilings, ceiling
preference, launch regimes, byte bases and the on-chip capacity check."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ssmbench.analytic.cost import Cost
from ssmbench.analytic.roofline import (
    COL,
    RESOURCES,
    SpecTable,
    project,
    project_work,
    work_array,
)
from ssmbench.hwspecs import parse_spec

from ssmbench.errors import UserError

# Round numbers so that every expected bound is a short formula.
TENSOR_BF16 = 100e12  # FLOP/s
TENSOR_FP8 = 200e12
VECTOR = 10e12
SFU = 1e12
DRAM_BW = 1e12  # B/s
L2_BW = 5e12
KERNEL = 5e-6  # s
GRAPH_NODE = 1e-6
SHARED = 100 * 1024  # B per SM
DRAM_CAP = 10e9


def spec_data(**over) -> dict:
    d = {
        "schema_version": 1, "id": "toy", "name": "Toy accelerator", "vendor": "test", "hypothetical": True,
        "architecture": "toy",
        "sources": {"a": {"title": "test assumption", "tag": "A"}},
        "compute": {
            "sm_count": {"value": 10, "source": "a"},
            "clock_boost": {"value": "1 GHz", "source": "a"},
            "tensor": {"bf16": {"value": "100 TFLOP/s", "source": "a"}, "fp8": {"value": "200 TFLOP/s", "source": "a"}},
            "vector": {"fp32": {"value": "10 TFLOP/s", "source": "a"}},
            "special_function": {"value": "1 TFLOP/s", "source": "a"},
        },
        "memory": {
            "shared": {"scope": "per_sm", "capacity": {"value": "100 KiB", "source": "a"},
                       "bandwidth": {"value": "20 TB/s", "source": "a"}},
            "l2": {"scope": "device", "capacity": {"value": "10 MB", "source": "a"},
                   "bandwidth": {"value": "5 TB/s", "source": "a"}},
            "dram": {"scope": "device", "capacity": {"value": "10 GB", "source": "a"},
                     "bandwidth": {"value": "1 TB/s", "source": "a"}},
        },
        "launch": {"kernel": {"value": "5 us", "source": "a"}, "graph_node": {"value": "1 us", "source": "a"}},
        "power": {"tdp": {"value": "100 W", "source": "a"}, "idle": {"value": "10 W", "source": "a"}},
    }
    for path, value in over.items():
        node = d
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
    return d


@pytest.fixture
def toy():
    return parse_spec(spec_data())


WORK = Cost(tensor={"bf16": 2e12, "fp8": 4e12}, vector=3e10, transcendental=5e9,
            read={"weights": 1e9, "activations": 2e9}, write={"activations": 1e9},
            extra_read={"intermediates": 5e8}, extra_write={"intermediates": 5e8}, launches=4, working_set=1000)


def bound(p, resource):
    return next(b for b in p.bounds if b.resource == resource)


def test_each_resource_bound_is_work_over_its_ceiling(toy):
    p = project(WORK, toy)
    assert bound(p, "tensor").time_s == pytest.approx(2e12 / TENSOR_BF16 + 4e12 / TENSOR_FP8)
    assert bound(p, "vector").time_s == pytest.approx(3e10 / VECTOR)
    assert bound(p, "special_function").time_s == pytest.approx(5e9 / SFU)
    executed = 4e9 + 1e9
    assert bound(p, "dram").time_s == pytest.approx(executed / DRAM_BW)
    assert bound(p, "cache").time_s == pytest.approx(executed / L2_BW)
    assert bound(p, "launch").time_s == pytest.approx(4 * KERNEL)
    times = {b.resource: b.time_s for b in p.bounds}
    assert p.time_s == pytest.approx(max(times.values()))
    assert p.sum_s == pytest.approx(sum(times.values()))
    assert p.bottleneck == max(times, key=times.get) == "tensor"
    assert p.label == "analytic bound"
    assert p.dram_compulsory_s == pytest.approx(4e9 / DRAM_BW)
    assert p.dram_executed_s == pytest.approx(executed / DRAM_BW)


def test_compulsory_bytes_basis_uses_the_compulsory_count(toy):
    p = project(WORK, toy, bytes_basis="compulsory")
    assert bound(p, "dram").time_s == pytest.approx(4e9 / DRAM_BW)
    assert p.bytes_basis == "compulsory"


def test_memory_bound_work_names_dram(toy):
    p = project(Cost(vector=1e6, read={"activations": 1e10}, launches=1), toy)
    assert p.bottleneck == "dram"
    assert p.time_s == pytest.approx(1e10 / DRAM_BW)


def test_fp32_matmul_runs_at_the_vector_rate_and_says_so(toy):
    p = project(Cost(tensor={"fp32": 1e12}, vector=1e12, read={"weights": 1}), toy)
    b = bound(p, "vector")
    assert b.time_s == pytest.approx(2e12 / VECTOR)
    assert "no tensor-core path" in b.ceiling
    assert all(x.resource != "tensor" for x in p.bounds)


def test_unknown_ceiling_is_listed_not_bounded_never_zero_or_infinite():
    spec = parse_spec(spec_data(compute__special_function={"unknown": "not published"}))
    p = project(WORK, spec)
    sfu = bound(p, "special_function")
    assert sfu.time_s is None and sfu.ceiling.startswith("not bounded:")
    assert any("special_function" in r and "not published" in r for r in p.not_bounded)
    # the max over the known resources remains a valid lower bound
    assert p.time_s == pytest.approx(2e12 / TENSOR_BF16 + 4e12 / TENSOR_FP8)


def test_missing_tensor_dtype_is_not_bounded():
    spec = parse_spec(spec_data(compute__tensor={"bf16": {"value": "100 TFLOP/s", "source": "a"}}))
    p = project(Cost(tensor={"fp8": 1e12}, read={"weights": 1e3}), spec)
    assert bound(p, "tensor").time_s is None
    assert any("compute.tensor.fp8" in r for r in p.not_bounded)


def test_work_with_no_known_ceiling_has_no_bound():
    spec = parse_spec(spec_data(compute__vector={"fp32": {"unknown": "toy"}}))
    p = project(Cost(vector=1e9), spec)
    assert p.time_s is None and p.bottleneck is None
    assert any("vector" in r for r in p.not_bounded)


def test_measured_ceiling_is_preferred_unless_datasheet_is_asked_for():
    data = spec_data(hypothetical=False, sources={"a": {"title": "test values", "tag": "D"}})
    data["measured"] = [{"key": "memory.dram.bandwidth", "value": "0.5 TB/s", "date": "2026-01-01",
                         "method": "copy test"}]
    spec = parse_spec(data)
    c = Cost(read={"activations": 1e12})
    pm, pd = project(c, spec), project(c, spec, prefer="datasheet")
    assert pm.time_s == pytest.approx(2.0) and "measured" in bound(pm, "dram").ceiling
    assert pd.time_s == pytest.approx(1.0) and "derived" in bound(pd, "dram").ceiling  # the toy source is tagged D
    with pytest.raises(UserError):
        project(c, spec, prefer="guess")


def test_eager_and_graph_launch_regimes(toy):
    small = Cost(vector=10, read={"activations": 100}, launches=50)
    eager, graph = project(small, toy, launch="eager"), project(small, toy, launch="graph")
    assert eager.time_s == pytest.approx(50 * KERNEL) and eager.bottleneck == "launch"
    assert graph.time_s == pytest.approx(50 * GRAPH_NODE) and graph.bottleneck == "launch"
    assert eager.launch_regime == "eager" and graph.launch_regime == "graph"


def test_unknown_launch_overhead_is_not_bounded():
    spec = parse_spec(spec_data(launch={"kernel": {"unknown": "not measured"}, "graph_node": {"unknown": "not measured"}}))
    p = project(Cost(vector=10, launches=5), spec)
    assert bound(p, "launch").time_s is None
    assert any("launch.kernel" in r for r in p.not_bounded)


def test_on_chip_capacity_check(toy):
    fits = project(Cost(vector=1, working_set=SHARED), toy)
    assert fits.fits_on_chip is True
    big = project(Cost(vector=1, working_set=SHARED + 1), toy)
    assert big.fits_on_chip is False and big.on_chip_note.startswith("does not fit on chip")


def test_unknown_on_chip_capacity_is_not_checked():
    spec = parse_spec(spec_data(memory__shared__capacity={"unknown": "toy"}))
    p = project(Cost(vector=1, working_set=10), spec)
    assert p.fits_on_chip is None and p.on_chip_note.startswith("not checked")


def test_per_sm_level_traffic_is_reported_as_not_counted(toy):
    p = project(Cost(read={"activations": 10}), toy)
    assert any("shared" in r and "not counted" in r for r in p.not_bounded)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(1e3, 1e13), min_size=6, max_size=6), st.integers(1, 100))
def test_vectorized_projection_matches_the_scalar_one_on_every_spec(vals, launches):
    a, b, c, d, e, f = vals
    costs = [Cost(tensor={"bf16": a * k}, vector=b, transcendental=c / k, read={"activations": d * k},
                  extra_read={"intermediates": e}, launches=launches * k, working_set=f) for k in (1, 2, 3)]
    specs = [parse_spec(spec_data()), parse_spec(spec_data(id="toy2", compute__vector={"fp32": {"value": "1 TFLOP/s", "source": "a"}}))]
    work = np.stack([work_array(x) for x in costs], axis=1)  # [cols, 3]
    for launch in ("eager", "graph"):
        pv = project_work(work, SpecTable.of(specs), launch)
        for s, spec in enumerate(specs):
            for k, x in enumerate(costs):
                p = project(x, spec, launch=launch)
                assert pv.bound[s, k] == pytest.approx(p.time_s)
                assert pv.sum[s, k] == pytest.approx(p.sum_s)
                assert RESOURCES[pv.bottleneck[s, k]] == p.bottleneck


def test_work_array_columns():
    w = work_array(WORK)
    assert w[COL["tensor.bf16"]] == 2e12 and w[COL["tensor.fp8"]] == 4e12
    assert w[COL["dram.compulsory"]] == 4e9 and w[COL["dram.executed"]] == 5e9
    assert w[COL["launches"]] == 4 and w[COL["working_set"]] == 1000


def test_spec_data_helper_does_not_share_state():
    a, b = spec_data(), spec_data(id="x")
    assert a["id"] == "toy" and b["id"] == "x" and copy.deepcopy(a) == spec_data()
