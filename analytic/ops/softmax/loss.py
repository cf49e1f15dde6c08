"""Cross-entropy of logits [B, L, V] against integer targets, mean over the B x L rows: PyTorch's
``F.cross_entropy`` (what a training step's loss runs; T = B x L rows of V classes).

``fused`` (PyTorch's two-stage loss, the kernels the profiled training steps run):
- forward: ``log_softmax`` (cunn_SoftMaxForward, the row held on chip: read the logits once, write the
  log-probabilities [T, V] at the dtype) then ``nll_loss`` (nll_loss_forward_reduce: read each row's
  target index (int64) and its log-probability, write the scalar loss): 2 launches.
  FLOPs per element: max (1), subtract (1), sum of exp (1 + 1 transc.), subtract the row's log-sum
  (1): 4 vector, 1 transcendental; per row the log (1 transc.).
- backward: the log-probabilities' gradient zero-filled ([T, V] written), ``nll_loss_backward``
  scattering -1 / T at each row's target (reads the targets), then ``log_softmax_backward``
  (cunn_SoftMaxBackward: reads that gradient and the saved log-probabilities, writes the logits'
  gradient): 3 launches. FLOPs per element: exp of the log-probability (1 transc.), the row sum of the
  gradient (1), multiply (1), subtract (1): 3 vector, 1 transcendental.
"""

from __future__ import annotations

from ...conventions import nbytes
from ...cost import Cost
from ...registry import Impl, Op, register
from ...symbols import B, L, V
from ..common.kernels import Kernel, Tensor, kernel_chain, row_working_set

T = B * L  # rows
FWD_PER_ELEMENT = (4, 1)  # (vector, transcendental)
BWD_PER_ELEMENT = (3, 1)
TARGET_BYTES = 8  # int64 class indices


def _rule(mode: str, dtype: str) -> Cost:
    e = nbytes(dtype)
    logp = Tensor("log_probs", "intermediates", T * V, e)  # [T, V], saved for backward
    targets = Tensor("targets", "activations", T, TARGET_BYTES)
    if mode == "fwd":
        x = Tensor("logits", "activations", T * V, e)
        loss = Tensor("loss", "activations", 1, 4)
        kernels = [Kernel("log_softmax (cunn_SoftMaxForward)", (x,), (logp,), FWD_PER_ELEMENT[0] * T * V,
                          FWD_PER_ELEMENT[1] * T * V + T, working_set=row_working_set(V, 1)),
                   Kernel("nll_loss_forward", (logp.per(V), targets), (loss,), T)]
        return kernel_chain(kernels, [x, targets], [loss])
    if mode == "bwd":
        dlogp = Tensor("dlog_probs", "intermediates", T * V, e)
        dx = Tensor("dlogits", "activations", T * V, e)
        kernels = [Kernel("zeros (dlog_probs)", (), (dlogp,)),
                   Kernel("nll_loss_backward", (targets,), (dlogp.per(V),)),
                   Kernel("log_softmax_backward (cunn_SoftMaxBackward)", (dlogp, logp), (dx,),
                          BWD_PER_ELEMENT[0] * T * V, BWD_PER_ELEMENT[1] * T * V, working_set=row_working_set(V, 2))]
        return kernel_chain(kernels, [targets, logp], [dx])
    raise ValueError(mode)


CROSS_ENTROPY = register(Op(
    name="cross_entropy",
    family="softmax",
    summary="F.cross_entropy of logits [B, L, V] against integer targets (mean over rows): a training step's loss",
    dims=("B", "L", "V"),
    impls=(Impl("fused", "log_softmax + nll_loss (PyTorch's native kernels); backward: zero-fill, scatter, "
                "log_softmax backward", _rule, ("fwd", "bwd")),),
    default_impl="fused",
    dtypes=("fp32", "bf16", "fp16"),
))
