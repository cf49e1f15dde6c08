"""The one table from a GPU kernel's name to the part of a model step it belongs to.

A whole-model profile (torch.profiler, CUPTI) gives kernel names and durations, not op calls: one
cuBLAS GEMM kernel serves an in-projection, an MLP and the LM head alike. So the comparison of
predicted and measured time shares is made per **part**, a group of op identities whose kernels can
be told apart by name:

    gemm         linear, lm_head, mlp, gated_mlp, mlp_relu2, gated_mlp_geglu, moe (their GEMMs)
    attention    attention_causal, attention_full, softmax
    ssm_scan     mamba1_scan, ssd (and its stages), mamba3, gated_delta_rule, s4 (scan and decode step)
    conv1d       conv1d
    norm         rmsnorm, layernorm, gated_rmsnorm (fused Triton / CUDA norm kernels)
    embedding    embedding (gather, and its backward scatter)
    elementwise  add, copy, cast, silu, softplus, silu_gate, a_from_log, mamba3_prep, rope, kv_append,
                 repeat_kv
    loss         cross_entropy (the training step's log_softmax and nll_loss kernels, forward and backward;
                 the zero-fill of its gradient lands in elementwise)
    optimizer    adamw (torch.optim's foreach / fused parameter updates)
    memory       measured only: memcpy / memset activities

An implementation whose kernels land elsewhere than its op's part is listed in ``PART_OF_IMPL`` (an
eager norm's ATen kernels are ``elementwise``).

``KERNEL_PARTS`` rows are tried in order, the first match wins (so the specific library kernels come
before the broad GEMM and elementwise patterns). A name no row matches is ``unmapped``: it is
reported with its share of the step, never folded into a part. ``PART_OF_OP`` puts every registered
op in a part (tests/test_model_kernel_map.py checks both tables).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

UNMAPPED = "unmapped"
# Range annotations PyTorch mirrors onto the GPU timeline (kineto's gpu_user_annotation: the span of the kernels
# run inside a ``record_function`` range, not a kernel): torch.optim's ``Optimizer.step#AdamW.step`` /
# ``Optimizer.zero_grad#...`` and the profiler's ``ProfilerStep#N``. A kernel's (C++) name has no '#'.
ANNOTATION = re.compile(r"^(Optimizer\.\w+#|ProfilerStep#)")
PARTS = ("gemm", "attention", "ssm_scan", "conv1d", "norm", "embedding", "elementwise", "loss", "optimizer",
         "memory")
MEASURED_ONLY_PARTS = ("memory",)


@dataclass(frozen=True)
class KernelRule:
    pattern: str  # regular expression, searched (not anchored) in the kernel name, case-insensitive
    part: str
    op: str  # the op identity (or op group) the kernel runs for
    why: str  # whose kernel this is

    def __post_init__(self):
        if self.part not in PARTS:
            raise ValueError(f"kernel rule {self.pattern!r}: part {self.part!r} not in {PARTS}")


KERNEL_PARTS: tuple[KernelRule, ...] = (
    KernelRule(r"multi_tensor_apply|fused_adam|adamw?_|_foreach_", "optimizer", "adamw",
               "torch.optim (foreach / fused) parameter updates"),
    KernelRule(r"^memcpy|^memset|\bmemcpy|\bmemset", "memory", "memcpy", "CUDA memcpy / memset activities"),
    KernelRule(r"selective_scan_(fwd|bwd)_kernel", "ssm_scan", "mamba1_scan",
               "mamba-ssm selective_scan_cuda (Mamba-1 scan, forward and backward)"),
    KernelRule(r"selective_scan_update|selective_state_update", "ssm_scan", "ssm_state_update",
               "mamba-ssm's Triton decode step (Mamba-1 and Mamba-2 share it)"),
    KernelRule(r"_chunk_cumsum|_chunk_state|_state_passing|_chunk_scan|_bmm_chunk", "ssm_scan", "ssd",
               "mamba-ssm SSD Triton kernels (Mamba-2 chunked scan, forward and backward)"),
    KernelRule(r"mamba3|angle_dt", "ssm_scan", "mamba3", "mamba-ssm Mamba-3 Triton kernels"),
    KernelRule(r"gated_delta|fused_recurrent|chunk_fwd_kernel|chunk_bwd_kernel", "ssm_scan", "gated_delta_rule",
               "fla kernels"),
    KernelRule(r"causal_conv1d|conv1d_|depthwise", "conv1d", "conv1d",
               "causal-conv1d CUDA kernels; PyTorch's depthwise conv"),
    KernelRule(r"flash|fmha|sdpa|attention|attn", "attention", "attention_causal",
               "SDPA backends (FlashAttention-2, cuDNN, memory-efficient), flash-attn"),
    # cuDNN's SDPA runs helper kernels beside its fprop / bprop kernels, named without "sdpa" (the
    # whole-model profiles of 2026-12-03/04, cuDNN 9 under PyTorch 2.11): lean_reduction_kernel (the decode
    # kernel's split reduction at B = 1), compute_dot_do_o_specialized (the backward's rowsum(dO o O)),
    # convert_dq_to_16bits (dQ from its fp32 accumulator), fmha_reduce_head (GQA's dK, dV summed over groups)
    KernelRule(r"cudnn::fusion::", "attention", "attention_causal",
               "cuDNN SDPA's helper kernels (split reduction, dot(dO, O), dQ conversion, GQA head reduction)"),
    KernelRule(r"cross_entropy|log_?softmax|nll_loss", "loss", "cross_entropy", "F.cross_entropy"),
    KernelRule(r"softmax", "attention", "softmax", "eager attention's softmax"),
    KernelRule(r"layer_norm|rms_norm|rmsnorm|layernorm|_norm_(fwd|bwd)", "norm", "rmsnorm",
               "mamba-ssm Triton (fused add-)norms, RMSNormGated, PyTorch layer norm"),
    KernelRule(r"embedding|index_select|indexselect|indexing_backward|krn_partial|partials_per_segment|"
               r"num_of_partial_segments|unique_by_key", "embedding", "embedding",
               "nn.Embedding forward (gather) and backward (sort + scatter-add: PyTorch's segment kernels "
               "krn_partials_per_segment, compute_num_of_partial_segments, ... and cub's unique_by_key)"),
    KernelRule(r"gemm|gemv|nvjet|xmma|cutlass|cublas|splitkreduce|kernel2|sm90_|sm80_|dot_kernel", "gemm", "linear",
               "cuBLAS / cuBLASLt / CUTLASS matrix products"),
    KernelRule(r"elementwise|vectorized|unrolled|reduce_kernel|catarray|copy|fill|_swiglu|silu|gelu|softplus|"
               r"where|clamp|index_put|scatter|gather|triu|tril|arange|pow|rsqrt|mul|add|exp|neg|cumsum|sort|"
               r"scan_innermost|DeviceScan|DeviceCompact|roll_cuda|"
               r"radix|compare|uniform|normal|distribution|cast|to_copy|triton_(poi|red|per)_", "elementwise", "elementwise",
               "PyTorch eager elementwise, reduction, copy and indexing kernels; Inductor's fused Triton kernels"),
)

_COMPILED = tuple((re.compile(r.pattern, re.IGNORECASE), r) for r in KERNEL_PARTS)

# Every registered op, by the part its kernels land in (tests check it covers the registry).
PART_OF_OP: dict[str, str] = {
    **{op: "gemm" for op in ("linear", "lm_head", "mlp", "gated_mlp", "mlp_relu2", "gated_mlp_geglu", "moe")},
    **{op: "attention" for op in ("attention_causal", "attention_full", "softmax")},
    **{op: "ssm_scan" for op in ("mamba1_scan", "ssd", "ssd_chunk_cumsum", "ssd_bmm", "ssd_chunk_state",
                                 "ssd_state_passing", "ssd_chunk_scan", "mamba3", "gated_delta_rule", "s4")},
    "conv1d": "conv1d",
    "cross_entropy": "loss",
    **{op: "norm" for op in ("rmsnorm", "layernorm", "gated_rmsnorm")},
    "embedding": "embedding",
    "adamw": "optimizer",
    **{op: "elementwise" for op in ("add", "copy", "cast", "silu", "softplus", "silu_gate", "a_from_log",
                                    "mamba3_prep", "rope", "kv_append", "repeat_kv")},
}


# Implementations whose kernels land in another part than their op's: an eager composition of a norm
# (Hugging Face's RMSNorm: fp32 cast, pow, mean, + eps, rsqrt, *, cast back, * w; the gated norm and
# layer norm alike) runs ATen's elementwise and reduction kernels, which ``KERNEL_PARTS`` puts in
# ``elementwise``, not a fused norm kernel; mamba-ssm's residual add (``add``/``fused_norm``) runs inside
# its norm kernel.
PART_OF_IMPL: dict[tuple[str, str], str] = {
    **{(op, "torch_eager"): "elementwise" for op in ("rmsnorm", "layernorm", "gated_rmsnorm")},
    ("add", "fused_norm"): "norm",  # mamba-ssm's fused_add_norm: the residual add inside the norm kernel
}


def classify(name: str) -> KernelRule | None:
    """The first rule whose pattern matches the kernel ``name``; None: unmapped."""
    for rx, rule in _COMPILED:
        if rx.search(name):
            return rule
    return None


def part_of_op(op: str, impl: str | None = None) -> str:
    """The part whose kernels an op call of ``op`` (run as ``impl``, where given) lands in."""
    if impl is not None and (op, impl) in PART_OF_IMPL:
        return PART_OF_IMPL[(op, impl)]
    try:
        return PART_OF_OP[op]
    except KeyError:
        raise KeyError(f"op {op!r} has no part in measure/models/kernel_map.py PART_OF_OP") from None


def is_annotation(name: str) -> bool:
    """Whether a profiler row named ``name`` is a range annotation mirrored onto the GPU timeline, not a kernel
    (``ANNOTATION``)."""
    return bool(ANNOTATION.search(name))


def measured_profile(record: dict) -> dict:
    """A model-run record's profile as the analysis reads it: ``reclassified`` with the record's timed median as
    the step (so an annotation row dropped from the busy time goes back to the host's idle time)."""
    step = (record.get("time_s") or {}).get("median")
    return reclassified(record.get("profile") or {}, None if step is None else float(step))


def reclassified(profile: dict, step_s: float | None = None) -> dict:
    """``profile`` (a record's ``breakdown``, as stored) with its kernel rows classified again under the current
    table and their time and launches moved between parts where the class changed: a result file keeps the parts
    of the table it was measured with, and a rule added since (a library's kernel that was unmapped) applies to
    stored profiles too. Only the stored rows move (a record keeps its longest ``profile_top`` kernels; the rest
    stay in the parts they were counted in); profiles without per-kernel rows come back unchanged.

    Rows that are range annotations (``is_annotation``; profiles taken before ``profile_gpu`` skipped them) are
    dropped: their time leaves the unmapped part and ``busy_s`` (it was counted twice, once as the annotation and
    once as the kernels inside it), and ``host_idle_s`` becomes ``step_s`` - ``busy_s`` (without ``step_s``: the
    stored idle time plus the dropped time, a lower bound where the stored one was clipped at zero)."""
    rows = profile.get("kernels")
    if not rows:
        return profile
    dropped = [r for r in rows if is_annotation(r["name"])]
    if dropped:
        rows = [r for r in rows if not is_annotation(r["name"])]
        extra = sum(float(r["time_s"]) for r in dropped)
        names = {r["name"] for r in dropped}
        old = dict(profile.get("unmapped") or {"time_s": 0.0, "names": []})
        busy = float(profile.get("busy_s") or 0.0) - extra
        idle = (max(0.0, step_s - busy) if step_s is not None
                else float(profile.get("host_idle_s") or 0.0) + extra)
        profile = {**profile, "busy_s": busy, "host_idle_s": idle,
                   "launches": float(profile.get("launches") or 0.0) - sum(float(r["count"]) for r in dropped),
                   "kernels": rows, "annotations_dropped": sorted(names),
                   "unmapped": {**old, "time_s": float(old.get("time_s") or 0.0) - extra,
                                "names": [n for n in (old.get("names") or []) if n not in names]}}
    parts = {k: dict(v) for k, v in (profile.get("parts") or {}).items()}
    unmapped = dict(profile.get("unmapped") or {"time_s": 0.0, "share": None, "names": []})
    moved_names, fresh_rows = set(), []
    for r in rows:
        rule = classify(r["name"])
        part, op = (rule.part, rule.op) if rule else (UNMAPPED, None)
        if part != r.get("part"):
            t, n = float(r["time_s"]), float(r["count"])
            if r.get("part") == UNMAPPED:
                unmapped["time_s"] = unmapped["time_s"] - t
                moved_names.add(r["name"])
            elif r.get("part") in parts:
                parts[r["part"]]["time_s"] -= t
                parts[r["part"]]["launches"] -= n
            if part == UNMAPPED:
                unmapped["time_s"] = unmapped["time_s"] + t
                unmapped["names"] = list(unmapped.get("names") or []) + [r["name"]]
            else:
                dst = parts.setdefault(part, {"time_s": 0.0, "launches": 0.0})
                dst["time_s"] += t
                dst["launches"] += n
        fresh_rows.append({**r, "part": part, "op": op})
    busy = float(profile.get("busy_s") or 0.0)
    for p in parts.values():
        p["share"] = p["time_s"] / busy if busy > 0 else None
    unmapped["names"] = [n for n in (unmapped.get("names") or []) if n not in moved_names]
    unmapped["share"] = unmapped["time_s"] / busy if busy > 0 else None
    return {**profile, "parts": {k: v for k, v in parts.items() if v["launches"] > 0 or v["time_s"] > 0},
            "kernels": fresh_rows, "unmapped": unmapped}


def breakdown(kernels: Iterable[Sequence], steps: int) -> dict:
    """Per-step kernel time by part and by kernel name, from profiler activities.

    ``kernels``: (name, seconds) or (name, seconds, count) items over ``steps`` profiled steps.
    Returns ``{"busy_s", "launches", "parts": {part: {"time_s", "share", "launches"}},
    "kernels": [{"name", "part", "op", "time_s", "count"}], "unmapped": {"time_s", "share",
    "names"}}``, all per step; shares are of the summed kernel time (``busy_s``)."""
    if steps < 1:
        raise ValueError("steps must be >= 1")
    by_name: dict[str, list[float]] = {}
    for item in kernels:
        name, seconds = str(item[0]), float(item[1])
        count = float(item[2]) if len(item) > 2 else 1.0
        acc = by_name.setdefault(name, [0.0, 0])
        acc[0] += seconds
        acc[1] += count
    rows, parts = [], {}
    busy = sum(v[0] for v in by_name.values()) / steps
    for name, (t, n) in sorted(by_name.items(), key=lambda kv: -kv[1][0]):
        rule = classify(name)
        part, op = (rule.part, rule.op) if rule else (UNMAPPED, None)
        rows.append({"name": name, "part": part, "op": op, "time_s": t / steps, "count": n / steps})
        p = parts.setdefault(part, {"time_s": 0.0, "launches": 0.0})
        p["time_s"] += t / steps
        p["launches"] += n / steps
    for p in parts.values():
        p["share"] = p["time_s"] / busy if busy > 0 else None
    un = parts.pop(UNMAPPED, {"time_s": 0.0, "share": 0.0 if busy > 0 else None})
    return {"busy_s": busy, "launches": sum(r["count"] for r in rows), "parts": parts, "kernels": rows,
            "unmapped": {"time_s": un["time_s"], "share": un["share"],
                         "names": [r["name"] for r in rows if r["part"] == UNMAPPED]}}
