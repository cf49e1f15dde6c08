"""Input recipes of the plain-PyTorch backends (``torch_ref.py``): per op, the analytic
implementation each reference function executes, its inputs (shapes from the case dims,
distributions, dtype), and its decode step. Data only; torch is used inside the input makers.

Distributions are the ones the models use: weights N(0, 1/fan_in); norm scales 1 + 0.1 N(0, 1);
SSM A negative (-(n+1) per state index: S4D-real / Mamba init; SSD A per head in [-16, -1]),
dt bias the inverse softplus of a log-uniform dt in [1e-3, 1e-1] (mamba-ssm's dt init), S4D-Lin
complex A = -1/2 + i pi n, recurrent states small (0.1 N(0, 1)) so decode steps are well scaled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from ...analytic.cases import CASE_DTYPES

Maker = Callable[[dict, "Rand", dict], Any]  # (dims, rand, inputs built so far) -> tensor


class Rand:
    """Seeded draws on one device, in fp32."""

    def __init__(self, device, seed: int):
        import torch

        self.torch, self.device = torch, device
        self.g = torch.Generator(device=device)
        self.g.manual_seed(seed)

    def normal(self, shape, std: float = 1.0):
        return self.torch.randn(shape, generator=self.g, device=self.device, dtype=self.torch.float32) * std

    def uniform(self, shape, lo: float, hi: float):
        u = self.torch.rand(shape, generator=self.g, device=self.device, dtype=self.torch.float32)
        return u * (hi - lo) + lo

    def randint(self, high: int, shape):
        return self.torch.randint(0, high, shape, generator=self.g, device=self.device)


@dataclass(frozen=True)
class Input:
    name: str
    make: Maker
    cast: bool = True  # rounded to the case dtype (False: kept fp32 / complex64, as the kernels take it)
    grad: bool = True  # differentiated in bwd / fwdbwd (integer and complex inputs never are)
    state: bool = False  # updated in place by the call (decode): references get a fresh copy


@dataclass(frozen=True)
class Call:
    fn: str | None  # "module:function"; None: the op's registered reference
    inputs: tuple[Input, ...]
    kwargs: Callable[[dict], dict] = field(default=lambda d: {})


def _tok(d):
    return d["B"] * d["L"]


@dataclass(frozen=True)
class Recipe:
    op: str
    impl: str
    prefill: Call | None  # fwd / bwd / fwdbwd (and decode when l1_decode)
    step: Call | None = None  # decode as its own step function
    l1_decode: bool = True  # decode = prefill with L = 1 (when there is no step)
    backend: str = "torch_ref"
    dtypes: tuple[str, ...] = CASE_DTYPES
    tokens: Callable[[dict], int] = _tok
    exclude_modes: tuple[str, ...] = ()
    notes: str = ""

    @property
    def decode(self) -> bool:
        return self.step is not None or (self.l1_decode and self.prefill is not None)


# Input makers -----------------------------------------------------------------------------------

def _shape(d, dims):
    return tuple(d[x] for x in dims)


def normal(*dims, std: float = 1.0) -> Maker:
    return lambda d, r, p: r.normal(_shape(d, dims), std)


def weight(*dims, fan_in: str) -> Maker:
    return lambda d, r, p: r.normal(_shape(d, dims), 1.0 / math.sqrt(d[fan_in]))


def scale(*dims) -> Maker:
    return lambda d, r, p: 1.0 + r.normal(_shape(d, dims), 0.1)


def index(*dims, high: str) -> Maker:
    return lambda d, r, p: r.randint(d[high], _shape(d, dims))


def dt_bias(dim: str) -> Maker:
    """softplus^-1(dt), dt log-uniform in [1e-3, 1e-1]."""
    def make(d, r, p):
        dt = (r.uniform((d[dim],), math.log(1e-3), math.log(1e-1))).exp()
        return dt + (-(-dt).expm1()).log()  # inverse softplus: dt + log(1 - exp(-dt))
    return make


def a_real(e: str, n: str) -> Maker:
    """A[e, n] = -(n + 1) (S4D-real / Mamba-1 init, A = -exp(A_log))."""
    def make(d, r, p):
        t = r.torch
        return -t.arange(1, d[n] + 1, device=r.device, dtype=t.float32).repeat(d[e], 1)
    return make


def a_heads(h: str) -> Maker:
    return lambda d, r, p: -r.uniform((d[h],), 1.0, 16.0)


def s4d_lin_a(d, r, p):
    """S4D-Lin: A[e, n] = -1/2 + i pi n  (complex64)."""
    t = r.torch
    n = t.arange(d["N"], device=r.device, dtype=t.float32)
    return t.complex(t.full_like(n, -0.5), math.pi * n).repeat(d["E"], 1)


def s4_c(d, r, p):
    t = r.torch
    return t.complex(r.normal((d["E"], d["N"]), math.sqrt(0.5)), r.normal((d["E"], d["N"]), math.sqrt(0.5)))


def s4_log_dt(d, r, p):
    return r.uniform((d["E"],), math.log(1e-3), math.log(1e-1))


def s4_discretized(which: int) -> Maker:
    """(Abar, Bbar) of a fresh log_dt and S4D-Lin A, made once and shared by the two inputs."""
    def make(d, r, p):
        if "_s4_disc" not in p:
            from ...analytic.ops.s4 import s4_discretize_ref

            p["_s4_disc"] = s4_discretize_ref(s4_log_dt(d, r, p), s4d_lin_a(d, r, p))
        return p["_s4_disc"][which]
    return make


def s4_state(d, r, p):
    t = r.torch
    return t.complex(r.normal((d["B"], d["E"], d["N"]), 0.1), r.normal((d["B"], d["E"], d["N"]), 0.1))


BLD = ("B", "L", "D")
FP32 = dict(cast=False)  # parameters the kernels keep in fp32

_MAMBA1_PREFILL = (
    Input("u", normal("B", "E", "L")), Input("delta", normal("B", "E", "L", std=0.5)),
    Input("A", a_real("E", "N"), **FP32), Input("B", normal("B", "N", "L")), Input("C", normal("B", "N", "L")),
    Input("D", scale("E"), **FP32), Input("z", normal("B", "E", "L")), Input("delta_bias", dt_bias("E"), **FP32),
)
_SSD_PREFILL = (
    Input("x", normal("B", "L", "H", "P")), Input("dt", normal("B", "L", "H", std=0.5)),
    Input("A", a_heads("H"), **FP32), Input("B", normal("B", "L", "G", "N")), Input("C", normal("B", "L", "G", "N")),
    Input("D", scale("H"), **FP32), Input("dt_bias", dt_bias("H"), **FP32),
)
_S4_PREFILL = (
    Input("u", normal("B", "E", "L")), Input("log_dt", s4_log_dt, **FP32), Input("A", s4d_lin_a, **FP32),
    Input("C", s4_c, **FP32), Input("D", normal("E"), **FP32),
)
_ATTN = (Input("q", normal("B", "H", "L", "P")), Input("k", normal("B", "G", "S", "P")),
         Input("v", normal("B", "G", "S", "P")))

RECIPES: tuple[Recipe, ...] = (
    Recipe("linear", "cublas", Call(None, (Input("x", normal("B", "L", "I")), Input("w", weight("O", "I", fan_in="I"))))),
    Recipe("lm_head", "cublas", Call(None, (Input("h", normal(*BLD)), Input("w", weight("V", "D", fan_in="D"))))),
    Recipe("embedding", "gather_scatter",
           Call(None, (Input("idx", index("B", "L", high="V"), grad=False), Input("w", normal("V", "D"))))),
    Recipe("silu", "torch_eager", Call(None, (Input("x", normal(*BLD)),))),
    Recipe("softplus", "torch_eager", Call(None, (Input("x", normal(*BLD)),))),
    Recipe("silu_gate", "torch_eager", Call(None, (Input("x", normal(*BLD)), Input("z", normal(*BLD))))),
    Recipe("rmsnorm", "torch_eager", Call(None, (Input("x", normal(*BLD)), Input("w", scale("D"))))),
    Recipe("layernorm", "torch_eager",
           Call(None, (Input("x", normal(*BLD)), Input("w", scale("D")), Input("b", normal("D", std=0.1))))),
    Recipe("gated_rmsnorm", "torch_eager",
           Call(None, (Input("x", normal(*BLD)), Input("z", normal(*BLD)), Input("w", scale("D"))))),
    Recipe("softmax", "torch_eager", Call(None, (Input("x", normal("B", "H", "L", "S")),))),
    *(Recipe(op, "torch_eager", Call(None, (
        Input("x", normal(*BLD)), Input("w_up", weight("F", "D", fan_in="D")),
        Input("w_down", weight("D", "F", fan_in="F"))))) for op in ("mlp", "mlp_relu2")),
    *(Recipe(op, "torch_eager", Call(None, (
        Input("x", normal(*BLD)), Input("w_gate", weight("F", "D", fan_in="D")),
        Input("w_up", weight("F", "D", fan_in="D")), Input("w_down", weight("D", "F", fan_in="F")))))
      for op in ("gated_mlp", "gated_mlp_geglu")),
    Recipe("conv1d", "torch_conv",
           Call(None, (Input("x", normal("B", "E", "L")), Input("weight", weight("E", "K", fan_in="K")),
                       Input("bias", normal("E", std=0.1)))),
           step=Call("ssmbench.analytic.ops.conv1d:conv1d_update_ref", (
               Input("x_t", normal("B", "E")), Input("conv_state", normal("B", "E", "K"), state=True),
               Input("weight", weight("E", "K", fan_in="K")), Input("bias", normal("E", std=0.1))))),
    Recipe("mamba1_scan", "naive", Call(None, _MAMBA1_PREFILL),
           step=Call("ssmbench.analytic.ops.mamba1:mamba1_step_ref", (
               Input("state", normal("B", "E", "N", std=0.1), cast=False, state=True),
               Input("x", normal("B", "E")), Input("dt", normal("B", "E", std=0.5)),
               Input("A", a_real("E", "N"), **FP32), Input("B", normal("B", "N")), Input("C", normal("B", "N")),
               Input("D", scale("E"), **FP32), Input("z", normal("B", "E")), Input("dt_bias", dt_bias("E"), **FP32)))),
    Recipe("mamba1_scan", "loop", Call("ssmbench.analytic.ops.mamba1:mamba1_scan_loop_ref", _MAMBA1_PREFILL),
           l1_decode=False, backend="torch_ref.loop"),
    Recipe("s4", "fft", Call(None, _S4_PREFILL), l1_decode=False, dtypes=("fp32",),
           notes="torch.fft has no bf16 path; fp32 only"),
    Recipe("s4", "recurrent", Call("ssmbench.analytic.ops.s4:s4_recurrent_ref", _S4_PREFILL),
           step=Call("ssmbench.analytic.ops.s4:s4_step_ref", (
               Input("u_t", normal("B", "E")), Input("h", s4_state, **FP32),
               Input("abar", s4_discretized(0), **FP32), Input("bbar", s4_discretized(1), **FP32),
               Input("C", s4_c, **FP32), Input("D", normal("E"), **FP32))),
           backend="torch_ref.recurrent", dtypes=("fp32",), notes="complex state; fp32 only"),
    Recipe("ssd", "quadratic", Call("ssmbench.analytic.ops.ssd_ref:ssd_quadratic_ref", _SSD_PREFILL),
           l1_decode=False, backend="torch_ref.quadratic"),
    Recipe("ssd", "recurrent", Call("ssmbench.analytic.ops.ssd_ref:ssd_recurrent_ref", _SSD_PREFILL),
           step=Call("ssmbench.analytic.ops.ssd_ref:ssd_step_ref", (
               Input("state", normal("B", "H", "P", "N", std=0.1), cast=False, state=True),
               Input("x_t", normal("B", "H", "P")), Input("dt_t", normal("B", "H", std=0.5)),
               Input("A", a_heads("H"), **FP32), Input("B_t", normal("B", "G", "N")), Input("C_t", normal("B", "G", "N")),
               Input("D", scale("H"), **FP32), Input("dt_bias", dt_bias("H"), **FP32))),
           backend="torch_ref.recurrent"),
    Recipe("attention_causal", "naive", Call(None, _ATTN)),
    Recipe("attention_full", "naive", Call(None, _ATTN)),
)

# Ops with a reference function that no torch_ref backend times, and why.
SKIP_NOTES = {
    "ssd": "its reference ssd_chunked_ref is the gate reference of the Triton kernels (impl 'chunked'); the "
           "plain-PyTorch quadratic and recurrent forms are timed as torch_ref.quadratic / torch_ref.recurrent",
    "gated_delta_rule": "both analytic implementations are fla Triton kernels; the plain-PyTorch references "
                        "are their gate references, not an implementation the cost model describes",
    "moe": "the only analytic implementation is grouped_gemm; the reference's per-expert loop is not it",
    **{s: "the only analytic implementation is the Triton stage kernel; the plain-PyTorch stage reference "
          "is its gate reference" for s in ("ssd_chunk_cumsum", "ssd_bmm", "ssd_chunk_state",
                                            "ssd_state_passing", "ssd_chunk_scan")},
}
