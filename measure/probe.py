"""``ssmbench probe``: measure the attained ceilings of the local device and write them as a spec
fragment: a ``measured:`` list in the spec schema's own format (key, value with unit, date, method),
checked by ``hwspecs.fragment.check_measured`` before it is written, plus metadata. ``ssmbench specs
new --from SPEC --probe FILE`` merges it into a spec.

What is measured (every time through ``timing.time_call``; rate = work / median time):

- copy bandwidth: ``dst.copy_(src)`` of a buffer much larger than the last-level cache; bytes =
  read + written (2 x size). Spec key ``memory.dram.bandwidth``.
- matmul rate per dtype (fp32, bf16, fp16 where the device supports it): n x n x n ``torch.matmul``
  into a preallocated output, 2 n^3 FLOPs. On CUDA bf16 / fp16 go to ``compute.tensor.<dtype>``; fp32
  (TF32 off, PyTorch's default) runs on the CUDA cores and is reported as an observation, not as a
  tensor-core ceiling. On the CPU every dtype goes to ``compute.tensor.<dtype>`` (the matmul rate
  is the CPU's tensor engine in the roofline's terms).
- vector fp32 rate: on CUDA with Triton, a kernel whose every element runs ITERS dependent FMAs
  (2 FLOPs each) with runtime coefficients (no constant folding), on a buffer of a few MB, so memory
  traffic is negligible: ``compute.vector.fp32``. Without Triton, and on the CPU, an eager FMA
  (``torch.add(y, x, alpha=a, out=z)``, 2 FLOPs per element) on a cache-sized buffer: that is the
  attained rate of an eager elementwise op, bounded by cache bandwidth, not by the FMA units, so it is
  an observation, never a spec ceiling.
- transcendental rate: on CUDA with Triton, ITERS dependent ``y = exp(-y)`` per element (one exp
  each; the multiply by -log2(e) that ``tl.exp`` adds runs on the FMA pipe): ``compute.special_function``.
  Elsewhere eager ``torch.exp`` on a cache-sized buffer, an observation.
- CUDA only: kernel-launch latency: a batch of 100 launches of a one-element ``add_``, timed as one
  region with CUDA events, divided by 100: the steady-state cost per launch when kernels are issued
  back to back (``launch.kernel``); CUDA-graph per-node latency: a captured graph of 100 such kernels,
  replay time / 100 (``launch.graph_node``).

- CUDA with NVML, ``--energy`` (instead of the rest): the energy kernels of ``measure/_probe_energy.py``,
  one >= 1 s NVML window each (empty launches, FMA loop, exp loop, L2-resident reads, DRAM copy, GEMM
  per dtype, mma.sync loop per dtype) with idle power measured the same way, solved term by term into ``energy.static_power``,
  ``energy.per_flop.*`` and ``energy.per_byte.*``; the windows are under ``energy_windows``.

- CUDA only, for the achievable-time model (issue #13; ``measure/_probe_achievable.py`` says how each
  is built): per-call cost by backend class (torch_eager, triton, cuda_extension, cublas, cudnn), host
  time per call issued back to back without synchronising (``launch.host.<class>``), GPU kernel time
  per call (torch.profiler) and wall time per call back to back as observations; load-to-use
  latency by a pointer chase over 1 GiB, L2 flushed (``memory.dram.latency``) and over 8 MiB,
  L2-resident (``memory.l2.latency``), with a latency-vs-footprint curve; L2 read bandwidth of a
  16 MiB buffer read repeatedly with no flush (``memory.l2.bandwidth``), with a read-bandwidth-vs-
  footprint sweep (1-512 MiB) and its knee; the attained rate of the warp-synchronous ``mma.sync``
  tensor instruction (``compute.tensor_mma_sync.<dtype>``, ``measure/_probe_mma.py``); copy time vs
  bytes (4 KiB - 1 GiB) of a Triton copy kernel and of ``copy_``, fitted as t = t0 + bytes / BW
  (observations; copy_'s t0 is ``launch.timed_call``); the host time per backward-graph node
  (``launch.host.autograd_node``); attained DRAM bandwidth of ATen's broadcast, cast and reduction kernel
  paths (``memory.dram.path.<path>``) and the FLOP rate of PyTorch's depthwise convolution
  (``compute.path.conv_depthwise``). The curves are under ``curves``, the per-class split under
  ``per_call``.

A measurement that fails (unsupported dtype, Triton compile error, an extension that does not build)
is listed under ``failed`` with its reason; the others still run. The output file must not exist
(never overwritten).

Spread: every measurement records how far its repeats disagree, p90 / p10 of the samples (``spread``).
A median is a ceiling only when the repeats agree; on a small or shared machine PyTorch's default
thread pool can contend with other processes (17 MFLOP/s elementwise on a 2-core VM, 1000x below
``--threads 1``), and a wide spread is then reported as a warning naming the measurement.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..errors import UserError
from ..files import dump_yaml
from ..hwspecs.fragment import check_measured
from ..hwspecs.schema import value_kind
from ..hwspecs.units import format_quantity, parse
from .environment import collect
from .timing import TimingSettings, time_call

PROBE_SCHEMA_VERSION = 1
LAUNCH_BATCH = 100
# Repeats of one steady measurement on a quiet machine agree within tens of percent; p90 more than
# twice p10 means something else competed for the device (threads, processes, clocks) and the median
# is not a ceiling.
SPREAD_WARN = 2.0


@dataclass(frozen=True)
class ProbeSizes:
    copy_mib: int
    matmul_n: int
    vector_numel: int
    iters: int  # dependent FMAs / exps per element in the Triton kernels
    target_s: float  # timing budget per measurement

    @classmethod
    def default(cls, device_type: str) -> "ProbeSizes":
        if device_type == "cuda":
            return cls(copy_mib=1024, matmul_n=8192, vector_numel=1 << 22, iters=4096, target_s=0.5)
        return cls(copy_mib=64, matmul_n=512, vector_numel=1 << 16, iters=0, target_s=0.1)


def _entry(key: str, si: float, method: str, today: _dt.date) -> dict[str, Any]:
    kind = value_kind(key)
    text = format_quantity(si, kind, digits=4)
    back = parse(text, kind)  # the written value must read back as what was measured
    if abs(back - si) > 1e-3 * si:
        raise RuntimeError(f"{key}: formatted {si} as {text!r}, which reads back as {back}")
    return {"key": key, "value": text, "date": today, "method": f"ssmbench probe: {method}"}


def _observation(name: str, si: float, kind: str, method: str) -> dict[str, Any]:
    return {"name": name, "value": format_quantity(si, kind, digits=4), "method": method}


FAILURE_CHARS = 2000  # a compiler's output can run to pages: the reason keeps its start and its end


def failure_reason(exc: BaseException) -> str:
    """'Type: message' of a failed measurement, long messages cut in the middle."""
    text = f"{type(exc).__name__}: {exc}"
    if len(text) <= FAILURE_CHARS:
        return text
    half = FAILURE_CHARS // 2
    return f"{text[:half]} [... {len(text) - FAILURE_CHARS} characters cut ...] {text[-half:]}"


def _settings(sizes: ProbeSizes, cuda: bool, flush: bool = False) -> TimingSettings:
    return TimingSettings(target_s=sizes.target_s, warmup_calls=2, warmup_s=0.02, min_repeats=3,
                          max_repeats=1000, flush_l2=flush and cuda, cuda_graph=False)


def spread(samples_s) -> dict[str, float | int]:
    """How far the repeats of one measurement disagree: p90 / p10 (robust to one outlier) and max / min."""
    a = np.asarray(samples_s, dtype=float)
    p10, p90 = np.percentile(a, [10, 90])
    def ratio(hi: float, lo: float) -> float:
        return float(f"{hi / lo:.4g}") if lo > 0 else math.inf

    return {"p90_over_p10": ratio(p90, p10), "max_over_min": ratio(a.max(), a.min()), "n": int(a.size)}


def _spread_hint(cuda: bool) -> str:
    import torch

    if cuda:
        return "another process may be using the GPU or its clocks changed: rerun on an idle GPU or with a longer --target-time"
    if torch.get_num_threads() > 1:
        return (f"PyTorch's {torch.get_num_threads()} threads may contend with other processes for the cores: "
                "rerun with --threads 1 and compare")
    return "other processes compete for the core: rerun on a quiet machine"


def run_probe(device, sizes: ProbeSizes, argv: list[str] | None = None,
              log: Callable[[str], None] | None = None, energy: bool = False) -> dict[str, Any]:
    """The probe's measurements; ``energy``: the energy kernels only (``_probe_energy.py``, CUDA with NVML)."""
    import torch

    log = log or (lambda s: None)
    cuda = device.type == "cuda"
    today = _dt.date.today()
    ver = f"PyTorch {torch.__version__}"
    measured: list[dict[str, Any]] = []
    observations: list[dict[str, Any]] = []
    failed: list[dict[str, str]] = []
    spreads: list[dict[str, Any]] = []
    warnings: list[str] = []

    def spread_text(name: str, samples) -> str:
        """Record the spread of one measurement's repeats (a wide one is a warning); 'N (p90/p10 X)'."""
        s = spread(samples)
        spreads.append({"name": name, **s})
        if s["p90_over_p10"] > SPREAD_WARN:
            warnings.append(f"probe {name}: the repeats spread widely (p90/p10 = {s['p90_over_p10']:.3g}, max/min = "
                            f"{s['max_over_min']:.3g} over {s['n']} samples; above {SPREAD_WARN:g} the median is "
                            f"not a stable ceiling); {_spread_hint(cuda)}")
        return f"{s['n']} (p90/p10 {s['p90_over_p10']:.3g})"

    def timed(name: str, call: Callable[[], Any], flush: bool = False,
              target_s: float | None = None) -> tuple[float, str]:
        """The median of ``call`` and 'N (p90/p10 X)' for the method text; a wide spread is a warning."""
        settings = _settings(sizes, cuda, flush)
        if target_s is not None:
            settings = settings.replace(target_s=target_s)
        r = time_call(call, device, settings)
        return r.median, spread_text(name, r.samples_s)

    def attempt(name: str, fn: Callable[[], None]) -> None:
        log(f"probe: {name} ...")
        try:
            fn()
        except Exception as exc:  # one unsupported measurement must not lose the others
            failed.append({"name": name, "reason": failure_reason(exc)})
        finally:
            if cuda:
                torch.cuda.empty_cache()

    def copy():
        n = sizes.copy_mib * 2**20
        src = torch.empty(n, dtype=torch.uint8, device=device).random_(0, 255)
        dst = torch.empty_like(src)
        med, reps = timed("memory.dram.bandwidth", lambda: dst.copy_(src), flush=True)
        measured.append(_entry("memory.dram.bandwidth", 2 * n / med,
                               f"{sizes.copy_mib} MiB copy_ (bytes read + written), "
                               f"{'CUDA events, L2 flushed' if cuda else 'perf_counter_ns'}, median of {reps}; {ver}",
                               today))

    def matmul(dt: str):
        tdt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dt]
        n = sizes.matmul_n
        a = torch.randn(n, n, device=device).to(tdt)
        b = torch.randn(n, n, device=device).to(tdt)
        c = torch.empty(n, n, device=device, dtype=tdt)
        # fp32 on CUDA (TF32 off) runs on the CUDA cores: an observation, not a tensor-core ceiling
        tf32 = torch.backends.cuda.matmul.allow_tf32
        name = f"matmul.fp32{'_tf32' if tf32 else ''}" if cuda and dt == "fp32" else f"compute.tensor.{dt}"
        med, reps = timed(name, lambda: torch.matmul(a, b, out=c))
        rate = 2 * n**3 / med
        method = f"{dt} {n}^3 torch.matmul on random data, median of {reps}; {ver}"
        if cuda and dt == "fp32":
            observations.append(_observation(name, rate, "flop_rate", method + f" (allow_tf32={tf32})"))
        else:
            measured.append(_entry(name, rate, method, today))

    def vector_and_exp():
        triton_ok = False
        if cuda:
            try:
                from ._probe_triton import exp_loop, fma_loop
                triton_ok = True
            except ImportError:
                failed.append({"name": "triton", "reason": "triton not importable: eager fallbacks used"})
        n = sizes.vector_numel
        if triton_ok:
            block = 1024
            x = torch.rand(n, device=device)
            grid = ((n + block - 1) // block,)
            med, reps = timed("compute.vector.fp32",
                              lambda: fma_loop[grid](x, n, 0.999, 0.001, ITERS=sizes.iters, BLOCK=block))
            measured.append(_entry("compute.vector.fp32", 2 * n * sizes.iters / med,
                                   f"Triton kernel, {sizes.iters} dependent FMAs per element on {n} fp32 elements, "
                                   f"median of {reps}; {ver}", today))
            med, reps = timed("compute.special_function", lambda: exp_loop[grid](x, n, ITERS=sizes.iters, BLOCK=block))
            measured.append(_entry("compute.special_function", n * sizes.iters / med,
                                   f"Triton kernel, {sizes.iters} dependent exp per element (tl.exp) on {n} fp32 "
                                   f"elements, median of {reps}; {ver}", today))
            return
        x = torch.rand(n, device=device)
        y = torch.rand(n, device=device)
        z = torch.empty_like(x)
        med, reps = timed("elementwise.fp32_eager", lambda: torch.add(y, x, alpha=0.5, out=z))
        observations.append(_observation(
            "elementwise.fp32_eager", 2 * n / med, "flop_rate",
            f"eager torch.add(y, x, alpha=0.5) (one FMA, 2 FLOPs per element) on {n} fp32 elements "
            f"({n * 12 // 1024} KiB touched), median of {reps}; bounded by cache bandwidth, not the FMA units; {ver}"))
        med, reps = timed("exp.fp32_eager", lambda: torch.exp(x, out=z))
        observations.append(_observation(
            "exp.fp32_eager", n / med, "flop_rate",
            f"eager torch.exp on {n} fp32 elements, exp evaluations per second, median of {reps}; {ver}"))

    def launches():
        t = torch.zeros(1, device=device)

        def batch():
            for _ in range(LAUNCH_BATCH):
                t.add_(1.0)

        med, reps = timed("launch.kernel", batch)
        measured.append(_entry("launch.kernel", med / LAUNCH_BATCH,
                               f"{LAUNCH_BATCH} back-to-back launches of a one-element add_, one CUDA-event region, "
                               f"/ {LAUNCH_BATCH}, median of {reps}; {ver}", today))
        side = torch.cuda.Stream(device=device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            batch()
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            batch()
        med, reps = timed("launch.graph_node", graph.replay)
        measured.append(_entry("launch.graph_node", med / LAUNCH_BATCH,
                               f"CUDA graph of {LAUNCH_BATCH} one-element add_ kernels, replay time / {LAUNCH_BATCH}, "
                               f"median of {reps}; {ver}", today))

    achievable = None
    energy_windows: list[dict[str, Any]] = []
    if energy:
        if not cuda:
            raise UserError("probe --energy measures NVML energy windows: it needs a CUDA device (--device cuda)")
        from . import _probe_energy
        from ._probe_achievable import Ctx

        try:
            import triton

            kver = f"{ver}, Triton {triton.__version__}"
        except ImportError:
            kver = ver
        ctx = Ctx(device=device, timed=timed, spread_text=spread_text, ver=kver, target_s=sizes.target_s,
                  measure=lambda key, si, method: measured.append(_entry(key, si, method, today)),
                  observe=lambda name, si, kind, method: observations.append(_observation(name, si, kind, method)),
                  log=log)
        energy_windows = _probe_energy.run_energy(ctx, attempt)
    elif cuda:
        from . import _probe_achievable as ach

        # the CUDA extension for launch.host.cuda_extension compiles while the GPU is measured
        ext_future = ach.start_extension_build()
        try:
            import triton

            kver = f"{ver}, Triton {triton.__version__}"
        except ImportError:
            kver = ver
        achievable = ach.Ctx(device=device, timed=timed, spread_text=spread_text, ver=kver, target_s=sizes.target_s,
                             measure=lambda key, si, method: measured.append(_entry(key, si, method, today)),
                             observe=lambda name, si, kind, method: observations.append(
                                 _observation(name, si, kind, method)), log=log)
    if not energy:
        attempt("copy bandwidth", copy)
        for dt in ("fp32", "bf16", "fp16"):
            attempt(f"matmul {dt}", lambda dt=dt: matmul(dt))
        attempt("vector and exp rates", vector_and_exp)
    if cuda and not energy:
        attempt("launch latency", launches)
        ach.run_achievable(achievable, attempt, ext_future)
    return {
        "schema_version": PROBE_SCHEMA_VERSION,
        "kind": "ssmbench-probe",
        "label": "measurement (attained ceilings of this device)",
        "meta": collect(device, seed=0, argv=argv),
        "sizes": sizes.__dict__,
        "measured": measured,
        "observations": observations,
        "failed": failed,
        "spread": spreads,
        "warnings": warnings,
        "curves": achievable.curves if achievable else [],
        "per_call": achievable.per_call if achievable else [],
        "energy_windows": energy_windows,
        "how_to_use": "ssmbench specs new --from SPEC --probe THIS_FILE --out NEW.yaml merges the 'measured' "
                      "entries into a copy of SPEC (they are in the spec schema's format; keys are spec value paths)",
    }


def write_probe(doc: dict[str, Any], out: str | Path) -> Path:
    out = Path(out)
    if out.suffix not in (".yaml", ".yml", ".json"):
        raise UserError(f"--out {out}: expected a .yaml, .yml or .json file name")
    if out.exists():
        raise UserError(f"--out {out}: file exists; probe never overwrites a file (choose a new name)")
    from .results import jsonable

    checked = check_measured(doc["measured"], out) if doc["measured"] else ()  # a spec fragment, or a bug here
    data = jsonable(doc)
    if out.suffix == ".json":
        text = json.dumps(data, indent=1) + "\n"
    else:
        data["measured"] = list(checked)  # dates as YAML dates, as in a spec file
        text = dump_yaml(data)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(out, "x", encoding="utf-8") as fh:
            fh.write(text)
    except FileExistsError:
        raise UserError(f"--out {out}: file exists; probe never overwrites a file (choose a new name)") from None
    return out
