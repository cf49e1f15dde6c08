"""AdamW's parameter update over Np parameter elements (``torch.optim.AdamW``, the step a training
loop runs after ``loss.backward()``; ``measure/models/steps.py`` with ``optimizer``).

Mode ``fwd`` is the one update (an optimizer step has no backward). The parameters, their gradients
and both moments are at the storage dtype (e bytes: the model's dtype, as torch.optim keeps the state
like the parameter; no fp32 master copy).

``foreach`` (``AdamW(foreach=True)``, capturable off, the default on CUDA): ``_multi_tensor_adam``
runs eight ``torch._foreach_*`` passes over the parameter list, each one ``multi_tensor_apply``
kernel family that reads and writes every element (the step counters are CPU scalars: no kernel;
the bias corrections are Python floats):

    p *= 1 - lr wd            (_foreach_mul_)      read p,       write p        2e
    m = lerp(m, g, 1 - b1)    (_foreach_lerp_)     read m, g,    write m        3e
    v *= b2                   (_foreach_mul_)      read v,       write v        2e
    v += (1 - b2) g g         (_foreach_addcmul_)  read v, g,    write v        3e
    s = sqrt(v)               (_foreach_sqrt)      read v,       write s        2e
    s /= sqrt(1 - b2^t)       (_foreach_div_)      read s,       write s        2e
    s += eps                  (_foreach_add_)      read s,       write s        2e
    p += -lr / (1 - b1^t) m/s (_foreach_addcdiv_)  read p, m, s, write p        4e

20e bytes per element as executed; compulsory: read p, g, m, v and write p, m, v (7e); the rest are
the re-reads and the temporary s (``intermediates``). Vector FLOPs per element: 1 + 3 + 1 + 3 + 0 +
1 + 1 + 3 = 13 (lerp and addcmul a subtract or multiply and an FMA, addcdiv a divide and an FMA),
one square root (special-function unit). Launches: ``multi_tensor_apply`` cuts the tensors into
chunks of ``CHUNK`` = 65536 elements and launches one kernel per ``MAX_BLOCKS`` = 320 chunks
(``aten/src/ATen/native/cuda/MultiTensorApply.cuh``: kChunkSize, depth_to_max_blocks), so a pass
takes ceil(Np / (CHUNK x MAX_BLOCKS)) launches (a lower bound: a tensor's last chunk is partial, and
a launch also ends at 36-110 tensors by depth). Measured (llama-3.2-1b, 1.236e9 parameters, bf16,
H200, 2026-12-03 models-b): 480 multi_tensor_apply launches (8 x 60) against 8 x 59 here, 15.65 ms
against the 49.4 GB this rule moves (3.16 TB/s).
"""

from __future__ import annotations

import sympy as sp

from ...conventions import nbytes
from ...cost import Cost
from ...registry import Impl, Op, register
from ...symbols import Np
from ..common.kernels import Kernel, Tensor, kernel_chain

CHUNK = 65536  # elements per multi_tensor_apply chunk (kChunkSize)
MAX_BLOCKS = 320  # chunks per launch (depth_to_max_blocks)
PASSES = 8  # _foreach_ passes of one AdamW step


def _foreach(mode: str, dtype: str) -> Cost:
    if mode != "fwd":
        raise ValueError(mode)
    e = nbytes(dtype)
    t = {n: Tensor(n, "weights", Np, e) for n in ("p", "g", "m", "v")}
    s = Tensor("s", "intermediates", Np, e)  # sqrt(v), then scaled and shifted in place
    n = sp.ceiling(Np / (CHUNK * MAX_BLOCKS))  # launches per pass
    p, g, m, v = (t[k] for k in ("p", "g", "m", "v"))
    one = {k: x.per(n) for k, x in (("p", p), ("g", g), ("m", m), ("v", v), ("s", s))}  # one launch's chunks
    P, G, M, V, S = (one[k] for k in ("p", "g", "m", "v", "s"))
    per = Np / n  # elements per launch
    kernels = [Kernel("foreach_mul", (P,), (P,), per, count=n),
               Kernel("foreach_lerp", (M, G), (M,), 3 * per, count=n),
               Kernel("foreach_mul", (V,), (V,), per, count=n),
               Kernel("foreach_addcmul", (V, G), (V,), 3 * per, count=n),
               Kernel("foreach_sqrt", (V,), (S,), 0, per, count=n),
               Kernel("foreach_div", (S,), (S,), per, count=n),
               Kernel("foreach_add", (S,), (S,), per, count=n),
               Kernel("foreach_addcdiv", (P, M, S), (P,), 3 * per, count=n)]
    return kernel_chain(kernels, [p, g, m, v], [p, m, v])


ADAMW = register(Op(
    name="adamw",
    family="optimizer",
    summary="AdamW parameter update (decoupled weight decay) of Np parameter elements",
    dims=("Np",),
    impls=(Impl("foreach", "torch.optim.AdamW(foreach=True): eight multi_tensor_apply passes", _foreach, ("fwd",)),),
    default_impl="foreach",
    reference="ssmbench.analytic.ops.optimizer.ref:adamw_ref",
))
