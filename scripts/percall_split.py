"""Where the per-call floor of a library call comes from (issue #13): host time, GPU time, or both.

For each library call at its smallest shape in the default H200 suites (and a tiny shape beside the
chunked scans), through the same backend ``prepare`` the sweep uses (same inputs, same call):

- ``first_call_s``: the first call, synchronised (Triton compiling and autotuning, cuDNN plans);
- ``host_single_s``: CPU time to issue one call, not synchronised (the device runs after it),
  with the GPU idle before it: median of 30;
- ``host_b2b_s``: CPU time per call issuing 10 calls back to back without synchronising, median
  of 10 batches (``_probe_achievable.host_per_call``);
- ``gpu_busy_s`` / ``kernels``: the GPU activities (kernels, memcpy, memset) of one call from
  torch.profiler over 5 calls: the sum of their durations per call, their count and names;
- ``wall_b2b_s``: wall time per call back to back, CUDA events around 20 calls / 20, no flush;
- ``suite_s``: what the suites record, ``timing.time_call`` with the L2 flushed before each call;
- ``host_api``: CUDA runtime / driver calls per call (launches, copies, synchronisations) and the
  number of ``aten::`` ops, from the profiler's CPU events;
- ``syncs``: synchronisations PyTorch reports for one call (``torch.cuda.set_sync_debug_mode``);
- ``host_top``: cProfile of 20 calls, the functions with the most own time per call.

Run on the GPU machine with ssmbench staged (``scripts/device_percall.sh`` does it); the kernel
libraries' backends wait for their extension builds (``SSMBENCH_EXT_WAIT_S``). Writes a new JSON file
(``--out``, never overwritten) and prints a table.

    python scripts/percall_split.py --out $OUT/percall_split.json [--only LABEL ...] [--skip LABEL ...]
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path

# (label, op, backend, dtype, dims[, mode]): the smallest shape of each group in default_h200_a / _b (mode
# "fwd" where not given), then calls whose achievable estimate misses (issue #13): causal-conv1d's
# forward at a short sequence and large batch (the lane chain, analytic/chain.py: 234 us of GPU time
# predicted), its forward + backward (host-bound by the achievable estimate, 315 us, measured 607 us),
# and torch's conv decode step (7 small kernels: 14 us predicted, 38 us measured at B = 64)
CALLS = (
    ("ssd_chunked", "ssd", "mamba_ssm.mamba_chunk_scan_combined", "bf16",
     {"B": 1, "L": 4096, "H": 24, "P": 64, "N": 128, "G": 1, "C": 256}),
    ("ssd_chunked_tiny", "ssd", "mamba_ssm.mamba_chunk_scan_combined", "bf16",
     {"B": 1, "L": 256, "H": 24, "P": 64, "N": 128, "G": 1, "C": 256}),
    ("mamba3_siso", "mamba3", "mamba_ssm.mamba3_siso_combined", "bf16",
     {"B": 1, "L": 2048, "H": 32, "P": 64, "N": 128, "M": 1}),
    ("mamba3_siso_tiny", "mamba3", "mamba_ssm.mamba3_siso_combined", "bf16",
     {"B": 1, "L": 256, "H": 32, "P": 64, "N": 128, "M": 1}),
    ("mamba1_scan", "mamba1_scan", "mamba_ssm.selective_scan_cuda", "bf16",
     {"B": 1, "L": 2048, "E": 1536, "N": 16}),
    ("gated_delta_rule", "gated_delta_rule", "fla.chunk_gated_delta_rule", "bf16",
     {"B": 1, "L": 4096, "H": 16, "P": 128, "Pv": 128, "C": 64}),
    ("sdpa_flash", "attention_causal", "torch.sdpa.flash", "bf16",
     {"B": 1, "L": 4096, "S": 4096, "H": 32, "G": 8, "P": 128}),
    ("sdpa_cudnn", "attention_causal", "torch.sdpa.cudnn", "bf16",
     {"B": 1, "L": 4096, "S": 4096, "H": 32, "G": 8, "P": 128}),
    ("causal_conv1d_fn", "conv1d", "causal_conv1d.causal_conv1d_fn", "bf16",
     {"B": 1, "L": 2048, "E": 5120, "K": 4}),
    ("causal_conv1d_fn_cl", "conv1d", "causal_conv1d.causal_conv1d_fn_cl", "bf16",
     {"B": 4, "L": 4096, "E": 5376, "K": 4}),
    ("causal_conv1d_fn_short", "conv1d", "causal_conv1d.causal_conv1d_fn", "bf16",
     {"B": 64, "L": 128, "E": 4096, "K": 4}),
    ("causal_conv1d_fn_fwdbwd", "conv1d", "causal_conv1d.causal_conv1d_fn", "bf16",
     {"B": 2, "L": 4096, "E": 5120, "K": 4}, "fwdbwd"),
    ("torch_conv_decode", "conv1d", "torch.conv1d", "bf16", {"B": 64, "E": 5120, "K": 4}, "decode"),
    # whole blocks (measure/backends/blocks.py) at their smallest suite shapes (blocks_h200), forward: the
    # host time of one module call against what the composed plan charges (analytic/workloads/blocks.py:
    # the ops' host classes + launch.host.ssm_module per op call for mamba-ssm's modules)
    ("block_mamba1", "block:mamba1", "mamba_ssm.Mamba", "bf16", {"B": 1, "L": 512, "D": 768, "N": 16}),
    ("block_mamba2", "block:mamba2", "mamba_ssm.Mamba2", "bf16", {"B": 1, "L": 512, "D": 768, "N": 128, "P": 64, "G": 1}),
    ("block_mamba3", "block:mamba3", "mamba_ssm.Mamba3", "bf16", {"B": 1, "L": 512, "D": 1024, "N": 128, "P": 64}),
    ("block_attention", "block:attention", "torch.attention_block", "bf16",
     {"B": 1, "L": 512, "D": 2048, "H": 32, "G": 8, "P": 64}),
    ("block_gated_mlp", "block:gated_mlp", "torch.gated_mlp", "bf16", {"B": 1, "L": 512, "D": 2048, "F": 8192}),
    # the norms' backward kernels (measure/suites/norm_rope_h200.yaml, 2026-12-05): one program per SM loops over
    # ceil(B L / 132) rows (analytic/chain.py ROW_LOOP); eager calls there were host-bound at B = 8 and
    # the CUDA-graph captures of the backward failed, so the profiler's kernel times are the device time
    *((f"rmsnorm_bwd_b{b}_d{d}{'_fp32' if dt == 'fp32' else ''}", "rmsnorm", "mamba_ssm.rms_norm_fn", dt,
       {"B": b, "L": 2048, "D": d}, "bwd")
      for b, d, dt in ((2, 768, "bf16"), (8, 384, "bf16"), (8, 768, "bf16"), (8, 2048, "bf16"), (8, 4096, "bf16"),
                       (32, 768, "bf16"), (32, 768, "fp32"), (32, 2048, "bf16"))),
    *((f"gated_rmsnorm_bwd_b{b}_d{d}", "gated_rmsnorm", "mamba_ssm.rmsnorm_gated_fn", "bf16",
       {"B": b, "L": 2048, "D": d}, "bwd") for b, d in ((8, 512), (8, 1536), (8, 4096), (32, 1536))),
    ("rmsnorm_fwdbwd_b8_d768", "rmsnorm", "mamba_ssm.rms_norm_fn", "bf16", {"B": 8, "L": 2048, "D": 768}, "fwdbwd"),
    # Hugging Face's eager RoPE on transposed q, k views: the kernels' paths at a host-bound and a GPU-bound shape
    ("rope_b1", "rope", "torch_ref", "bf16", {"B": 1, "L": 2048, "H": 32, "G": 8, "P": 64}),
    ("rope_b8", "rope", "torch_ref", "bf16", {"B": 8, "L": 2048, "H": 32, "G": 8, "P": 64}),
    # causal-conv1d's forward-backward at the two stored shapes its achievable estimate calls device-bound
    ("causal_conv1d_fn_fwdbwd_b32", "conv1d", "causal_conv1d.causal_conv1d_fn", "bf16",
     {"B": 32, "L": 256, "E": 4096, "K": 4}, "fwdbwd"),
    ("causal_conv1d_fn_fwdbwd_b128", "conv1d", "causal_conv1d.causal_conv1d_fn", "bf16",
     {"B": 128, "L": 196, "E": 768, "K": 4}, "fwdbwd"),
    # the eager softmax's five kernels (amax, sub, exp, sum, div) on bf16 tensors at two device-bound shapes
    ("softmax_eager_s4096", "softmax", "torch_ref", "bf16", {"B": 1, "H": 32, "L": 1024, "S": 4096}),
    ("softmax_eager_s1024", "softmax", "torch_ref", "bf16", {"B": 1, "H": 8, "L": 1024, "S": 1024}),
    # the ATen paths of the eager references in 16-bit and 32-bit types at device-bound shapes: each kernel's
    # time from the profiler, for the 16-bit broadcast path the softmax's kernels point to
    ("softmax_eager_fp32", "softmax", "torch_ref", "fp32", {"B": 1, "H": 32, "L": 1024, "S": 4096}),
    ("softmax_eager_fp16", "softmax", "torch_ref", "fp16", {"B": 1, "H": 32, "L": 1024, "S": 4096}),
    ("softmax_eager_h32_s1024", "softmax", "torch_ref", "bf16", {"B": 4, "H": 32, "L": 1024, "S": 1024}),
    *((f"{op}_eager_{dt}", op, "torch_ref", dt, {"B": 8, "L": 2048, "D": 2048})
      for op in ("rmsnorm", "layernorm", "gated_rmsnorm") for dt in ("bf16", "fp32")),
    ("rope_b8_h14", "rope", "torch_ref", "bf16", {"B": 8, "L": 2048, "H": 14, "G": 2, "P": 64}),
    ("rope_b8_fp32", "rope", "torch_ref", "fp32", {"B": 8, "L": 2048, "H": 32, "G": 8, "P": 64}),
    # FlashAttention-2's split-KV decode through SDPA at B = 1-16 (num_splits_heuristic splits the key loop: a
    # split kernel and a combine kernel, chain_fa2.py): each kernel's device time, where the estimate falls
    # 10-16 us short of the graph-timed calls (results/h100/2026-12-05/fa2-fwd-oos)
    *((f"sdpa_flash_decode_b{b}_s{s}", "attention_causal", "torch.sdpa.flash", "bf16",
       {"B": b, "S": s, "H": 32, "G": 8, "P": 128}, "decode")
      for b, s in ((1, 1024), (1, 4096), (1, 16384), (1, 65536), (1, 131072), (2, 8192), (16, 4096))),
)
HOST_SINGLE = 30
B2B_CALLS, B2B_REPEATS = 10, 10
PROFILE_CALLS = 5
CPROFILE_CALLS = 20
API_PREFIXES = ("cuda", "cu")


def _median(xs):
    import numpy as np

    return float(np.median(xs))


# the extension each library's package imports at import time (measure/extensions.py EXTENSIONS)
NEEDS = {"mamba_ssm.": "selective_scan_cuda", "causal_conv1d.": "causal_conv1d_cuda"}


def wait_for_build(backend: str) -> None:
    """Wait while a background build of the extension this backend's library imports is in progress.
    The build folder holds a sub-folder named after the module (cpp_extension's work folder): an
    import before the .so exists binds that folder as a namespace package, which then stays bound
    (seen on the H200: "module 'selective_scan_cuda' has no attribute 'fwd'")."""
    import os

    module = next((m for prefix, m in NEEDS.items() if backend.startswith(prefix)), None)
    folder = os.environ.get("SSMBENCH_EXT_BUILD_DIR")
    if module is None or not folder:
        return
    status = Path(folder) / f"{module}.status.json"
    deadline = time.monotonic() + float(os.environ.get("SSMBENCH_EXT_WAIT_S", "600"))
    while time.monotonic() < deadline:
        try:
            if json.loads(status.read_text(encoding="utf-8")).get("state") != "building":
                return
        except (OSError, ValueError):
            return
        time.sleep(2.0)


def split_one(label, op, backend, dtype, dims, device, mode="fwd"):
    import torch

    from ssmbench.analytic.cases import Case
    from ssmbench.analytic.registry import get_op
    from ssmbench.measure import _probe_achievable as ach
    from ssmbench.measure.backends.base import get_backend
    from ssmbench.measure.models.host_api import sync_messages
    from ssmbench.measure.timing import TimingSettings, time_call

    wait_for_build(backend)
    b = get_backend(backend, op)
    case = Case(op, b.impl, backend, dims, dtype, mode)
    if op.startswith("block:"):  # a block case the analytic side composes from its plan
        from ssmbench.analytic.cases import case_cost

        case_cost(op, dims, impl=b.impl, mode=mode, dtype=dtype)
    else:
        get_op(op)  # the op exists in the registry (the case is one the analytic side costs)
    torch.manual_seed(0)
    prepared = b.prepare(case, device, 0)
    call = prepared.run
    sync = torch.cuda.synchronize
    row = {"label": label, "case": case.key()}

    sync()
    t0 = time.perf_counter()
    call()
    sync()
    row["first_call_s"] = time.perf_counter() - t0
    for _ in range(3):
        call()
    sync()

    single = []
    for _ in range(HOST_SINGLE):
        sync()
        t0 = time.perf_counter_ns()
        call()
        single.append((time.perf_counter_ns() - t0) * 1e-9)
    sync()
    row["host_single_s"] = _median(single)
    row["host_b2b_s"] = _median(ach.host_per_call(call, B2B_CALLS, B2B_REPEATS, sync))

    def batch():
        for _ in range(20):
            call()

    quiet = TimingSettings(target_s=0.2, warmup_calls=1, warmup_s=0.0, min_repeats=5, max_repeats=50,
                           flush_l2=False)
    row["wall_b2b_s"] = time_call(batch, device, quiet).median / 20
    row["suite_s"] = time_call(call, device, TimingSettings(target_s=0.3, warmup_calls=2, warmup_s=0.02,
                                                            min_repeats=5, max_repeats=500)).median

    gpu, host = ach.profile_gpu(call, PROFILE_CALLS, cpu=True)
    summary = ach.summarize_kernels(gpu, PROFILE_CALLS)
    row["gpu_busy_s"], row["kernels_per_call"] = summary["busy_s"], summary["kernels"]
    row["kernels"] = summary["names"]
    counts = collections.Counter(name for name, _ in host)
    row["host_api"] = {n: c / PROFILE_CALLS for n, c in sorted(counts.items()) if n.startswith(API_PREFIXES)}
    row["aten_ops_per_call"] = sum(c for n, c in counts.items() if n.startswith("aten::")) / PROFILE_CALLS

    row["syncs"] = sync_messages(call, sync)

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(CPROFILE_CALLS):
        call()
    prof.disable()
    sync()
    stats = pstats.Stats(prof)
    top = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:12]  # (file, line, fn) -> (cc, nc, tt, ct, callers)
    row["host_top"] = [{"function": f"{Path(f).name}:{line}({fn})", "calls_per_call": nc / CPROFILE_CALLS,
                        "own_s_per_call": tt / CPROFILE_CALLS, "cum_s_per_call": ct / CPROFILE_CALLS}
                       for (f, line, fn), (cc, nc, tt, ct, _) in top]
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="new JSON file (never overwritten)")
    p.add_argument("--only", nargs="*", default=None, help="labels to run (default: all)")
    p.add_argument("--skip", nargs="*", default=(), help="labels to leave out")
    args = p.parse_args(argv)
    labels = [c[0] for c in CALLS]
    unknown = [x for x in [*(args.only or ()), *args.skip] if x not in labels]
    if unknown:
        p.error(f"unknown label(s) {unknown}; known: {labels}")
    out = Path(args.out)
    if out.exists():
        p.error(f"--out {out}: file exists (never overwritten)")

    import torch

    from ssmbench.measure.environment import collect
    from ssmbench.measure.probe import failure_reason

    device = torch.device("cuda")
    doc = {"kind": "ssmbench-percall-split", "label": "measurement (host vs GPU time per library call)",
           "meta": collect(device, seed=0, argv=sys.argv), "method": __doc__, "rows": [], "failed": []}
    for label, op, backend, dtype, dims, *mode in CALLS:
        if (args.only is not None and label not in args.only) or label in args.skip:
            continue
        print(f"[percall] {label} ...", flush=True)
        t0 = time.perf_counter()
        try:
            doc["rows"].append(split_one(label, op, backend, dtype, dims, device, *mode))
        except Exception as exc:  # one library missing must not lose the others
            doc["failed"].append({"label": label, "reason": failure_reason(exc)})
            print(f"[percall] {label} failed: {failure_reason(exc)[:300]}", flush=True)
        print(f"[percall] {label}: {time.perf_counter() - t0:.1f} s", flush=True)
        torch.cuda.empty_cache()
        with open(out.with_suffix(".partial"), "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1, default=str)
    with open(out, "x", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1, default=str)
    out.with_suffix(".partial").unlink(missing_ok=True)
    print_table(doc)
    return 0


def print_table(doc) -> None:
    us = lambda s: f"{s * 1e6:9.1f}"  # noqa: E731
    print(f"{'call':22} {'kern':>5} {'GPU us':>9} {'host1 us':>9} {'hostB2B':>9} {'wallB2B':>9} {'suite us':>9} "
          f"{'syncs':>5}  top host function (own us/call)")
    for r in doc["rows"]:
        top = r["host_top"][0] if r["host_top"] else {"function": "", "own_s_per_call": 0}
        print(f"{r['label']:22} {r['kernels_per_call']:5g} {us(r['gpu_busy_s'])} {us(r['host_single_s'])} "
              f"{us(r['host_b2b_s'])} {us(r['wall_b2b_s'])} {us(r['suite_s'])} {len(r['syncs']):5d}  "
              f"{top['function'][:50]} ({top['own_s_per_call'] * 1e6:.1f})")
    for f in doc["failed"]:
        print(f"{f['label']:22} FAILED: {f['reason'][:150]}")


if __name__ == "__main__":
    sys.exit(main())
