"""The AdamW step (analytic/ops/optimizer): its cost rule as a formula, its reference against
torch.optim.AdamW, and its place at the end of a train plan run with an optimizer."""

import math

import pytest
import sympy as sp

from ssmbench.analytic.registry import AnalyticError, reference, symbolic_cost
from ssmbench.analytic.symbols import Np
from ssmbench.analytic.workloads.models import get_model
from ssmbench.analytic.workloads.phases import plan


@pytest.mark.parametrize("dtype,e", [("bf16", 2), ("fp32", 4)])
def test_adamw_bytes_flops_launches(dtype, e):
    c = symbolic_cost("adamw", "foreach", "fwd", dtype)
    n = 1_235_814_400  # llama-3.2-1b's parameters (tied embeddings)
    at = lambda x: float(sp.sympify(x).subs(Np, n))  # noqa: E731
    assert at(c.launches) == 8 * math.ceil(n / (65536 * 320))
    t = c.terms()
    executed = sum(at(v) for k, v in t.items() if k.startswith(("read.", "write.", "extra_read.", "extra_write.")))
    compulsory = sum(at(v) for k, v in t.items() if k.startswith(("read.", "write.")))
    assert executed == pytest.approx(20 * e * n)  # eight passes, module docstring
    assert compulsory == pytest.approx(7 * e * n)  # read p, g, m, v; write p, m, v
    assert at(t["vector"]) == pytest.approx(13 * n) and at(t["transcendental"]) == pytest.approx(n)
    assert c.host == {"torch_eager": c.launches}


def test_adamw_reference_is_torch_adamw():
    torch = pytest.importorskip("torch")
    from ssmbench.analytic.ops.optimizer.ref import BETAS, EPS, LR, WEIGHT_DECAY
    g = torch.Generator().manual_seed(0)
    p = torch.randn(1000, generator=g, dtype=torch.float64)
    grads = [torch.randn(1000, generator=g, dtype=torch.float64) for _ in range(3)]
    param = torch.nn.Parameter(p.clone())
    opt = torch.optim.AdamW([param], lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY, foreach=False)
    ref = reference("adamw", "foreach", "fwd", "eager")
    q, m, v = p.clone(), torch.zeros_like(p), torch.zeros_like(p)
    for step, gr in enumerate(grads, start=1):
        param.grad = gr.clone()
        opt.step()
        q, m, v = ref(q, gr, m, v, step)
    assert torch.allclose(q, param.detach(), rtol=0, atol=1e-12)


def test_train_plan_ends_with_the_optimizer_only_when_asked():
    m = get_model("llama-3.2-1b")
    calls = plan(m, "train", optimizer="adamw")
    assert calls[-1].op == "adamw" and calls[-1].mode == "fwd" and dict(calls[-1].dims) == {"Np": m.params}
    assert calls[:-1] == plan(m, "train") and not any(c.op == "adamw" for c in plan(m, "train"))
    with pytest.raises(AnalyticError):
        plan(m, "prefill", optimizer="adamw")
    with pytest.raises(AnalyticError):
        plan(m, "train", optimizer="sgd")


def test_record_with_an_optimizer_is_predicted_with_it():
    """A model record run with ``optimizer`` (the llama train step: AdamW foreach) is predicted with the
    AdamW op in its plan, in the optimizer part; a record without it has none."""
    from ssmbench.calibrate.runtime_host import predict_record
    from ssmbench.hwspecs import get_spec
    from ssmbench.measure.models.kernel_map import MEASURED_ONLY_PARTS, part_of_op
    rec = {"model": "graph-mamba-style", "phase": "train", "batch": 8, "seqlen": 128, "runtime": "mamba-ssm"}
    with_opt = predict_record({**rec, "optimizer": True}, get_spec("h200-sxm"))
    without = predict_record({**rec, "optimizer": False}, get_spec("h200-sxm"))
    opt = [o for o in with_opt["ops"] if o["op"] == "adamw"]
    assert len(opt) == 1 and not any(o["op"] == "adamw" for o in without["ops"])
    assert opt[0]["dims"]["Np"] == get_model("graph-mamba-style").params
    assert with_opt["total"]["achievable"]["gpu_s"] == pytest.approx(
        without["total"]["achievable"]["gpu_s"] + opt[0]["achievable"]["gpu_s"], rel=1e-9)
    assert part_of_op("adamw") == "optimizer" and "optimizer" not in MEASURED_ONLY_PARTS
