"""Time one tensor-parallel block on every rank of a torchrun job, beside its multi-GPU prediction: the
measurement that validates ``predict --tp`` (issue #18: within 15% median for TP = 2, 4, 8).

    torchrun --nproc-per-node N -m ssmbench.measure.tp_blocks --model M --block NAME --out FILE.json

The block is the model's block ``NAME`` (a Mamba-2 mixer, or an attention block followed by the
model's MLP block when ``--block`` names both, comma-separated, as one transformer layer), each with
its pre-norm and residual add, split over the N ranks of the job exactly as ``shard.py`` splits it:

- mamba2: on CUDA with mamba_ssm installed, ``mamba_ssm.Mamba2(process_group=..., sequence_parallel=False)``:
  its column-parallel in_proj, the heads' conv / SSD / gated norm, and its row-parallel out_proj,
  whose all-reduce is the block's one collective. Elsewhere (the CPU test path) the same split in
  plain PyTorch (the SSD reference of ``analytic/ops/ssd/ref.py``), recorded as such: its time is a
  test of the harness, not of the kernels the prediction costs.
- attention: qkv (column-parallel, H / N heads, G / N KV heads), SDPA causal, the K/V write into a
  cache (the plan's kv_append), o_proj (row-parallel) and its all-reduce; mlp: gate / up (F / N),
  SiLU gating, down projection, all-reduce. Plain PyTorch (SDPA: FlashAttention on CUDA).

Timing: prefill forward under ``torch.no_grad``, warm-up, then REPEATS regions of back-to-back calls,
each between a barrier and a device synchronise; per region the slowest rank; the median. Rank 0
writes FILE: the measurement, the prediction of the same block on ``--hw`` (compute: the rank's ops'
roofline bound, ``compute.layers_s`` of a one-layer model; communication: the block's all-reduces on
the spec's link) and their ratio. RoPE is left out of both (the one-layer model drops ``rope_dim``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPEATS = 5
WARMUP = 3


def one_layer_model(model, blocks: list[str]):
    """A model of one layer of ``blocks`` of ``model`` (same width, vocabulary, norm; no RoPE)."""
    from ..analytic.workloads.models import parse_model

    s = model.spec
    defs = {}
    for b in blocks:
        if b not in s.blocks:
            from ..errors import UserError
            raise UserError(f"--block {b!r}: {model.id} has blocks {', '.join(s.blocks)}")
        d = s.blocks[b].model_dump()
        if d.get("kind") == "attention":
            d["rope_dim"] = None
        defs[b] = d
    return parse_model({"schema_version": 1, "id": f"{s.id}-layer", "name": f"one layer of {s.name}",
                        "family": s.family, "sources": {k: v.model_dump() for k, v in s.sources.items()},
                        "d_model": s.d_model, "vocab": s.vocab, "tie_embeddings": s.tie_embeddings, "norm": s.norm,
                        "blocks": defs, "layers": [{"repeat": 1, "blocks": blocks}]}, f"{model.origin} (one layer)")


def predicted(model, blocks, spec, tp: int, batch: int, seqlen: int, dtype: str) -> dict:
    """The prediction of the blocks alone: the layer's compute bound plus the blocks' communication."""
    from ..analytic.workloads.parallel import predict_parallel
    from ..analytic.workloads.shard import Parallel

    layer = one_layer_model(model, blocks)
    r = predict_parallel(layer, spec, "prefill", batch, seqlen, par=Parallel(tp=tp), dtype=dtype,
                         with_reference=False)
    comm = [c for c in r["communication"] if c["what"].split(":")[0] in blocks]
    t_comm = sum(c["time_s"] for c in comm)
    return {"label": "analytic bound (compute) + interconnect model (communication)",
            "time_s": r["compute"]["layers_s"] + t_comm, "compute_s": r["compute"]["layers_s"],
            "communication_s": t_comm, "communication": comm, "spec": spec.id}


def _rms(x, w):
    import torch
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w


def _attention_mlp(blks, D, tp, B, L, device, dtype, dist):
    """Callables of one attention block and (optionally) one MLP block, sharded over ``tp`` ranks."""
    import torch
    import torch.nn.functional as F

    g = torch.Generator(device="cpu").manual_seed(0)

    def w(*shape):
        return (torch.randn(*shape, generator=g) / shape[0] ** 0.5).to(device, dtype)

    calls = []
    for blk in blks:
        if blk.kind == "attention":
            H, G, P = blk.heads // tp, blk.kv_heads // tp, blk.head_dim
            wn, wqkv, wo = torch.ones(D, device=device, dtype=dtype), w(D, (H + 2 * G) * P), w(H * P, D)
            cache = torch.empty(2, B, G, L, P, device=device, dtype=dtype)

            def attn(x, H=H, G=G, P=P, wn=wn, wqkv=wqkv, wo=wo, cache=cache):
                qkv = (_rms(x, wn) @ wqkv).view(B, L, H + 2 * G, P).transpose(1, 2)  # [B, H+2G, L, P]
                q, k, v = qkv.split([H, G, G], dim=1)
                cache[0].copy_(k)
                cache[1].copy_(v)
                o = F.scaled_dot_product_attention(q, k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1),
                                                   is_causal=True)
                y = o.transpose(1, 2).reshape(B, L, H * P) @ wo
                dist.all_reduce(y)
                return x + y
            calls.append(attn)
        elif blk.kind == "mlp":
            Fp = blk.d_ff // tp
            wn, wgu, wd = torch.ones(D, device=device, dtype=dtype), w(D, 2 * Fp), w(Fp, D)

            def mlp(x, Fp=Fp, wn=wn, wgu=wgu, wd=wd):
                gate, up = (_rms(x, wn) @ wgu).split([Fp, Fp], dim=-1)
                y = (F.silu(gate) * up) @ wd
                dist.all_reduce(y)
                return x + y
            calls.append(mlp)
    return calls


def _mamba2(blk, D, tp, B, L, device, dtype, dist, group):
    """(callable, implementation) of one Mamba-2 block sharded over the ranks of ``group``."""
    import torch

    wn = torch.ones(D, device=device, dtype=dtype)
    if device.type == "cuda":
        try:
            from mamba_ssm import Mamba2
        except ImportError:
            Mamba2 = None
        if Mamba2 is not None:
            try:  # the fused path (the plan's ops) needs causal-conv1d's CUDA extension
                import causal_conv1d  # noqa: F401
                fused = True
            except ImportError:
                fused = False
            m = Mamba2(D, d_state=blk.d_state, d_conv=blk.d_conv, expand=blk.expand, headdim=blk.headdim,
                       ngroups=blk.ngroups, chunk_size=blk.chunk_size, process_group=group, sequence_parallel=False,
                       use_mem_eff_path=fused, device=device, dtype=dtype)
            return (lambda x: x + m(_rms(x, wn))), ("mamba_ssm.Mamba2 (process_group, sequence_parallel=False, "
                                                   f"use_mem_eff_path={fused})")
    from ..analytic.ops.conv1d.ref import conv1d_causal_ref
    from ..analytic.ops.norm.ref import gated_rmsnorm_ref
    from ..analytic.ops.ssd.ref import ssd_chunked_ref

    H, G, N, P = blk.heads(D) // tp, blk.ngroups // tp, blk.d_state, blk.headdim
    E = H * P
    g = torch.Generator(device="cpu").manual_seed(0)
    win = (torch.randn(D, 2 * E + 2 * G * N + H, generator=g) / D ** 0.5).to(device, dtype)
    wout = (torch.randn(E, D, generator=g) / E ** 0.5).to(device, dtype)
    conv_w = torch.randn(E + 2 * G * N, blk.d_conv, generator=g).to(device, dtype)
    conv_b = torch.zeros(E + 2 * G * N, device=device, dtype=dtype)
    A_log, Dp = torch.zeros(H, device=device), torch.ones(H, device=device)
    dt_bias, wg = torch.zeros(H, device=device), torch.ones(E, device=device, dtype=dtype)

    def block(x):
        z, xbc, dt = (_rms(x, wn) @ win).split([E, E + 2 * G * N, H], dim=-1)
        xbc = conv1d_causal_ref(xbc.transpose(1, 2), conv_w, conv_b).transpose(1, 2)
        xs, Bm, Cm = xbc.split([E, G * N, G * N], dim=-1)
        y, _ = ssd_chunked_ref(xs.reshape(B, L, H, P), dt, -torch.exp(A_log), Bm.reshape(B, L, G, N),
                               Cm.reshape(B, L, G, N), Dp, dt_bias, min(blk.chunk_size, L))
        y = gated_rmsnorm_ref(y.reshape(B, L, E), z, wg).to(dtype) @ wout
        dist.all_reduce(y)
        return x + y
    return block, "torch reference (analytic/ops/ssd/ref.py; a harness test, not the kernels)"


def main(argv: list[str] | None = None) -> int:
    import torch
    import torch.distributed as dist

    from ..analytic.workloads.models import get_model
    from ..hwspecs import get_spec
    from .distributed import gather_to_rank0, init, rank_meta, shutdown, time_regions
    from .environment import collect

    ap = argparse.ArgumentParser(prog="python -m ssmbench.measure.tp_blocks", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--block", required=True, help="block name(s) of the model, comma-separated (attn,mlp)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--hw", default="h200-sxm", help="spec of the prediction")
    ap.add_argument("--target-time", type=float, default=0.5, help="timed seconds (all repeats)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    rank = init(a.device)
    try:
        device = torch.device(rank.device)
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[a.dtype]
        model = get_model(a.model)
        names = [b.strip() for b in a.block.split(",")]
        tp, D, B, L = rank.world_size, model.d_model, a.batch, a.seqlen
        pred = predicted(model, names, get_spec(a.hw), tp, B, L, a.dtype)  # checks divisibility before timing
        blks = [model.block(b) for b in names]
        if blks[0].kind == "mamba2":
            fn, impl = _mamba2(blks[0], D, tp, B, L, device, dtype, dist, dist.group.WORLD)
            calls = [fn]
        else:
            calls, impl = _attention_mlp(blks, D, tp, B, L, device, dtype, dist), "plain PyTorch (SDPA)"
        x = torch.randn(B, L, D, device=device, dtype=dtype)

        def step():
            y = x
            for c in calls:
                y = c(y)
            return y

        def sync():
            if device.type == "cuda":
                torch.cuda.synchronize(device)

        with torch.no_grad():
            per, iters = time_regions(dist, device, step, sync, a.target_time, warmup=WARMUP, repeats=REPEATS)
        ranks = gather_to_rank0({**rank_meta(rank), "device": collect(device, 0)["device"]})
        if rank.rank == 0:
            measured = statistics.median(per)
            doc = {"kind": "ssmbench.tp_block", "model": model.id, "blocks": names, "tp": tp, "batch": B,
                   "seqlen": L, "dtype": a.dtype, "phase": "prefill", "implementation": impl,
                   "measured": {"label": "measurement", "time_s": measured, "regions_s": per, "iterations": iters,
                                "method": f"median of {REPEATS} regions, slowest rank, perf_counter + synchronize"},
                   "predicted": pred, "ratio_measured_to_predicted": measured / pred["time_s"],
                   "meta": {**collect(device, 0, list(sys.argv)), "ranks": ranks}}
            Path(a.out).parent.mkdir(parents=True, exist_ok=True)
            Path(a.out).write_text(json.dumps(doc, indent=1, default=str) + "\n", encoding="utf-8")
            print(f"{model.id} {'+'.join(names)} tp={tp}: measured {measured * 1e3:.4g} ms, predicted "
                  f"{pred['time_s'] * 1e3:.4g} ms (ratio {measured / pred['time_s']:.3g}); {impl}")
    finally:
        shutdown()
    return 0


if __name__ == "__main__":
    from ..errors import UserError

    try:
        sys.exit(main())
    except UserError as exc:
        print(f"ssmbench: error: {exc}", file=sys.stderr)
        sys.exit(2)
