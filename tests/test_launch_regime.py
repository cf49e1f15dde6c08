"""The launch regime of a measured record (``measure.results.launch_regime``): CUDA-graph replays,
by the timer or by the backend's own graph (the blocks' decode steps, timed with the timer's graph
switch off), or eager launches; and the bound of calibration and the report in that regime (one
graph node per kernel, not one eager launch)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ssmbench.calibrate.join import resource_bounds
from ssmbench.hwspecs import get_spec
from ssmbench.measure.backends.base import Backend, get_backend, launch_regime
from ssmbench.measure.results import launch_regime as record_launch

REPO = Path(__file__).resolve().parent.parent
FOLDERS = [REPO / line.strip() for line in (REPO / "scripts" / "report_h200_folders.txt").read_text().splitlines()
           if line.strip() and not line.lstrip().startswith("#")]


def test_the_timer_or_the_backend_makes_a_graph_replay():
    assert launch_regime("ssd", "mamba_ssm.selective_state_update", "decode", {"cuda_graph": True}) == "graph"
    assert launch_regime("ssd", "mamba_ssm.selective_state_update", "decode", {"cuda_graph": False}) == "eager"
    # the blocks' decode steps replay the graph prepare captured; their prefill is eager
    for name, op in (("mamba_ssm.Mamba2", "block:mamba2"), ("torch.attention_block", "block:attention")):
        assert get_backend(name, op).graph_modes == ("decode",)
        assert launch_regime(op, name, "decode", {"cuda_graph": False}) == "graph"
        assert launch_regime(op, name, "fwd", {"cuda_graph": False}) == "eager"
    # a backend no longer registered: its timing settings alone
    assert launch_regime("block:mamba2", "gone.backend", "decode", {"cuda_graph": False}) == "eager"
    assert launch_regime("block:mamba2", None, "decode", None) == "eager"
    rec = {"op": "block:mamba2", "backend": "mamba_ssm.Mamba2", "mode": "decode", "timing": {"cuda_graph": False}}
    assert record_launch(rec) == "graph"


def test_graph_modes_must_be_modes():
    with pytest.raises(ValueError, match="graph_modes"):
        Backend(name="x", op="ssd", impl="chunked", modes=("fwd",), devices=("cuda",), prepare=lambda *a: None,
                graph_modes=("decode",))


@pytest.mark.parametrize("regime, key", [("eager", "launch.kernel"), ("graph", "launch.graph_node")])
def test_the_launch_bound_follows_the_regime(regime, key):
    """launches x launch.kernel for eager launches, launches x launch.graph_node for graph replays."""
    spec = get_spec("h200-sxm")
    dims = {"B": 1, "D": 2048, "N": 128, "P": 64, "G": 1}
    b = resource_bounds(spec, "block:mamba2", "mem_eff_path", dims, "bf16", "decode", "measured", "mamba_ssm.Mamba2",
                        regime)
    per_launch = b.ceilings[key]["value"]
    assert b.times["launch"] == pytest.approx(b.launches * per_launch)
    assert not any(k.startswith("launch.") and k != key for k in b.ceilings)


def test_decode_blocks_stay_within_their_launch_bound():
    """The stored decode blocks (Mamba2 and attention, each replaying its own graph) were 130% and 116%
    of an eager launch bound; in the graph regime the launch term is far below the measured time."""
    from ssmbench.figures.report.build import build

    rep = build(FOLDERS, get_spec("h200-sxm"))
    sides = [s for p in rep.points if p.point.regime.phase == "decode" for s in (p.ssm, p.base)]
    blocks = [s for s in sides if s.record["op"].startswith("block:")]
    assert blocks and all(s.record.launch == "graph" for s in blocks)
    for s in sides:
        assert s.roofline_pct <= 100 or s.bottleneck != "launch", s.record.key
