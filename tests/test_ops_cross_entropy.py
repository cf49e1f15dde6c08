"""cross_entropy (the training step's loss, F.cross_entropy): formulas over small dimensions, its place
in the train plan, and its part in the model characterization."""

from ssmbench.analytic.registry import cost
from ssmbench.analytic.workloads.models import get_model
from ssmbench.analytic.workloads.phases import plan
from ssmbench.measure.models.kernel_map import classify, part_of_op

B, L, V = 2, 3, 11
T = B * L


def test_forward_and_backward_formulas():
    f = cost("cross_entropy", dict(B=B, L=L, V=V), "fused", "fwd", "bf16")
    assert f.vector == 4 * T * V + T and f.transcendental == T * V + T  # + nll's gather (1 per row), log per row
    assert f.launches == 2  # log_softmax, nll_loss
    assert f.read["activations"] == 2 * T * V + 8 * T  # logits, targets (int64)
    b = cost("cross_entropy", dict(B=B, L=L, V=V), "fused", "bwd", "bf16")
    assert b.vector == 3 * T * V and b.transcendental == T * V and b.launches == 3  # fill, scatter, log_softmax bwd
    assert b.write["activations"] == 2 * T * V  # the logits' gradient
    assert b.executed_bytes > f.executed_bytes  # the zero-fill and the second [T, V] operand
    assert cost("cross_entropy", dict(B=B, L=2 * L, V=V), "fused", "fwd", "bf16").flops == 2 * f.flops


def test_train_plan_has_the_loss_once():
    calls = [c for c in plan(get_model("mamba-130m"), "train") if c.op == "cross_entropy"]
    assert len(calls) == 1 and calls[0].count == 1 and dict(calls[0].dims)["V"] == get_model("mamba-130m").spec.vocab
    assert not any(c.op == "cross_entropy" for c in plan(get_model("mamba-130m"), "prefill"))
    rule = classify("void at::native::(anonymous namespace)::cunn_SoftMaxBackward<8, c10::BFloat16, float, "
                    "c10::BFloat16, at::native::(anonymous namespace)::LogSoftMaxBackwardEpilogue>")
    assert rule.part == part_of_op("cross_entropy") == "loss"
