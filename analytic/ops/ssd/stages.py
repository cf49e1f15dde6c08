"""The five stages of Mamba-2's chunked SSD as mamba-ssm's Triton kernels run them
(mamba_ssm/ops/triton/ssd_chunk_state.py, ssd_bmm.py, ssd_state_passing.py, ssd_chunk_scan.py,
called in this order by ssd_combined.py ``_mamba_chunk_scan_combined_fwd``), each an op with one
implementation ``triton``, plus the FLOP terms ``cost.py`` reuses for its other implementations.

Notation: x [B, L, H, P], dt [B, L, H], A [H], B and C [B, L, G, N] (H/G heads share a group),
D, dt_bias [H]; chunk length C divides L, nc = L / C chunks. Storage dtype e for x, dt, B, C, y;
A, D, dt_bias, the decays and the states fp32. Conventions (conventions.py): FMA = 2 FLOPs, matmul
[m, k] x [k, n] = 2 m n k on tensor cores at the storage dtype, softplus = 1 + 2 transc.

Causal convention of this family: SSD's exact triangle (conventions.py, which says why): the masked
intra-chunk product counts the C (C + 1) / 2 entries of the lower triangle with its diagonal
(``triangle``), not attention's CAUSAL_FRACTION = 1/2 of the C x C block. The Triton kernel skips
whole upper blocks of BLOCK_SIZE_M rows, so it executes (C + BLOCK_SIZE_M) / (C + 1) times that; the
autotuned block size is not known here and that waste is left to calibration. Tile padding (k = 1
dots padded to 16) is likewise not counted. ``torch.utils.flop_counter`` counts the
PyTorch references' masked products in full (the tests subtract the upper triangle).

Stages (per batch element b, chunk c, head h unless said; programs over the P and N tiles are
assumed to be one, which holds for P <= 64 and N <= 128 with the usual configs -- otherwise the
per-row decay arithmetic repeats per tile, not counted):
1. ``ssd_chunk_cumsum`` (grid (B, nc, H / BLOCK_H)): dt + dt_bias (1), softplus (1 + 2 t.),
   dA = dt A (1), cumsum within the chunk (C - 1 adds per chunk; Triton's tl.cumsum counted at its
   sequential minimum; the dt clamp to [dt_min, dt_max] is compare/select, not counted).
   Reads dt (e) and A, dt_bias; writes dt_out and dA_cumsum [B, H, nc, C] fp32 (class
   intermediates: the next stages read them).
2. ``ssd_bmm``: CB = C B^T per chunk and group, the full [C, C] (IS_CAUSAL is False in
   ssd_combined): 2 C^2 N tensor FLOPs per (b, c, g); reads C, B (e), writes CB [B, nc, G, C, C]
   fp32.
3. ``ssd_chunk_state``: states = x^T (B * exp(min(dA_last - dA_k, 0)) * dt_k) per chunk: 2 C P N
   tensor FLOPs; the scale per step (subtract, exp, multiply: 2 + 1 t.) and B scaled per (step, n)
   (1). Reads x, B (e), dt_out, dA_cumsum; writes states [B, nc, H, P, N] fp32 (class state).
   B is re-read by each of the H/G heads of its group through L2 (``execution.ssd_chunked_l2_rereads``).
4. ``ssd_state_passing`` (grid (P N / BLOCK, B, H), sequential over chunks): s = exp(dA_last) s +
   states_c, 2 FLOPs per state element per chunk, one exp per (b, c, h). Reads the fp32 chunk states
   and the per-chunk dA_cumsum[..., -1] (fp32, strided: 4 B H nc bytes counted); writes the
   state entering each chunk [B, nc, H, P, N] at e (out_dtype = C.dtype; index 0 is the zero initial
   state) and the final state [B, H, P, N] fp32.
5. ``ssd_chunk_scan`` (causal): y = exp(dA_cs_m) (C_m . s_c) (2 C N P tensor + C P scale + C exps:
   the *inter*-chunk term) + sum_{k <= m} CB[m, k] exp(dA_m - dA_k) dt_k x_k (C (C + 1) P tensor,
   3 vector + 1 exp per triangle entry: the *intra*-chunk term) + D x (2 per element). Reads CB,
   x, dt_out, dA_cumsum, C, the entering states (e), D; writes y (e). No z gate: Mamba-2's module
   gates in ``gated_rmsnorm``.

Launches: one per stage (autotuning runs not counted). Working sets (one program): cumsum, a
[16, C] tile of three fp32 arrays; bmm, a 64 x 64 fp32 accumulator and 4 stages of 64 x 32
operand tiles at e; chunk_state, a P x N fp32 accumulator and 2 stages of [P, 32] and [32, N] tiles;
state passing, a 2048-element fp32 block twice; chunk_scan, a 64 x 64 fp32 accumulator, the C tile
[64, N] and state tile [N, 64] at e, 2 stages of the CB tile [64, 32] fp32 and x tile [32, 64] at e.
"""

from __future__ import annotations

import sympy as sp

from ...conventions import SOFTPLUS, TENSOR_DTYPE, nbytes
from ...cost import Cost
from ...registry import Impl, Op, divisible, register
from ...symbols import B, C, G, H, L, N, P
from ..common.kernels import Kernel, Tensor, kernel_chain

FP32 = 4
NC = L / C  # chunks


def triangle(c):
    """Entries of a c x c lower triangle with its diagonal."""
    return c * (c + 1) / 2


# FLOP terms (dicts of Cost fields) shared with ssd.py ------------------------------------------
def cumsum_flops(c=C):
    """dt prep, dA = dt A, cumsum within chunks of c."""
    return {"vector": (1 + SOFTPLUS[0] + 1) * B * L * H + B * H * (L / c) * (c - 1),
            "transcendental": SOFTPLUS[1] * B * L * H}


def bmm_flops(dtype: str, c=C):
    return {"tensor": {TENSOR_DTYPE[dtype]: 2 * B * L * G * c * N}}


def chunk_state_flops(dtype: str):
    return {"tensor": {TENSOR_DTYPE[dtype]: 2 * B * L * H * P * N},
            "vector": 2 * B * L * H + B * L * H * N, "transcendental": B * L * H}


def state_passing_flops(c=C):
    return {"vector": 2 * B * (L / c) * H * P * N, "transcendental": B * (L / c) * H}


def scan_inter_flops(dtype: str):
    """exp(dA_cs) (C . s): the state-to-output term."""
    return {"tensor": {TENSOR_DTYPE[dtype]: 2 * B * L * H * N * P},
            "vector": B * L * H * P, "transcendental": B * L * H}


def scan_intra_flops(dtype: str, c=C):
    """The masked (CB * decay * dt) x product inside each chunk, and D x."""
    entries = B * H * (L / c) * triangle(c)
    return {"tensor": {TENSOR_DTYPE[dtype]: 2 * P * entries},
            "vector": 3 * entries + 2 * B * L * H * P, "transcendental": entries}


def flops(*terms) -> Cost:
    out = Cost()
    for t in terms:
        out = out + Cost(tensor=dict(t.get("tensor", {})), vector=t.get("vector", 0),
                         transcendental=t.get("transcendental", 0))
    return out


def _merge(cost: Cost, *terms) -> Cost:
    f = flops(*terms)
    return Cost(tensor=f.tensor, vector=sp.expand(f.vector), transcendental=sp.expand(f.transcendental),
                read=cost.read, write=cost.write, extra_read=cost.extra_read, extra_write=cost.extra_write,
                launches=cost.launches, working_set=cost.working_set)


# Tensors -------------------------------------------------------------------------------------------
def tensors(e: int) -> dict[str, Tensor]:
    return {
        "x": Tensor("x", "activations", B * L * H * P, e),  # [B, L, H, P]
        "dt": Tensor("dt", "activations", B * L * H, e),  # [B, L, H]
        "A": Tensor("A", "weights", H, FP32),
        "dt_bias": Tensor("dt_bias", "weights", H, FP32),
        "D": Tensor("D", "weights", H, FP32),
        "B": Tensor("B", "activations", B * L * G * N, e),  # [B, L, G, N]
        "C": Tensor("C", "activations", B * L * G * N, e),
        "dt_out": Tensor("dt_out", "intermediates", B * H * L, FP32),  # [B, H, nc, C]
        "dA_cumsum": Tensor("dA_cumsum", "intermediates", B * H * L, FP32),
        "dA_last": Tensor("dA_cumsum_last", "intermediates", B * H * NC, FP32),  # [B, H, nc]
        "CB": Tensor("CB", "intermediates", B * NC * G * C * C, FP32),  # [B, nc, G, C, C]
        "chunk_states": Tensor("chunk_states", "state", B * NC * H * P * N, FP32),  # [B, nc, H, P, N]
        "states_in": Tensor("states_in", "state", B * NC * H * P * N, e),  # entering each chunk
        "final_state": Tensor("final_state", "state", B * H * P * N, FP32),  # [B, H, P, N]
        "y": Tensor("y", "activations", B * L * H * P, e),
    }


def _ws(stage: str, e: int):
    return {
        "cumsum": 3 * 16 * C * FP32,
        "bmm": 64 * 64 * FP32 + 4 * (64 * 32 + 32 * 64) * e,
        "chunk_state": P * N * FP32 + 2 * (P * 32 + 32 * N) * e,
        "state_passing": 2 * 2048 * FP32,
        "chunk_scan": 64 * 64 * FP32 + (64 * N + N * 64) * e + 2 * (64 * 32 * FP32 + 32 * 64 * e),
    }[stage]


# Stage costs ---------------------------------------------------------------------------------------
def _stage(kernel: str, ins: list[Tensor], outs: list[Tensor], working_set, *terms) -> Cost:
    """One stage: a single kernel reading ``ins`` and writing ``outs``, doing the FLOP ``terms``."""
    c = kernel_chain([Kernel(kernel, tuple(ins), tuple(outs), working_set=working_set)], ins, outs,
                     stream_working_sets=False)
    return _merge(c, *terms)


def cumsum_cost(dtype: str) -> Cost:
    t = tensors(nbytes(dtype))
    return _stage("_chunk_cumsum_fwd_kernel", [t["dt"], t["A"], t["dt_bias"]], [t["dt_out"], t["dA_cumsum"]],
                  _ws("cumsum", 4), cumsum_flops())


def bmm_cost(dtype: str) -> Cost:
    e = nbytes(dtype)
    t = tensors(e)
    return _stage("_bmm_chunk_fwd_kernel", [t["C"], t["B"]], [t["CB"]], _ws("bmm", e), bmm_flops(dtype))


def chunk_state_cost(dtype: str) -> Cost:
    e = nbytes(dtype)
    t = tensors(e)
    return _stage("_chunk_state_fwd_kernel", [t["x"], t["B"], t["dt_out"], t["dA_cumsum"]], [t["chunk_states"]],
                  _ws("chunk_state", e), chunk_state_flops(dtype))


def state_passing_cost(dtype: str) -> Cost:
    t = tensors(nbytes(dtype))
    return _stage("_state_passing_fwd_kernel", [t["chunk_states"], t["dA_last"]], [t["states_in"], t["final_state"]],
                  _ws("state_passing", 4), state_passing_flops())


def chunk_scan_cost(dtype: str) -> Cost:
    e = nbytes(dtype)
    t = tensors(e)
    ins = [t["CB"], t["x"], t["dt_out"], t["dA_cumsum"], t["C"], t["states_in"], t["D"]]
    return _stage("_chunk_scan_fwd_kernel", ins, [t["y"]], _ws("chunk_scan", e),
                  scan_inter_flops(dtype), scan_intra_flops(dtype))


def _fwd_only(fn):
    def rule(mode: str, dtype: str) -> Cost:
        if mode != "fwd":
            raise ValueError(mode)
        return fn(dtype)
    return rule


_TRITON = "mamba-ssm Triton kernel (ssd_combined forward)"
_C = (divisible("L", "C"),)

SSD_CHUNK_CUMSUM = register(Op(
    name="ssd_chunk_cumsum", family="ssd", dims=("B", "L", "H", "C"), constraints=_C,
    summary="SSD stage 1: dt = softplus(dt + dt_bias), dA = dt A, cumsum within each chunk",
    impls=(Impl("triton", _TRITON, _fwd_only(cumsum_cost), ("fwd",)),), default_impl="triton",
    reference="ssmbench.analytic.ops.ssd.ref:ssd_chunk_cumsum_ref"))

SSD_BMM = register(Op(
    name="ssd_bmm", family="ssd", dims=("B", "L", "G", "N", "C"), constraints=_C,
    summary="SSD stage 2: CB = C B^T per chunk and group ([C, N] x [N, C], tensor cores)",
    impls=(Impl("triton", _TRITON, _fwd_only(bmm_cost), ("fwd",)),), default_impl="triton",
    reference="ssmbench.analytic.ops.ssd.ref:ssd_bmm_ref"))

SSD_CHUNK_STATE = register(Op(
    name="ssd_chunk_state", family="ssd", dims=("B", "L", "H", "P", "N", "G", "C"),
    constraints=_C + (divisible("H", "G"),),
    summary="SSD stage 3: each chunk's final state from zero, x^T (decay dt B)",
    impls=(Impl("triton", _TRITON, _fwd_only(chunk_state_cost), ("fwd",)),), default_impl="triton",
    reference="ssmbench.analytic.ops.ssd.ref:ssd_chunk_state_ref"))

SSD_STATE_PASSING = register(Op(
    name="ssd_state_passing", family="ssd", dims=("B", "L", "H", "P", "N", "C"), constraints=_C,
    summary="SSD stage 4: sequential pass over chunks, s = exp(dA_chunk) s + chunk state",
    impls=(Impl("triton", _TRITON, _fwd_only(state_passing_cost), ("fwd",)),), default_impl="triton",
    reference="ssmbench.analytic.ops.ssd.ref:ssd_state_passing_ref"))

SSD_CHUNK_SCAN = register(Op(
    name="ssd_chunk_scan", family="ssd", dims=("B", "L", "H", "P", "N", "G", "C"),
    constraints=_C + (divisible("H", "G"),),
    summary="SSD stage 5: y = C s (decayed) + causal (CB decay dt) x + D x per chunk",
    impls=(Impl("triton", _TRITON, _fwd_only(chunk_scan_cost), ("fwd",)),), default_impl="triton",
    reference="ssmbench.analytic.ops.ssd.ref:ssd_chunk_scan_ref"))
