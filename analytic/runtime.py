"""The runtime a model runs under, as a workload option of the achievable estimate (``predict
--runtime``): how much of a step's time is the host's, and what a graph or compiled runtime saves.

Measured whole models (issue #15) showed the host setting the pace where the op-level model saw none:
Hugging Face eager decode spends Python time in every module call beyond the kernels it issues, and
a CUDA-graph replay removes the per-kernel host cost altogether. Each runtime is a rule for the host
time of one op call of a model's plan (``host_eager``: the sum over its launches of
``launch.host.<backend class>``, as ``achievable.py`` computes it):

- ``mamba-ssm``: library modules called from PyTorch eager code: T_host = host_eager + calls x
  ``launch.host.ssm_module``: the per-class costs, measured on the library calls themselves, hold the
  calls' own host time; the modules' Python around them (``Mamba2.step``'s rearranges, splits, state
  bookkeeping and argument handling, ``MambaLMHeadModel``'s per-layer loop) is paid per op call.
  A prefill's op calls run the modules' inference ``forward`` instead and pay its own class:
  ``launch.host.ssm_forward_mamba2`` / ``_mamba3`` for a Mamba-2 / Mamba-3 layer's calls, ``ssm_forward``
  (Mamba's fast path, standing in for mamba-ssm's MHA and GatedMLP) for the others. Those are read off the
  standalone forward cases of the modules (``calibrate/runtime_host.block_rows``, on the H200 32.8, 57.2
  and 127.2 us per op call), an independent source: the whole-model records check them. On the H200 this
  took the held-out prefill p90 from 64.5 % to 39 % (transformerpp-125m b1 +91 % -> -12 %, mamba-130m b1
  +82 % -> -12 %), with Mamba-2 prefill under-predicted by 20-30 % (the block cases' Mamba2 values spread
  12-93 us per op call, and their sessions' hosts were faster than the models'). A train step's forward
  records the autograd graph and keeps ``ssm_module`` (``FORWARD_PHASES``); ``ssm_module`` comes from
  decode records only. The text below is the history of the single value.
  The chunked SSD's five forward launchers are charged at their own measured class
  (``triton_autotune_ssd``, 168 us per kernel, not the 107 us median of the autotuned libraries): in
  the Mamba-2 prefill records that class was the missing host time (the residual per op call, with the
  median: 132 and 181 us for mamba2-130m, 194 us for mamba2-attn-k4; with the library's own: 95, 144,
  165 us, beside 73-130 us in the decode records). One value per op call remains: the records' own
  values split by path (Mamba / attention / MLP forward in prefill 30-40 us, the ``step()`` paths of
  decode 73-130 us, Mamba-2's ``mamba_split_conv1d_scan_combined`` forward 95-165 us) but a per-path
  value held out per model has too few records behind it: the only other forward records of
  mamba-130m's and transformerpp-125m's paths are each other's and graph-mamba-style's (151 us per op
  call: its graph runner's own Python and unplanned ops), and the held-out errors do not improve
  (leave-one-model-out over the host-bound records: one value 20 % median, a prefill / decode split
  20 % with a 170 % p90, a Mamba-2 forward class 19 % with the Mamba-2 prefill rows moving from
  -1 / -19 % to +41 / +16 %). Host-bound repeats of one key differ by up to 42 % between the two calls
  of 2026-12-03 (characterize's "Repeat measurements"), which bounds what any per-call value can do.
- ``hf-eager``: Hugging Face modules: T_host = host_eager + calls x ``launch.host.hf_module`` (one
  module call per op call of the plan: projections, norms, mixers, MLPs are modules in transformers);
  the op calls of a state-space mixer block (transformers' ``Mamba2Mixer``, whose forward wraps the
  chunked-scan library call and an eager gated norm in far more Python per op than a Llama layer's
  modules: 277 us against 89-123 us per op call in the host-bound records) pay
  ``launch.host.hf_ssm_module`` instead (``Runtime.module_class_by_block``; where the spec does not
  know it, the general ``hf_module``, and the key is named as not modelled).
  The plan is the one HF runs (``Runtime.impls`` and ``modules``): its modules are plain PyTorch, so
  RMSNorm is 8 eager kernels (fp32 cast, pow, mean, + eps, rsqrt, *, cast back, * w), the Mamba-2
  mixer's gated norm (``MambaRMSNormGated``: the casts, silu(gate), the product, then the same RMSNorm
  chain) the eager gated_rmsnorm, RoPE 10 (mul,
  neg, cat, mul, add for q and for k), the gated MLP's SiLU and product 2, q/k/v three GEMMs, and a
  decode step copies the GQA heads for SDPA (``repeat_kv``); ``phases.plan`` with ``modules="hf"``.
  Where one of those eager implementations has no rule for the phase's mode (the backward of the
  eager gated norm), the plan keeps the library implementation (named in ``runtime_impls``' docstring:
  that unfused backward chain is not modelled); the eager RMSNorm's backward (``ops/norm``: autograd's
  16 kernels) and RoPE's (``ops/attention/extras.py``: five kernels per tensor) are, so a Hugging Face
  train step runs them.
- ``torch-compile``: an Inductor graph issues the same kernels from generated code: T_host = launches x
  ``launch.host.compiled`` (Inductor's fusion of elementwise kernels is not modelled: the launch count
  is the plan's).
- ``cuda-graph``: one captured graph per step: T_host = ``launch.host.cuda_graph`` once per step
  (``achievable.py``'s graph regime; per call zero).

``mamba-ssm`` and ``cuda-graph`` run mamba-ssm's modules (``MAMBA_SSM_IMPLS``): a gated MLP is its
``GatedMLP``, whose silu and product run eager over strided halves (``gated_mlp``/``merged_eager``); in
the transformerpp-125m profiles those two kernels took 22 % of a b16 x 2048 prefill, where the default
fused silu-and-mul kernel of ``predict`` without a runtime moves 60 % of their bytes (x and z read, y
written, against silu's 2 and the product's 3 tensors) at the full DRAM rate, in one launch.

The step takes max(sum of host, sum of device) (``report.achievable_rows``). An eager train step's host
time also holds its backward's: one autograd engine call and ``launch.host.backward_launch`` per backward
kernel launch (``workloads/train_host.py``), under every runtime but the graph and compiled ones. A parameter the spec
does not know contributes no term and is named in ``not_modelled``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UserError

# Phases whose op calls run the modules' inference forward: not a decode step(), and not a train step's
# forward, which records the autograd graph (custom Functions' ctx.save_for_backward, grad_fn nodes) on top:
# the forward classes are read off forward cases run under torch.no_grad, as prefill runs under inference_mode.
FORWARD_PHASES = ("prefill",)


@dataclass(frozen=True)
class Runtime:
    name: str
    launch: str  # the launch regime of the roofline and achievable model: "eager" or "graph"
    module_class: str | None = None  # host class paid once per op call on top of the launches
    launch_class: str | None = None  # host class that replaces every launch's own class
    describe: str = ""
    impls: tuple[tuple[str, str], ...] = ()  # (op, implementation) the runtime's modules run
    modules: str = "library"  # how its modules split a block into op calls (phases.MODULE_STYLES)
    # (block kind, host class) where a block kind's modules pay another class than module_class
    module_class_by_block: tuple[tuple[str, str], ...] = ()
    # the module class of an op call in a forward step (FORWARD_PHASES), where the modules' forward code
    # differs from their decode step()'s, and the block kinds whose forward pays a class of its own
    forward_module_class: str | None = None
    forward_class_by_block: tuple[tuple[str, str], ...] = ()

    def classes(self) -> tuple[str, ...]:
        return tuple(c for c in (self.module_class, self.launch_class, self.forward_module_class,
                                 *(c for _, c in self.module_class_by_block),
                                 *(c for _, c in self.forward_class_by_block)) if c)

    def module_class_of(self, block_kind: str | None, phase: str | None = None) -> str | None:
        """The module host class an op call of a block of ``block_kind`` pays in ``phase`` (None: none)."""
        if not self.module_class:
            return None
        if phase in FORWARD_PHASES and self.forward_module_class:
            return dict(self.forward_class_by_block).get(block_kind, self.forward_module_class)
        return dict(self.module_class_by_block).get(block_kind, self.module_class)

    def module_stand_ins(self, cls: str) -> tuple[str, ...]:
        """``cls`` and the classes that stand in, in order, where a spec does not know it: a block kind's
        forward class -> the runtime's forward class -> its general module class."""
        chain = [cls]
        if cls in dict(self.forward_class_by_block).values() and self.forward_module_class:
            chain.append(self.forward_module_class)
        if self.module_class and self.module_class not in chain:
            chain.append(self.module_class)
        return tuple(chain)


# What mamba-ssm's modules run where the plan's default is another library's: its GatedMLP chunks one
# merged projection and applies silu and the product as eager ops over the strided halves
# (``ops/mlp/cost.py``, ``merged_eager``); the CUDA-graph runtime captures the same modules
# (``MambaLMHeadModel.generate(cg=True)``), so the kernels are the same, launched from the graph.
MAMBA_SSM_IMPLS = (("gated_mlp", "merged_eager"),)

RUNTIMES: dict[str, Runtime] = {
    "mamba-ssm": Runtime("mamba-ssm", "eager", module_class="ssm_module",
                         describe="library kernels called from eager PyTorch modules",
                         impls=MAMBA_SSM_IMPLS, forward_module_class="ssm_forward",
                         forward_class_by_block=(("mamba2", "ssm_forward_mamba2"), ("mamba3", "ssm_forward_mamba3"))),
    "hf-eager": Runtime("hf-eager", "eager", module_class="hf_module",
                        describe="Hugging Face transformers modules, eager",
                        impls=(("rmsnorm", "torch_eager"), ("gated_rmsnorm", "torch_eager"), ("rope", "torch_eager"),
                               ("gated_mlp", "torch_eager"), ("kv_append", "index_copy")), modules="hf",
                        module_class_by_block=(("mamba2", "hf_ssm_module"),)),
    "torch-compile": Runtime("torch-compile", "eager", launch_class="compiled",
                             describe="torch.compile (Inductor) graph launching the plan's kernels"),
    "cuda-graph": Runtime("cuda-graph", "graph", describe="one captured CUDA graph replayed per step",
                          impls=MAMBA_SSM_IMPLS),
}


def get_runtime(name: str | None, launch: str | None) -> Runtime | None:
    """The runtime of ``--runtime`` (None: none asked for), checked against ``--launch``."""
    if name is None:
        return None
    if name not in RUNTIMES:
        raise UserError(f"unknown runtime {name!r}; expected one of {', '.join(RUNTIMES)}")
    rt = RUNTIMES[name]
    if launch is not None and launch != rt.launch:
        raise UserError(f"--runtime {name} runs with launch regime {rt.launch!r}; --launch {launch} contradicts it "
                        "(give one of the two)")
    return rt


def runtime_impls(rt: Runtime | None, phase: str) -> dict[str, str]:
    """The implementations ``rt`` runs in ``phase``: those of ``rt.impls`` with a rule for every mode
    the phase costs (train: forward and backward); the others keep the plan's default."""
    if rt is None:
        return {}
    from .registry import get_op
    modes = {"prefill": ("fwd",), "decode": ("decode", "fwd"), "train": ("fwd", "bwd")}[phase]
    out = {}
    for op, impl in rt.impls:
        i = get_op(op).impl(impl)
        if (i.supports(modes[0]) or (phase == "decode" and i.supports("fwd"))) and all(
                i.supports(m) for m in modes if phase == "train"):
            out[op] = impl
    return out


def call_host_s(rt: Runtime, host_eager: float, launches: float, calls: float, cost,
                block_kind: str | None = None, phase: str | None = None) -> float:
    """Host seconds of ``calls`` op calls with ``launches`` kernels under ``rt`` (of a block of
    ``block_kind``, in ``phase``); ``cost(cls)`` is the spec's host cost of a class (0 where unknown:
    ``used_keys`` names it)."""
    if rt.launch == "graph":
        return 0.0
    if rt.launch_class:
        return launches * cost(rt.launch_class)
    module = rt.module_class_of(block_kind, phase)
    if not module:
        return host_eager
    # a class the spec does not know: the first of its stand-ins that it knows (Runtime.module_stand_ins)
    per_call = next((v for c in rt.module_stand_ins(module) if (v := cost(c))), 0.0)
    return host_eager + calls * per_call


def used_keys(rt: Runtime, block_kinds=None, phase: str | None = None) -> set[str]:
    """The spec keys ``rt``'s host time reads (``block_kinds``: those of the plan's calls in ``phase``;
    None: all)."""
    classes = ({rt.launch_class} | {rt.module_class_of(k, phase) for k in block_kinds}) if block_kinds is not None \
        else set(rt.classes())
    return {f"launch.host.{c}" for c in classes if c}
