"""The `ops list` and `cost` commands: output contents, JSON shape, and bad input -> exit 2 with a
clear message and no traceback."""

from __future__ import annotations

import json

import pytest
from ssmbench.analytic import registry
from ssmbench.analytic.cost import Cost
from ssmbench.analytic.registry import Impl, Op, cost, divisible, register
from ssmbench.analytic.symbols import B, C, L

import ssmbench.cli as cli


@pytest.fixture
def run(monkeypatch, capsys):
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("ssmbench.commands.ops",))

    def _run(*argv):
        try:
            code = cli.main(list(argv))
        except SystemExit as exc:  # argparse's own errors
            code = exc.code
        out, err = capsys.readouterr()
        return code, out, err
    return _run


def test_ops_list_table_and_json(run):
    code, out, _ = run("ops", "list")
    assert code == 0 and "rmsnorm" in out and "gated_mlp" in out and "torch_eager" in out
    code, out, _ = run("ops", "list", "--json")
    records = {r["name"]: r for r in json.loads(out)}
    moe = records["moe"]
    assert moe["family"] == "mlp" and list(moe["dims"]) == ["B", "L", "D", "F", "X", "Xk"]
    assert moe["constraints"] == ["Xk must be at most X"]
    eager = next(i for i in records["rmsnorm"]["implementations"] if i["name"] == "torch_eager")
    assert eager["modes"] == ["fwd", "bwd", "fwdbwd", "decode"] and not eager["default"]  # autograd's backward chain
    assert records["softmax"]["dtypes"] == ["fp32", "bf16", "fp16"]


def test_cost_json_matches_the_registry(run):
    dims = {"B": 2, "L": 4096, "D": 2048, "F": 5632}
    code, out, _ = run("cost", "gated_mlp", "--dims", "B=2,L=4096,D=2048,F=5632", "--mode", "fwdbwd", "--json")
    assert code == 0
    r = json.loads(out)
    c = cost("gated_mlp", dims, mode="fwdbwd")
    assert r["label"] == "analytic count" and "ssmbench.analytic.ops.mlp" in r["source"]
    assert r["flops"]["tensor"] == {"bf16": 18 * 2 * 4096 * 2048 * 5632}  # exact integers
    assert r["flops"]["vector"] == c.vector and r["flops"]["transcendental"] == c.transcendental
    assert r["bytes"]["read"] == c.bytes_read and r["bytes"]["write"] == c.bytes_written
    assert r["bytes"]["read_by_class"] == {k: int(v) for k, v in c.read.items()}
    assert r["bytes"]["executed"]["read"] + r["bytes"]["executed"]["write"] == c.executed_bytes
    assert r["launches"] == 8
    ai = r["arithmetic_intensity"]
    assert ai["compulsory"] == pytest.approx(c.flops / c.bytes) and ai["executed"] <= ai["compulsory"]


def test_cost_table_labels_and_units(run):
    code, out, _ = run("cost", "rmsnorm", "--impl", "torch_eager", "--dims", "B=1,L=1,D=2048", "--mode", "decode",
                       "--dtype", "fp16")
    assert code == 0
    for text in ("analytic count", "FLOP/B", "transcendentals", "as-executed read: intermediates", "launches",
                 "working set", "4,096"):  # 4,096 B: the fp16 weights, and x
        assert text in out, text
    assert "not used in mode decode: L" in out


@pytest.mark.parametrize("argv, message", [
    (("cost", "nope", "--dims", "B=1"), "unknown op 'nope'; valid ops: "),
    (("cost", "rmsnorm", "--impl", "apex", "--dims", "B=1,L=1,D=8"),
     "no implementation 'apex'; valid: fused, torch_eager"),
    (("cost", "rmsnorm", "--dims", "B=1,L=1,Q=8"), "has no dimension(s) Q; its dimensions: B (batch"),
    (("cost", "rmsnorm", "--dims", "B=1,L=2"), "needs dimension(s) D: D (model width)"),
    (("cost", "rmsnorm", "--dims", "B=0,L=2,D=8"), "B=0: dimension sizes must be positive integers"),
    (("cost", "rmsnorm", "--dims", "B=-2,L=2,D=8"), "B=-2: dimension sizes must be positive integers"),
    (("cost", "rmsnorm", "--dims", "B=1.5,L=2,D=8"), "B='1.5' is not an integer"),
    (("cost", "rmsnorm", "--dims", "B="), "malformed item 'B='; expected NAME=INTEGER pairs"),
    (("cost", "rmsnorm", "--dims", "B=x"), "B='x' is not an integer"),
    (("cost", "rmsnorm", "--dims", "B"), "malformed item 'B'"),
    (("cost", "rmsnorm", "--dims", "=3"), "malformed item '=3'"),
    (("cost", "rmsnorm", "--dims", ""), "--dims is empty"),
    (("cost", "rmsnorm", "--dims", "B=1,B=2,L=1,D=1"), "dimension B given twice"),
    (("cost", "rmsnorm", "--dims", "B=1,L=1,D=8", "--dtype", "fp4"), "no dtype 'fp4'; valid dtypes: fp32, bf16, fp16"),
    (("cost", "layernorm", "--impl", "torch_eager", "--dims", "B=1,L=1,D=8", "--mode", "bwd"),
     "no cost rule for mode 'bwd'; valid modes: fwd, decode"),
    (("cost", "rmsnorm", "--dims", "B=1,L=1,D=8", "--mode", "train"), "invalid choice: 'train'"),
    (("cost", "moe", "--dims", "B=1,L=1,D=8,F=8,X=2,Xk=4"), "Xk must be at most X (got Xk=4, X=2)"),
])
def test_bad_input_exits_2_with_a_clear_message(run, argv, message):
    code, out, err = run(*argv)
    assert code == 2
    assert message in err
    assert "Traceback" not in err and out == ""


def test_divisibility_violation_exits_2(run, monkeypatch):
    registry.all_ops()
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    register(Op(name="_test_cli_chunked", family="test", summary="", dims=("B", "L", "C"),
                impls=(Impl("only", "", lambda mode, dtype: Cost(vector=B * L * C), ("fwd",)),),
                default_impl="only", constraints=(divisible("L", "C"),)))
    try:
        code, _, err = run("cost", "_test_cli_chunked", "--dims", "B=1,L=100,C=64")
        assert code == 2 and "L must be divisible by C (got L=100, C=64)" in err
        code, out, _ = run("cost", "_test_cli_chunked", "--dims", "B=1,L=128,C=64", "--json")
        assert code == 0 and json.loads(out)["flops"]["vector"] == 128 * 64
    finally:
        registry.symbolic_cost.cache_clear()
        registry.compiled_cost.cache_clear()
