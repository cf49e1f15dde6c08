"""Input recipes of the plain-PyTorch references: how the torch_ref backend builds, from a case's
dims, the inputs of an op's eager reference (``Recipe``), declared in each family's ``ref.py`` as
``RECIPES``. Data only: the makers draw from the ``Rand`` the backend passes in
(``Rand`` of ``measure/backends/common.py``: seeded, fp32), so nothing here imports torch.

Distributions are the ones the models use: weights N(0, 1/fan_in); norm scales 1 + 0.1 N(0, 1);
SSM A negative (-(n+1) per state index: S4D-real / Mamba init; SSD A per head in [-16, -1]), dt bias
the inverse softplus of a log-uniform dt in [1e-3, 1e-1] (mamba-ssm's dt init), recurrent states
small (0.1 N(0, 1)) so decode steps are well scaled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from ...cases import CASE_DTYPES

Maker = Callable[[dict, Any, dict], Any]  # (dims, rand, inputs built so far) -> tensor


@dataclass(frozen=True)
class Input:
    name: str
    make: Maker
    cast: bool = True  # rounded to the case dtype (False: kept fp32 / complex64, as the kernels take it)
    grad: bool = True  # differentiated in bwd / fwdbwd (integer and complex inputs never are)
    state: bool = False  # updated in place by the call (decode): references get a fresh copy


def _tok(d):
    return d["B"] * d["L"]


@dataclass(frozen=True)
class Recipe:
    """Inputs of the eager reference of (op, impl): ``prefill`` for fwd / bwd / fwdbwd (and decode
    when ``l1_decode``: decode is the L = 1 forward), ``step`` for a decode step function. Which
    function runs is the registry's eager reference for (op, impl, mode) (``registry.reference``)."""

    op: str
    impl: str
    prefill: tuple[Input, ...] | None
    step: tuple[Input, ...] | None = None
    l1_decode: bool = True
    backend: str = "torch_ref"
    dtypes: tuple[str, ...] = CASE_DTYPES
    tokens: Callable[[dict], int] = _tok
    exclude_modes: tuple[str, ...] = ()
    notes: str = ""

    @property
    def decode(self) -> bool:
        return self.step is not None or (self.l1_decode and self.prefill is not None)


def _shape(d, dims):
    return tuple(d[x] for x in dims)


def normal(*dims, std: float = 1.0) -> Maker:
    return lambda d, r, p: r.normal(_shape(d, dims), std=std)


def weight(*dims, fan_in: str) -> Maker:
    return lambda d, r, p: r.normal(_shape(d, dims), std=1.0 / math.sqrt(d[fan_in]))


def scale(*dims) -> Maker:
    return lambda d, r, p: 1.0 + r.normal(_shape(d, dims), std=0.1)


def index(*dims, high: str) -> Maker:
    return lambda d, r, p: r.randint(d[high], _shape(d, dims))


def dt_bias(dim: str) -> Maker:
    """softplus^-1(dt), dt log-uniform in [1e-3, 1e-1]."""
    def make(d, r, p):
        dt = (r.uniform((d[dim],), lo=math.log(1e-3), hi=math.log(1e-1))).exp()
        return dt + (-(-dt).expm1()).log()  # inverse softplus: dt + log(1 - exp(-dt))
    return make


def a_real(e: str, n: str) -> Maker:
    """A[e, n] = -(n + 1) (S4D-real / Mamba-1 init, A = -exp(A_log))."""
    def make(d, r, p):
        t = r.torch
        return -t.arange(1, d[n] + 1, device=r.device, dtype=t.float32).repeat(d[e], 1)
    return make


def a_heads(h: str) -> Maker:
    return lambda d, r, p: -r.uniform((d[h],), lo=1.0, hi=16.0)


BLD = ("B", "L", "D")
FP32 = dict(cast=False)  # parameters the kernels keep in fp32
