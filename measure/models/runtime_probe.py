"""Measure the runtime host classes of ``analytic/runtime.py`` on a GPU: ``launch.host.hf_module`` and
``launch.host.compiled``. Writes a probe fragment (``measured:`` entries in the spec's format, as
``ssmbench probe`` does) that ``ssmbench specs new --probe`` can merge.

    python -m ssmbench.measure.models.runtime_probe --out DIR/probe-runtime.yaml

- ``hf_module``: a two-layer Hugging Face Llama of width 64 (one token, no cache: the host, not the
  GPU, sets its pace). Host time per forward, H (back-to-back calls without synchronising,
  ``_probe_achievable.host_per_call``), less what its kernels cost to issue as eager PyTorch ops
  (kernels per forward from torch.profiler x ``launch.host.torch_eager`` measured here the same
  way), divided by the op calls of the same model's plan in ``analytic/workloads/phases.py`` (the
  calls a prediction charges): hf_module = (H - kernels x torch_eager) / op calls.
- ``compiled``: ``torch.compile`` (Inductor, default mode) of a chain of ``COMPILED_MATMULS`` tiny
  matmuls with a ReLU between them; host time per call / kernels per call (from the profiler).
- An observation, not a spec entry: the host time per backward kernel of a model whose backward is ATen's own
  derivatives, issued by the C++ autograd engine (the same tiny Llama in training mode, ``TRAIN_TOKENS`` tokens,
  the loss of its logits): (host time per forward + loss + backward - host time per forward + loss) / (GPU
  activities per training step - per forward + loss). ``launch.host.backward_launch`` is read off whole-model
  training steps whose backward runs library ``autograd.Function``s in Python (mamba-ssm, Hugging Face's Mamba-2);
  this tells whether a native backward costs the same per kernel (results/h200/2026-12-06/models-oos: Qwen2.5-0.5B's
  training step ran below the estimate that charges it so). It does, near enough: 50.0 us per kernel on an H100
  against the library term's 57.6 us (results/h100/2026-12-06/runtime-probe); on another H100, 34.8 us beside the
  real Qwen2.5-0.5B and Llama-3.2-1B's ~39 us per added backward kernel (results/h100/2026-12-06/host-split).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import sys
from pathlib import Path

import yaml

HOST_CALLS, HOST_REPEATS = 100, 15
COMPILED_MATMULS = 16
TRAIN_TOKENS = 16  # the tiny Llama's training step: one sequence of this many tokens (the host sets the pace)
TINY_LLAMA = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 4, "head_dim": 16, "vocab_size": 256, "tie_word_embeddings": True,
              "max_position_embeddings": 128, "rms_norm_eps": 1e-5}


def plan_op_calls(cfg: dict, phase: str = "prefill") -> int:
    """Op calls of the plan of the Llama config ``cfg`` (what the prediction multiplies hf_module by)."""
    from ...analytic.workloads.hf_config import model_from_hf
    from ...analytic.workloads.phases import plan

    model = model_from_hf({"model_type": "llama", **cfg}, "runtime_probe TINY_LLAMA")
    return int(sum(c.count for c in plan(model, phase)))


def hf_module_cost(eager_s: float, host_per_forward_s: float, kernels_per_forward: float, op_calls: int) -> float:
    """(H - kernels x torch_eager) / op calls; an error when the forward is no slower than its kernels."""
    rest = host_per_forward_s - kernels_per_forward * eager_s
    if rest <= 0 or op_calls < 1:
        raise RuntimeError(f"host time per forward {host_per_forward_s:.3g} s is not above its {kernels_per_forward:g} "
                           f"kernels at {eager_s:.3g} s each: no module cost to attribute")
    return rest / op_calls


def backward_kernel_cost(host_step_s: float, host_forward_s: float, activities_step: float,
                         activities_forward: float) -> float:
    """(host per training step - host per forward with its loss) / (the step's GPU activities - the forward's):
    the host time the backward adds per kernel it issues; an error where the backward adds no time or no kernel."""
    extra_s, extra_k = host_step_s - host_forward_s, activities_step - activities_forward
    if extra_s <= 0 or extra_k <= 0:
        raise RuntimeError(f"the backward adds {extra_s:.3g} s and {extra_k:g} GPU activities per step: "
                           "no per-kernel cost to attribute")
    return extra_s / extra_k


def eager_observation(seconds: float) -> dict:
    """The probe's own launch.host.torch_eager, an observation (it is the subtrahend of hf_module, not a
    spec entry: ``ssmbench probe`` measures that one), in the time unit of the spec format."""
    from ..probe import _observation

    return _observation("launch.host.torch_eager (runtime probe)", seconds, "time",
                        f"one-element add_, {HOST_CALLS} calls back to back, median of {HOST_REPEATS}")


NATIVE_BACKWARD = "host time per backward kernel, ATen derivatives (runtime probe)"


def tiny_llama(device):
    """The probe's Hugging Face Llama (``TINY_LLAMA``, SDPA attention, random weights) on ``device``."""
    import transformers

    cfg = transformers.LlamaConfig(**TINY_LLAMA)
    return transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa").to(device)


def native_backward_observation(device, sync) -> dict:
    """The observation of the module docstring's last item, with its method."""
    import torch
    import transformers

    from .._probe_achievable import profile_gpu
    from ..probe import _observation

    lm = tiny_llama(device).train()
    ids = torch.randint(0, TINY_LLAMA["vocab_size"], (1, TRAIN_TOKENS), device=device)

    def forward():
        return lm(ids, labels=ids, use_cache=False).loss

    def step():
        forward().backward()
    h_fwd, h_step = _host(forward, sync), _host(step, sync)
    k_fwd, k_step = (len(profile_gpu(f, 5)[0]) / 5 for f in (forward, step))
    v = backward_kernel_cost(h_step, h_fwd, k_step, k_fwd)
    return _observation(NATIVE_BACKWARD, v, "time",
                        f"2-layer width-64 HF Llama (transformers {transformers.__version__}, SDPA, training mode, "
                        f"{TRAIN_TOKENS} tokens, loss on its logits): host per forward + loss + backward "
                        f"{h_step * 1e6:.4g} us, per forward + loss {h_fwd * 1e6:.4g} us; GPU activities per step "
                        f"{k_step:g}, per forward + loss {k_fwd:g}; {HOST_CALLS} calls back to back, median of "
                        f"{HOST_REPEATS}")


def _host(call, sync) -> float:
    import numpy as np

    from .._probe_achievable import host_per_call

    for _ in range(10):
        call()
    return float(np.median(host_per_call(call, HOST_CALLS, HOST_REPEATS, sync)))


def measure(device) -> tuple[list[dict], list[dict], list[dict]]:
    import torch

    from .._probe_achievable import profile_gpu
    from ..probe import _entry, failure_reason

    today = _dt.date.today()
    measured, observations, failed = [], [], []

    def sync():
        torch.cuda.synchronize(device)

    t = torch.zeros(1, device=device)
    eager = _host(lambda: t.add_(1.0), sync)
    observations.append(eager_observation(eager))
    try:
        import transformers

        lm = tiny_llama(device).eval()
        x = torch.randint(0, TINY_LLAMA["vocab_size"], (1, 1), device=device)

        def fwd():
            with torch.inference_mode():
                return lm(x, use_cache=False).logits
        h = _host(fwd, sync)
        kernels, _ = profile_gpu(fwd, 5)
        n_k = len(kernels) / 5
        calls = plan_op_calls(TINY_LLAMA)
        v = hf_module_cost(eager, h, n_k, calls)
        measured.append(_entry("launch.host.hf_module", v,
                               f"runtime probe: host time per forward of a 2-layer width-64 HF Llama (transformers "
                               f"{transformers.__version__}, SDPA, one token, no cache) {h * 1e6:.4g} us, less "
                               f"{n_k:g} kernels x launch.host.torch_eager {eager * 1e6:.4g} us, / {calls} op calls "
                               f"of its plan; {HOST_CALLS} calls back to back, median of {HOST_REPEATS}", today))
    except Exception as exc:
        failed.append({"name": "launch.host.hf_module", "reason": failure_reason(exc)})
    try:
        observations.append(native_backward_observation(device, sync))
    except Exception as exc:
        failed.append({"name": NATIVE_BACKWARD, "reason": failure_reason(exc)})
    try:
        ws = [torch.randn(64, 64, device=device, dtype=torch.bfloat16) for _ in range(COMPILED_MATMULS)]

        def chain(a):
            for w in ws:
                a = torch.relu(a @ w)
            return a
        f = torch.compile(chain)
        a = torch.randn(64, 64, device=device, dtype=torch.bfloat16)
        h = _host(lambda: f(a), sync)
        kernels, _ = profile_gpu(lambda: f(a), 5)
        n_k = len(kernels) / 5
        measured.append(_entry("launch.host.compiled", h / n_k,
                               f"runtime probe: host time per call of torch.compile (Inductor, torch "
                               f"{torch.__version__}) of {COMPILED_MATMULS} 64x64 bf16 matmul + ReLU steps, "
                               f"{h * 1e6:.4g} us / {n_k:g} kernels per call; {HOST_CALLS} calls back to back, "
                               f"median of {HOST_REPEATS}", today))
    except Exception as exc:
        failed.append({"name": "launch.host.compiled", "reason": failure_reason(exc)})
    return measured, observations, failed


def main(argv: list[str] | None = None) -> int:
    import torch

    from ..environment import collect

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="probe fragment to write (.yaml; must not exist)")
    a = ap.parse_args(argv)
    out = Path(a.out)
    if out.exists():
        print(f"{out}: exists; not overwritten", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    measured, observations, failed = measure(device)
    doc = {"schema_version": 1, "kind": "ssmbench-runtime-probe",
           "label": "measurement (host cost per call of whole-model runtimes on this device)",
           "meta": collect(device, 0, sys.argv), "measured": measured, "observations": observations,
           "failed": failed}
    out.parent.mkdir(parents=True, exist_ok=True)
    from ..results import jsonable
    out.write_text(yaml.safe_dump(jsonable(doc), sort_keys=False), encoding="utf-8")
    for m in measured:
        print(f"{m['key']}: {m['value']} (measurement)")
    for f in failed:
        print(f"{f['name']}: FAILED {f['reason'][:300]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
