"""One GPU's share of a model step under tensor, pipeline, data, context and expert parallelism.

``Parallel`` holds the degrees (world = tp x pp x dp x cp; ep splits the dp ranks for MoE layers, as
Megatron-Core's expert parallelism does). ``rank_plan`` turns a model's plan (``phases.plan``) into
the op calls one GPU runs for one microbatch of one pipeline stage; ``comm_events`` lists the
communication that step needs. Everything is plain arithmetic on the plan; times are in
``parallel.py``.

Tensor parallelism (tp), Megatron-LM (Shoeybi et al. 2019, arXiv 1909.08053, Sec. 3): the first
projection of a block is column-parallel (its output features split over the tp ranks), the last
row-parallel (its input features split), so each block needs one all-reduce of its B x L x D output
in the forward and one of its input gradient in the backward. Attention: qkv projection O / tp,
heads H / tp and KV heads G / tp (RoPE, KV append, the attention kernel), o_proj I / tp. MLP: d_ff / tp.
MoE: each expert's d_ff / tp. Mamba-2 (Dao & Gu 2024, "Transformers are SSMs", arXiv 2405.21060,
Sec. 8.1): heads and groups split (in_proj O / tp: x, z, B, C and dt of its heads; A, the conv
channels, SSD's H and G, the gated RMSNorm's width, out_proj I / tp), with B, C and dt produced by
the same column-parallel in_proj so the block needs one all-reduce, after out_proj, like an MLP;
mamba_ssm's Mamba2 with a process group asserts ngroups % tp == 0, and so does this. Norms and
residual adds are replicated. Embedding and LM head are vocab-parallel (V / tp, rounded up): the
embedding all-reduces its output; inference all-gathers the logits; training's vocab-parallel cross
entropy all-reduces three fp32 values per token. Mamba-1 and Mamba-3 blocks are refused under tp > 1
(their x_proj / B-C projections need collectives inside the block that are not modelled).

Context parallelism (cp, prefill and train): every rank holds L / cp tokens of each sequence, and every
op runs on them. Attention keeps causal work balanced (zigzag split): each rank computes its diagonal
block causally (``attention_causal``, L / cp queries and keys) plus (cp - 1) / 2 full blocks of
(L / cp)^2 (``attention_full``, label ``.attention_cp_offdiag``), L^2 / (2 cp) score entries per rank
in all. KV exchange: ``ring`` (Liu et al. 2023, ring attention): cp - 1 send/recv steps of one block's
K and V, overlappable with the blocks' attention; ``allgather``: one all-gather of K and V (backward:
a reduce-scatter of dK, dV). SSM blocks pass state across ranks (Mamba-2 paper Sec. 8.2): rank r
needs the final state of rank r - 1, a chain of cp - 1 dependent transfers of the block's per-sequence
state (SSM + conv state, ``block.state_bytes``) that cannot overlap anything (backward: the chain of
state gradients in reverse). The correction of each rank's outputs by its incoming state (one
state-to-output pass over its tokens) is not counted.

Pipeline parallelism (pp): blocks split over pp stages; the heaviest stage has ceil(n / pp) of each
block (n its occurrences) plus the model end that is larger (embedding on the first stage; final norm
and LM head on the last). m microbatches: GPipe and 1F1B take (m + pp - 1) stage-microbatch times,
bubble fraction (pp - 1) / (m + pp - 1) (Narayanan et al. 2021, arXiv 2104.04473, Sec. 2.2);
activations pass between stages by send/recv (B_mb x L x D, and their gradients in training).

Data parallelism (dp): the batch splits over dp ranks (B / dp each); training all-reduces gradients
(non-expert parameters over dp ranks, expert parameters over dp / ep), overlappable with the backward
(bucketed DDP). Optimizer state is not sharded (no ZeRO).

Expert parallelism (ep, MoE only): each rank holds experts / ep experts; tokens go to their experts
and back by two all-to-alls per MoE layer (dispatch and combine, B_rank x L x top_k x D each; twice
more in training). The per-rank MoE cost is the ``moe`` rule with X / ep experts and the rank's own
tokens: balanced routing gives each rank as many routed token copies as it sends; the router's
logits over X / ep (instead of X) experts are an undercount of under 1% of the layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from ...errors import UserError
from ..conventions import nbytes
from .models import MLP, SSM_KINDS, Attention, Mamba2, Model, MoE
from .phases import OpCall, dim_parts, plan

CP_ATTENTION = ("ring", "allgather")
PP_SCHEDULES = ("1f1b", "gpipe")
OVERLAP = ("none", "full")
ENDS = ("embedding", "final.norm", "lm_head")
# fp32 values per token that Megatron's vocab-parallel cross entropy all-reduces: the logits' max,
# the sum of exponentials, and the target's logit (tensor_parallel/cross_entropy.py)
CROSS_ENTROPY_VALUES = 3
FP32_BYTES = 4


@dataclass(frozen=True)
class Parallel:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    microbatches: int | None = None  # None: 1 without a pipeline; with one, one sequence per microbatch (B / dp)
    cp_attention: str = "ring"
    pp_schedule: str = "1f1b"
    overlap: str = "none"

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def trivial(self) -> bool:
        return self.world == 1

    def describe(self) -> dict[str, Any]:
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp, "cp": self.cp, "ep": self.ep, "gpus": self.world,
                "microbatches": self.microbatches, "cp_attention": self.cp_attention,
                "pp_schedule": self.pp_schedule, "overlap": self.overlap}


def _div(what: str, value: int, by: int, option: str) -> int:
    if value % by:
        raise UserError(f"{option} {by}: {what} {value} is not divisible by {by}")
    return value // by


def check(par: Parallel, model: Model, phase: str, batch: int, seqlen: int) -> int:
    """Every constraint of the module docstring, as a UserError naming the option; returns m."""
    for k in ("tp", "pp", "dp", "cp", "ep"):
        v = getattr(par, k)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise UserError(f"--{k} must be a positive integer, got {v!r}")
    for name, value, choices in (("--cp-attention", par.cp_attention, CP_ATTENTION),
                                 ("--pp-schedule", par.pp_schedule, PP_SCHEDULES),
                                 ("--comm-overlap", par.overlap, OVERLAP)):
        if value not in choices:
            raise UserError(f"{name} {value!r}: expected one of {', '.join(choices)}")
    per_dp = _div("--batch", batch, par.dp, "--dp")
    m = (per_dp if par.pp > 1 else 1) if par.microbatches is None else par.microbatches
    if m < 1 or per_dp % m:
        raise UserError(f"--microbatches {m}: must divide the batch per data-parallel rank ({per_dp} = --batch / --dp)")
    if par.ep > 1:
        _div("--dp", par.dp, par.ep, "--ep")
        if not model.count_kind("moe"):
            raise UserError(f"--ep {par.ep}: {model.id} has no MoE blocks (expert parallelism splits experts)")
    if par.cp > 1:
        if phase == "decode":
            raise UserError("--cp splits a sequence's tokens over GPUs: prefill and train only (decode runs one "
                            "token per sequence; use --tp, --pp or --dp)")
        _div("--seqlen", seqlen, par.cp, "--cp")
    if par.pp > len(model.layer_sequence):
        raise UserError(f"--pp {par.pp}: {model.id} has only {len(model.layer_sequence)} layers")
    D = model.d_model
    for name in model.block_counts:
        blk = model.block(name)
        where = f"block {name!r} ({blk.kind})"
        if par.cp > 1 and isinstance(blk, Attention) and blk.window is not None:
            raise UserError(f"--cp {par.cp}: {where} has a sliding window; context parallelism with windows is not modelled")
        if isinstance(blk, MoE):
            if par.tp > 1:
                _div(f"{where} d_ff", blk.d_ff, par.tp, "--tp")
            local = _div(f"{where} experts", blk.experts, par.ep, "--ep")
            if local < blk.top_k:
                raise UserError(f"--ep {par.ep}: {where} keeps {local} expert(s) per GPU, fewer than its top_k "
                                f"{blk.top_k}; the per-GPU MoE rule needs top_k <= experts per GPU")
        if par.tp == 1:
            continue
        if isinstance(blk, Attention):
            _div(f"{where} heads", blk.heads, par.tp, "--tp")
            _div(f"{where} kv_heads", blk.kv_heads, par.tp, "--tp")
        elif isinstance(blk, MLP):
            _div(f"{where} d_ff", blk.d_ff, par.tp, "--tp")
        elif isinstance(blk, Mamba2):
            _div(f"{where} nheads", blk.heads(D), par.tp, "--tp")
            _div(f"{where} ngroups", blk.ngroups, par.tp,
                 "--tp (mamba_ssm's Mamba2 splits B and C by group: ngroups % tp == 0)")
        elif blk.kind in ("mamba1", "mamba3"):
            raise UserError(f"--tp {par.tp}: {where}: tensor parallelism of {blk.kind} blocks is not modelled (their "
                            "B / C / dt projections need collectives inside the block); supported: attention, mlp, "
                            "moe, mamba2")
    return m


def _scaled(v, by: int, what: str):
    """A constant plan dimension divided by ``by`` (rounded up: a padded vocabulary shard)."""
    var, mult, *_ = dim_parts(v)
    if var is not None:
        raise UserError(f"internal: cannot split grid dimension {what}")
    return -(-int(mult) // by)


# (block kind, label suffix) -> dims split by tp; suffixes not listed are replicated only if in REPLICATED
TP_SPLIT: dict[tuple[str, str], tuple[str, ...]] = {
    ("attention", "qkv_proj"): ("O",), ("attention", "rope"): ("H", "G"), ("attention", "kv_append"): ("G",),
    ("attention", "attention"): ("H", "G"), ("attention", "attention_beyond_window"): ("H", "G"),
    ("attention", "o_proj"): ("I",), ("attention", "qkv_split_bwd"): ("D",), ("attention", "repeat_kv"): ("H", "G"),
    ("mamba2", "in_proj"): ("O",), ("mamba2", "A"): ("E",), ("mamba2", "conv1d"): ("E",),
    ("mamba2", "conv1d_recompute"): ("E",), ("mamba2", "ssd"): ("H", "G"), ("mamba2", "gated_norm"): ("D",),
    ("mamba2", "out_proj"): ("I",), ("moe", "moe"): ("F",), ("mlp", "mlp"): ("F",), ("", "embedding"): ("V",), ("", "lm_head"): ("V",),
    ("", "loss"): ("V",),  # vocab-parallel cross entropy: each rank's log-softmax over its vocabulary slice
}
# norms, residual adds, plain linear blocks (Zamba2's proj), the flips of the replicated sequence between layers
REPLICATED = ("norm", "residual", "linear", "flip_hidden", "flip_residual")


def _suffix(call: OpCall) -> str:
    s = call.label[len(call.block) + 1:] if call.block else call.label
    return s.removesuffix(".recompute")


def _kind(model: Model, call: OpCall) -> str:
    return model.block(call.block).kind if call.block else ""


def stage_count(instances: int, pp: int) -> int:
    return -(-instances // pp)


def rank_calls(model: Model, calls: tuple[OpCall, ...], par: Parallel) -> tuple[OpCall, ...]:
    """One rank's calls for one microbatch of the heaviest stage (module docstring); model ends kept."""
    out = []
    for c in calls:
        kind, suffix = _kind(model, c), _suffix(c)
        dims = dict(c.dims)
        replicated = suffix.rsplit(".", 1)[-1] in REPLICATED or kind == "linear"
        if par.tp > 1 and (kind, suffix) not in TP_SPLIT and not replicated:
            raise UserError(f"internal: no tensor-parallel rule for plan call {c.label} ({c.op}); add it to TP_SPLIT")
        split = TP_SPLIT.get((kind, suffix), ())
        if par.tp > 1:
            for d in split:
                dims[d] = _scaled(dims[d], par.tp, f"{c.label}.{d}")
        if kind == "moe" and suffix == "moe" and par.ep > 1:
            dims["X"] = _scaled(dims["X"], par.ep, f"{c.label}.X")
        count = c.count
        if c.block and par.pp > 1:
            count = stage_count(c.instances, par.pp) * (c.count // c.instances)
        new = replace(c, dims=tuple(dims.items()), count=count,
                      instances=stage_count(c.instances, par.pp) if c.block else c.instances)
        out.append(new)
        if par.cp > 1 and kind == "attention" and c.op == "attention_causal":
            offdiag = dict(dims, S=("keys", (par.cp - 1) / 2, 1))
            out.append(replace(new, label=new.label + "_cp_offdiag",
                               op="attention_full", dims=tuple(offdiag.items())))
    return tuple(out)


def rank_plan(model: Model, phase: str, par: Parallel, impls=None, recompute: bool = False,
              logits: str = "last") -> tuple[OpCall, ...]:
    return rank_calls(model, plan(model, phase, impls, recompute, logits), par)


def is_end(call: OpCall) -> bool:
    return not call.block


# ------------------------------------------------------------------------------------ communication

@dataclass(frozen=True)
class CommEvent:
    """One communication of a step: ``count`` x ``collective`` of ``bytes`` (nccl-tests' S) among ``ranks``."""

    what: str
    group: str  # tp, cp, ep, pp, dp
    collective: str
    ranks: int
    bytes: float
    count: float  # per microbatch (per step for dp)
    dependent: bool  # the next computation waits for it (never overlapped)
    per: str  # "microbatch" or "step"
    note: str


def comm_events(model: Model, phase: str, par: Parallel, b_mb: float, tokens: float, prec,
                logits: str = "last") -> list[CommEvent]:
    """Communication of one microbatch on the heaviest stage (and dp's per step), at ``b_mb`` sequences
    and ``tokens`` tokens per sequence on this rank (module docstring)."""
    e, D = nbytes(prec.base), model.d_model
    train = phase == "train"
    passes = 2 if train else 1  # forward, and backward in training
    ev: list[CommEvent] = []
    act = b_mb * tokens * D * e  # one B_mb x L x D activation
    counts = {b: stage_count(n, par.pp) for b, n in model.block_counts.items()}
    if par.tp > 1:
        for b, n in counts.items():
            blk = model.block(b)
            if isinstance(blk, (Attention, MLP, Mamba2, MoE)):
                ev.append(CommEvent(f"{b}: row-parallel output all-reduce", "tp", "all_reduce", par.tp, act,
                                    n * passes, True, "microbatch",
                                    "Megatron f/g: forward output" + (", backward input gradient" if train else "")))
        ev.append(CommEvent("embedding: vocab-parallel all-reduce", "tp", "all_reduce", par.tp, act, 1, True,
                            "microbatch", "first stage"))
        head_tokens = tokens if phase == "prefill" and logits == "all" else 1
        if train:
            ev.append(CommEvent("lm_head: vocab-parallel cross entropy", "tp", "all_reduce", par.tp,
                                b_mb * tokens * CROSS_ENTROPY_VALUES * FP32_BYTES, 1, True, "microbatch",
                                "max, sum of exp, target logit per token (fp32)"))
            ev.append(CommEvent("lm_head: input gradient all-reduce", "tp", "all_reduce", par.tp, act, 1, True,
                                "microbatch", "backward"))
        else:
            ev.append(CommEvent("lm_head: logits all-gather", "tp", "all_gather", par.tp,
                                b_mb * head_tokens * model.spec.vocab * e, 1, True, "microbatch",
                                "last stage; logits of the tokens the head runs on"))
    if par.cp > 1:
        for b, n in counts.items():
            blk = model.block(b)
            if isinstance(blk, Attention):
                kv = 2 * b_mb * tokens * (blk.kv_heads // par.tp) * blk.head_dim * e  # this rank's K and V
                if par.cp_attention == "ring":
                    ev.append(CommEvent(f"{b}: ring attention K/V pass", "cp", "send_recv", par.cp, kv,
                                        n * (par.cp - 1) * (2 * passes - 1), False, "microbatch",
                                        "cp - 1 steps forward; backward passes K/V and dK/dV again"))
                else:
                    ev.append(CommEvent(f"{b}: K/V all-gather", "cp", "all_gather", par.cp, kv * par.cp, n, False,
                                        "microbatch", "all-gather of every rank's K, V"))
                    if train:
                        ev.append(CommEvent(f"{b}: dK/dV reduce-scatter", "cp", "reduce_scatter", par.cp, kv * par.cp,
                                            n, False, "microbatch", "backward"))
            elif blk.kind in SSM_KINDS:
                state = b_mb * blk.state_bytes(D, prec.state) / par.tp
                ev.append(CommEvent(f"{b}: SSM state passing across ranks", "cp", "send_recv", par.cp, state,
                                    n * (par.cp - 1) * passes, True, "microbatch",
                                    "a chain: rank r waits for rank r - 1's final state (conv + SSM state)"))
    if par.ep > 1:
        for b, n in counts.items():
            blk = model.block(b)
            if isinstance(blk, MoE):
                ev.append(CommEvent(f"{b}: token dispatch and combine all-to-all", "ep", "all_to_all", par.ep,
                                    b_mb * tokens * blk.top_k * D * e, n * 2 * passes, True, "microbatch",
                                    "dispatch + combine per layer" + (" (and their gradients)" if train else "")))
    if par.pp > 1:
        ev.append(CommEvent("stage boundary activations", "pp", "send_recv", par.pp, act, passes, False,
                            "microbatch", "send to the next stage" + (", gradient back" if train else "")))
    if par.dp > 1 and train:
        dense, expert = rank_params(model, par, split_experts=True)
        ev.append(CommEvent("gradient all-reduce (non-expert parameters)", "dp", "all_reduce", par.dp, dense * e, 1,
                            False, "step", "DDP buckets, overlappable with the backward"))
        if expert and par.dp // par.ep > 1:
            ev.append(CommEvent("gradient all-reduce (expert parameters)", "dp", "all_reduce", par.dp // par.ep,
                                expert * e, 1, False, "step", "over the dp / ep replicas of each expert"))
    return [x for x in ev if x.count > 0 and x.bytes > 0]


# ------------------------------------------------------------------------------------------- memory

def _block_params(model: Model, name: str, par: Parallel) -> tuple[float, float]:
    """(non-expert, expert) parameters one rank holds of one instance of block ``name``."""
    blk, D = model.block(name), model.d_model
    total = blk.params(D)
    if isinstance(blk, MoE):
        router = D + D * blk.experts  # the norm and the router: replicated
        return router, (total - router) / (par.ep * par.tp)
    if par.tp > 1 and isinstance(blk, (Attention, MLP, Mamba2)):
        norm = blk.width_in(D) if isinstance(blk, Attention) else D  # the input norm: replicated
        return norm + (total - norm) / par.tp, 0.0
    return total, 0.0  # replicated: a plain linear block, or any block at tp = 1


def rank_params(model: Model, par: Parallel, split_experts: bool = False):
    """Parameters on the heaviest stage's rank: blocks (ceil(n / pp) instances, shared blocks once) plus
    one vocabulary table / tp (two on one stage when untied and pp == 1), final norm and positions."""
    dense = expert = 0.0
    for b, n in model.block_counts.items():
        d, x = _block_params(model, b, par)
        k = 1 if model.block(b).shared else stage_count(n, par.pp)
        dense, expert = dense + k * d, expert + k * x
    s = model.spec
    tables = 2 if (not s.tie_embeddings and par.pp == 1) else 1
    dense += tables * math.ceil(s.vocab / par.tp) * s.d_model + s.d_model + s.position_embeddings * s.d_model
    return (dense, expert) if split_experts else dense + expert


def rank_cache_bytes(model: Model, phase: str, par: Parallel, prec, b_rank: float, cached_tokens: float) -> dict:
    """KV cache and recurrent state one rank holds for its ``b_rank`` sequences (inference)."""
    kv = state = 0.0
    if phase != "train":
        for b, n in model.block_counts.items():
            blk, k = model.block(b), stage_count(n, par.pp)
            if isinstance(blk, Attention):
                kv += k * blk.kv_elements_per_token() / par.tp * blk.cached_tokens(cached_tokens) * nbytes(prec.kv)
            state += k * blk.state_bytes(model.d_model, prec.state) / par.tp
    return {"kv_cache": kv * b_rank, "state": state * b_rank}
