"""Which measured cases are CUDA-graph replays (calibrate/join.py ``launch_regime``): the timing loop's
own graph, or a backend that replays a graph it captured itself (``Backend.graph_modes``: the block
backends' decode step, whose records carry ``timing.cuda_graph: false``)."""

from __future__ import annotations

import pytest
from ssmbench.calibrate.join import launch_regime
from ssmbench.measure.backends.base import Backend, get_backend


def test_a_timed_graph_or_a_backends_own_graph_is_a_replay():
    assert launch_regime({"timing": {"cuda_graph": True}}, "torch_ref", "linear", "decode") == "graph"
    no_graph = {"timing": {"cuda_graph": False}}
    assert launch_regime(no_graph, "torch_ref", "linear", "decode") == "eager"
    for name, op in (("mamba_ssm.Mamba", "block:mamba1"), ("mamba_ssm.Mamba2", "block:mamba2"),
                     ("torch.attention_block", "block:attention"), ("torch.gated_mlp", "block:gated_mlp")):
        assert get_backend(name, op).graph_modes == ("decode",)
        assert launch_regime(no_graph, name, op, "decode") == "graph"
        assert launch_regime(no_graph, name, op, "fwd") == "eager"
    assert launch_regime(no_graph, "a.backend.no.longer.registered", "block:mamba1", "decode") == "eager"


def test_graph_modes_must_be_modes_of_the_backend():
    with pytest.raises(ValueError, match="graph_modes"):
        Backend(name="x", op="linear", impl="cublas", modes=("fwd",), devices=("cuda",), prepare=lambda *a: None,
                graph_modes=("decode",))
