"""Hardware spec schema, version 1: real GPUs and hypothetical accelerators share it.

Every number is a *datum*: ``{value: "4.8 TB/s", source: <source id>, note: ...}``, or, where a
value is truly not known, ``{unknown: "why"}``. There are no defaults: a resource without a known
value gives no roofline bound, and the projection says so. Values are parsed strictly with their
units (see ``units.py``) and stored as floats in canonical SI units (B/s, FLOP/s, B, Hz, s, W, J).

Layout of a spec file::

    schema_version: 1
    id, name, vendor, hypothetical, architecture, form_factor, notes
    device_names:     optional list of the exact names the driver reports for this device (the name
                      measure records: torch.cuda's device name, or the CPU model), e.g. ["NVIDIA H200"];
                      a result matches a spec iff its device name is one of them (never a hypothetical one).
    sources:          {source-id: {title, url, tag}}   tag: P primary, S secondary, R official URL
                                                        not re-read, D derived, A design assumption
    compute:          sm_count, clock_boost, tensor: {dtype: rate}, vector: {dtype: rate},
                      special_function (transcendental evaluations per second),
                      tensor_mma_sync (optional): {dtype: rate} the attained tensor-core rate of the
                      warp-synchronous ``mma.sync`` instruction class, where it differs from the
                      device's full rate (Hopper reaches its peak only through ``wgmma``); the
                      achievable model runs the matmuls of kernels built on mma.sync (sm80 code:
                      FlashAttention-2) at it (``analytic/execution.py`` ``Traits.tensor_instr``)
                      path (optional): {COMPUTE_PATHS: attained FLOP rate of that software kernel path}
                      chain_step (optional): {CHAIN_CLASSES: the time of one step of a kernel class
                      whose programs loop sequentially (one token, one chunk) with a dependence
                      between steps}: the achievable model's chain term (``analytic/chain.py``);
                      an attained latency of that kernel class, measured (never a datasheet value)
    memory:           ordered from on-chip to off-chip: {level: {scope, capacity, bandwidth, latency}};
                      the last level is ``dram`` (device memory). Bandwidth is device aggregate;
                      latency (optional) is the load-to-use latency of one access at that level;
                      dram.host_bandwidth (optional, processing-in-memory designs only): the bandwidth
                      work outside the memory sees when dram.bandwidth is the in-memory rate;
                      path (optional): {DRAM_PATHS: attained bandwidth of that software kernel path}.
    launch:           kernel (per-launch overhead), graph_node (per node of a replayed CUDA graph),
                      timed_call (optional: fixed device time of one kernel timed after an L2 flush),
                      host (optional): {backend class: host time per call} for HOST_CLASSES
    power:            tdp (the board power limit: the power the clocks are lowered to hold; the one
                      place the energy model reads it), idle (power with nothing to run: lowest clocks)
    energy:           optional: static_power (W drawn while the device runs work, before any dynamic
                      term: clocks up, leakage at working temperature; empty launches measure it),
                      per_flop {tensor: {dtype: J/FLOP}, tensor_mma_sync (optional): {dtype: J/FLOP}
                      of FLOPs issued as mma.sync, vector: {dtype: J/FLOP}, special_function: J per
                      evaluation}, per_byte {level: J/B crossing that level}, path_power (optional: W
                      the SMs draw beyond static power while a kernel runs on a software path slower than
                      the engine or memory it uses, ``compute.path`` / ``memory.dram.path``)
                      (see ``analytic/energy.py`` for how each term is charged)
    interconnect:     optional list of links to other chips: {name, scope, direction, bandwidth, latency,
                      collectives, note}. ``scope``: scale_up (NVLink, Infinity Fabric: GPUs of one node),
                      host (PCIe) or scale_out (the network); ``direction``: whether ``bandwidth`` counts
                      both directions (datasheets print NVLink's bidirectional total) or one; ``latency``
                      (optional): one transfer's fixed time on the link; ``collectives`` (optional):
                      per collective of COLLECTIVES, {latency, bus_bandwidth}: the alpha and the
                      bus bandwidth (nccl-tests' busbw) of t = latency + S x factor / bus_bandwidth,
                      as ``ssmbench probe --collectives`` measures them (measured: entries keyed
                      ``interconnect.<i>.collectives.<name>.<latency|bus_bandwidth>``).
    measured:         optional list of attained ceilings {key: dotted path, value, date, method}

Checks beyond the shapes: every cited source is declared; a real device cites no design assumption
(tag A) and a hypothetical one has no measurements; memory levels are named, ordered from on-chip out,
end in ``dram``, keep per-SM levels inside device-wide ones, grow in capacity and do not grow in
bandwidth outward; a count (SMs) is a whole number; ``si`` is computed, never read from a file.
"""

from __future__ import annotations

import datetime as _dt
import re
import types
from typing import Literal, Union, get_args, get_origin

from pydantic import Field, field_validator, model_validator

from . import units

SCHEMA_VERSION = 1

DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4", "int4")
MEMORY_LEVELS = ("registers", "shared", "l1", "sram", "l2", "llc", "dram")
SOURCE_TAGS = ("P", "S", "R", "D", "A")

ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


from .datum import (  # noqa: F401 - re-exported: the spec's value types are part of this schema's API
    Bandwidth,
    Capacity,
    Count,
    Datum,
    Duration,
    EnergyPerByte,
    EnergyPerFlop,
    FlopRate,
    Frequency,
    Power,
    Source,
    _only_names,
    _reject_computed,
    _Strict,
)
from .host_classes import (  # noqa: F401 - re-exported: part of the spec schema's vocabulary
    HOST_CLASS_FALLBACK,
    HOST_CLASSES,
    LIBRARY_CALL_HOST_CLASSES,
    LIBRARY_KERNEL_CLASSES,
    RUNTIME_HOST_CLASSES,
)

# Software kernel paths whose attained rate differs from the engine or memory ceiling they use (an
# attained rate, never a datasheet value: each is measured by ``ssmbench probe`` or unknown):
# - compute: ``conv_depthwise``: PyTorch's generic depthwise convolution kernel
#   (conv_depthwise2d_forward_kernel_generic, what F.conv1d(groups=channels) runs), instruction-bound
#   far below the vector rate; FLOPs as the cost rules count them ((2K + 1) per output with a bias);
#   ``softplus``: PyTorch's softplus kernel (F.softplus: log1p(exp(x beta)) / beta in fp32 through the CUDA
#   math library's accurate expf and log1pf, software routines of tens of instructions, and an IEEE divide),
#   instruction-bound; FLOPs as the cost rule counts them (1 per element, ``conventions.SOFTPLUS``).
# - DRAM bandwidth of ATen's non-vectorized paths: ``broadcast`` (elementwise_kernel<128, 2|4> over
#   operands of different shapes, fp32 results), ``broadcast_16bit`` (the same kernel writing 16-bit results:
#   it is bound by the elements it indexes, not by their bytes, so 16-bit elements move about half the fp32
#   bandwidth; ``analytic/ops/common/kernels.Kernel`` picks it by the kernel's output size), ``cast_copy`` (a
#   widening dtype-converting copy, unrolled_elementwise_kernel<direct_copy>; a narrowing fp32 -> 16-bit copy is
#   PyTorch's vectorized one, no path), ``reduction`` (reduce_kernel<512, 1> along the last dimension),
#   ``strided_copy`` (a same-dtype copy of a strided bf16 view into a contiguous tensor, elementwise_kernel<128, 4,
#   direct_copy>: mamba-ssm MHA's repeat_interleave of the interleaved KV cache's k and v views),
#   ``expand_copy`` (the same kernel copying an expanded view, each source row written to several heads:
#   Hugging Face's repeat_kv); contiguous
#   vectorized elementwise kernels run at the copy bandwidth (memory.dram.bandwidth).
COMPUTE_PATHS = ("conv_depthwise", "softplus")
# Kernel classes whose programs step sequentially with a dependence between steps (``compute.chain_step``;
# ``analytic/chain.py``): ``token_recurrent_warp``, a one-warp Triton program stepping one token of a
# matrix-state recurrence (loads of the token's q, k, v, gate, a decay, warp reductions, a rank-1
# update, a store: fla's fused_recurrent kernels); ``chunk_recurrent_cta``, one Triton program per
# (head, batch) stepping one chunk of a chunked scan with its state in registers (loads of the chunk's
# tiles, their matmuls, a state update: mamba-ssm's Mamba-3 SISO forward kernel); ``lane_chunk_cta``, one
# CUDA block per (batch, channel) lane streaming its sequence in chunks of one 16-byte load per thread (the
# block's launch, the chunk's DRAM round trip, barriers, a store, the block's exit: causal-conv1d's
# channel-first forward kernel); ``lane_state_cta``, one CUDA block per (batch, channel) lane stepping over
# (chunk, state) with a block scan per step, the blocks resident on an SM taking in their steps' B and C
# rows at a shared rate (mamba-ssm's selective-scan kernels): its step value is the time one SM takes to
# take in 1 KiB of those rows; ``lane_state_cta_bwd``, the backward kernel of the same scan (each step also
# re-runs the chunk's forward scan, runs the reverse one and adds dB, dC with fp32 atomics), per KiB of its
# step's B and C rows and atomics; ``lane_state_cta_uneven``, the same kernels built for a length that is not a
# whole number of chunks (kIsEvenLen false: the rows come in through bounds-checked element loads, not 16-byte
# vector loads), a slower intake; ``lane_chunk_cta_unaligned``, causal-conv1d's forward at a length that is
# not a multiple of its 16-byte load (kIsVecLoad false: bounds-checked element loads), a longer step;
# ``lane_chunk_cta_bwd`` and ``lane_chunk_cta_bwd_unaligned``, causal-conv1d's channel-first backward kernel on the
# same lanes, one step per chunk (loads, the SiLU recomputed, exchanges, a store) and one for its closing block
# reductions and atomics; ``tile_scan_cta``, mamba-ssm's chunked-SSD chunk scan, one Triton program per (row block,
# column block, batch x chunk, head) loading its C, state, CB and x tiles from L2, the programs resident on an SM
# sharing one intake: its value is the time one SM takes to take in 1 KiB of those tiles (analytic/chain_ssd.py).
# (A norm backward's loop over rows has no spec parameter: analytic/chain.py ROW_LOOP.)
CHAIN_CLASSES = ("token_recurrent_warp", "chunk_recurrent_cta", "lane_chunk_cta", "state_tile_cta",
                 "lane_state_cta", "lane_state_cta_uneven", "lane_chunk_cta_unaligned",
                 "lane_state_cta_bwd", "lane_chunk_cta_bwd", "lane_chunk_cta_bwd_unaligned", "tile_scan_cta")
DRAM_PATHS = ("broadcast", "cast_copy", "reduction", "strided_copy", "expand_copy", "broadcast_16bit")


class Compute(_Strict):
    sm_count: Count
    clock_boost: Frequency
    tensor: dict[str, FlopRate]
    vector: dict[str, FlopRate]
    special_function: FlopRate
    # Attained rate of the warp-synchronous mma.sync instruction class per dtype (optional; see the
    # module docstring). Absent: kernels of that class are estimated at ``tensor`` and the estimate
    # names the key under not_modelled.
    tensor_mma_sync: dict[str, FlopRate] = Field(default_factory=dict)
    path: dict[str, FlopRate] = Field(default_factory=dict)
    # Time of one sequential step of a kernel class (CHAIN_CLASSES; optional): absent, the chain term
    # of such kernels is named under not_modelled.
    chain_step: dict[str, Duration] = Field(default_factory=dict)

    @field_validator("chain_step", mode="before")
    @classmethod
    def _chain_classes(cls, v):
        return _only_names(v, CHAIN_CLASSES, "kernel class(es) of a sequential chain")

    @field_validator("tensor", "vector", "tensor_mma_sync", mode="before")
    @classmethod
    def _dtypes(cls, v):
        return _only_names(v, DTYPES, "dtype(s)")

    @model_validator(mode="after")
    def _mma_sync_within_tensor(self):
        for dt, d in self.tensor_mma_sync.items():
            full = self.tensor.get(dt)
            if full is None:
                raise ValueError(f"tensor_mma_sync.{dt}: the spec has no compute.tensor.{dt} rate; an instruction "
                                 "class's rate needs the device's full rate of the same dtype beside it")
            if d.si is not None and full.si is not None and d.si > full.si:
                raise ValueError(f"tensor_mma_sync.{dt}: {d.value} exceeds compute.tensor.{dt} ({full.value}); "
                                 "one instruction class cannot be faster than the device's peak")
        return self
    @field_validator("path", mode="before")
    @classmethod
    def _paths(cls, v):
        return _only_names(v, COMPUTE_PATHS, "compute path(s)")

    @field_validator("vector")
    @classmethod
    def _fp32_vector(cls, v: dict[str, FlopRate]):
        if "fp32" not in v:
            raise ValueError("vector needs an 'fp32' rate: SSM scans and elementwise ops run on it")
        return v


class MemoryLevel(_Strict):
    scope: Literal["per_sm", "device"]
    capacity: Capacity
    bandwidth: Bandwidth
    # Load-to-use latency of one access served by this level (the time a dependent load waits); with
    # the bandwidth it gives the bytes that must be in flight to reach the bandwidth (Little's law).
    latency: Duration | None = None
    # Processing in memory (dram only): the bandwidth that work executed outside the memory (the host's
    # GEMMs) sees when ``bandwidth`` is the rate of the units computing in the memory itself.
    host_bandwidth: Bandwidth | None = None
    technology: str | None = None
    # Attained bandwidth of software kernel paths (DRAM_PATHS) that do not reach the copy bandwidth
    path: dict[str, Bandwidth] = Field(default_factory=dict)

    @field_validator("path", mode="before")
    @classmethod
    def _paths(cls, v):
        return _only_names(v, DRAM_PATHS, "memory path(s)")




class Launch(_Strict):
    kernel: Duration
    graph_node: Duration
    # Fixed device time of one kernel timed between two CUDA events right after the timing loop's L2
    # flush (measure/timing.py): event records and a cold start; the achievable estimate as measured
    # (analytic/timed.py) charges it to the first kernel of a timed call.
    timed_call: Duration | None = None
    # Device-side fixed time of one cuBLAS GEMM kernel beyond a trivial graph node (TMA descriptor
    # prefetch, barrier set-up and the fill of its K-loop pipeline, the epilogue's store): the floor a
    # small-M GEMM cannot go under (analytic/achievable.py).
    gemm_fixed: Duration | None = None
    # Device-side fixed time of one library kernel (a Triton or CUDA-extension kernel: the host classes in
    # LIBRARY_KERNEL_CLASSES) beyond a trivial graph node: the dependent load phases, block-wide reductions
    # and tail of a kernel that does real work on a few kilobytes (analytic/achievable.py).
    library_fixed: Duration | None = None
    host: dict[str, Duration] = Field(default_factory=dict)

    @field_validator("host", mode="before")
    @classmethod
    def _host_classes(cls, v):
        return _only_names(v, HOST_CLASSES, "backend class(es)")


class PowerSpec(_Strict):
    tdp: Power
    idle: Power


ENERGY_ENGINES = ("tensor", "tensor_mma_sync", "vector", "special_function")


class EnergyPerFlopByEngine(_Strict):
    """Dynamic energy per FLOP by engine and dtype (tensor cores, CUDA cores) and per transcendental
    evaluation (special-function units): the energy one more operation adds above static power."""

    tensor: dict[str, EnergyPerFlop] = Field(default_factory=dict)
    # tensor FLOPs issued as the warp-level mma.sync (sm80 code on a device whose full rate needs another
    # instruction; compute.tensor_mma_sync): more operand traffic per FLOP (analytic/energy.py)
    tensor_mma_sync: dict[str, EnergyPerFlop] = Field(default_factory=dict)
    vector: dict[str, EnergyPerFlop] = Field(default_factory=dict)
    special_function: EnergyPerFlop | None = None

    @model_validator(mode="before")
    @classmethod
    def _engine_names(cls, v):
        if isinstance(v, dict):
            _only_names(v, ENERGY_ENGINES, "engine(s)")
            for eng in ("tensor", "tensor_mma_sync", "vector"):
                if isinstance(v.get(eng), dict) and ("value" in v[eng] or "unknown" in v[eng]):
                    raise ValueError(f"{eng}: expected energies per dtype, e.g. {eng}: {{bf16: {{value: '0.4 pJ/FLOP', "
                                     f"source: ...}}}}; got one value for the whole engine")
        return v

    @field_validator("tensor", "tensor_mma_sync", "vector", mode="before")
    @classmethod
    def _dtypes(cls, v):
        return _only_names(v, DTYPES, "dtype(s)")


class Energy(_Strict):
    static_power: Power | None = None
    path_power: Power | None = None
    per_flop: EnergyPerFlopByEngine = Field(default_factory=EnergyPerFlopByEngine)
    per_byte: dict[str, EnergyPerByte] = Field(default_factory=dict)

    @field_validator("per_byte", mode="before")
    @classmethod
    def _levels(cls, v):
        return _only_names(v, MEMORY_LEVELS, "memory level(s)")


# Collectives a link's model covers (torch.distributed's names; send_recv: one point-to-point transfer).
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
LINK_SCOPES = ("scale_up", "host", "scale_out")


class CollectiveCeiling(_Strict):
    """One collective on one link: t(S) = latency + S x busbw_factor(n) / bus_bandwidth (nccl-tests'
    conventions; ``analytic/collectives.py``)."""

    latency: Duration
    bus_bandwidth: Bandwidth


class Link(_Strict):
    name: str
    bandwidth: Bandwidth
    scope: Literal["scale_up", "host", "scale_out"] | None = None
    # How ``bandwidth`` counts: NVIDIA's NVLink figures (900 GB/s for NVLink 4) add both directions; a
    # collective's bus bandwidth is a one-direction rate (nccl-tests, doc/PERFORMANCE.md), so the model
    # needs to know which one the datasheet printed.
    direction: Literal["bidirectional", "unidirectional"] | None = None
    latency: Duration | None = None
    collectives: dict[str, CollectiveCeiling] = Field(default_factory=dict)
    note: str | None = None

    @field_validator("collectives", mode="before")
    @classmethod
    def _collective_names(cls, v):
        return _only_names(v, COLLECTIVES, "collective(s)")


class Measured(_Strict):
    """An attained ceiling read on a real device: it sits beside the datasheet value, never over it."""

    key: str
    value: str | int | float
    date: _dt.date
    method: str
    source: str | None = None
    si: float | None = Field(default=None, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _no_computed(cls, data):
        return _reject_computed(data)


class Spec(_Strict):
    schema_version: Literal[1]
    id: str
    name: str
    vendor: str
    hypothetical: bool
    architecture: str
    form_factor: str | None = None
    notes: str | None = None
    device_names: list[str] = Field(default_factory=list)
    sources: dict[str, Source]
    compute: Compute
    memory: dict[str, MemoryLevel]
    launch: Launch
    power: PowerSpec
    energy: Energy | None = None
    interconnect: list[Link] = Field(default_factory=list)
    measured: list[Measured] = Field(default_factory=list)

    @field_validator("id")
    @classmethod
    def _id(cls, v: str):
        if not ID_PATTERN.match(v):
            raise ValueError(f"id {v!r} must be lower case letters, digits, '.', '_' or '-'")
        return v

    @field_validator("device_names", mode="before")
    @classmethod
    def _device_names(cls, v):
        expected = 'expected a list of device names as the driver reports them, e.g. ["NVIDIA H200"]'
        if not isinstance(v, list):
            raise ValueError(f"{expected}; got {v!r}")
        for i, name in enumerate(v):
            if not isinstance(name, str) or not name.strip() or name != name.strip():
                raise ValueError(f"[{i}]: {expected}; got {name!r} (a non-empty string without surrounding spaces)")
        dup = sorted({n for n in v if v.count(n) > 1})
        if dup:
            raise ValueError(f"{dup} listed more than once")
        return v

    @field_validator("memory", mode="before")
    @classmethod
    def _level_names(cls, v):
        # Before the levels are validated: a misspelt level is reported as such, not as missing keys.
        if isinstance(v, dict):
            bad = [k for k in v if k not in MEMORY_LEVELS]
            if bad:
                raise ValueError(f"unknown memory level(s) {bad}; expected some of {list(MEMORY_LEVELS)}")
        return v

    @field_validator("memory")
    @classmethod
    def _levels(cls, v: dict[str, MemoryLevel]):
        order = [MEMORY_LEVELS.index(k) for k in v]
        if order != sorted(order):
            raise ValueError(f"memory levels must be listed from on-chip to off-chip: {list(MEMORY_LEVELS)}")
        if "dram" not in v:
            raise ValueError("memory needs a 'dram' level (device memory: HBM, GDDR or DRAM)")
        if v["dram"].scope != "device":
            raise ValueError("memory.dram.scope must be 'device'")
        stray = [k for k, lv in v.items() if k != "dram" and lv.host_bandwidth is not None]
        if stray:
            raise ValueError(f"memory.{stray[0]}.host_bandwidth: only the dram level computes in memory; "
                             "host_bandwidth belongs to memory.dram")
        device_wide = None
        for name, level in v.items():
            if level.scope == "device":
                device_wide = device_wide or name
            elif device_wide is not None:
                raise ValueError(
                    f"memory.{name}.scope: a per-SM level cannot sit farther from the cores than the device-wide "
                    f"level {device_wide!r}; expected 'device' or a level closer to the cores"
                )
        return v

    @model_validator(mode="after")
    def _cross_checks(self):
        data = dict(self.data())
        for path, datum in data.items():
            if datum.source is not None and datum.source not in self.sources:
                raise ValueError(
                    f"{path}.source: unknown source {datum.source!r}; declared sources: {sorted(self.sources)}"
                )
            if not self.hypothetical and datum.source is not None and self.sources[datum.source].tag == "A":
                raise ValueError(
                    f"{path}.source: {datum.source!r} is a design assumption (tag A), which only a hypothetical "
                    "device may use; expected a datasheet, paper or derived source (tag P, S, R or D)"
                )
        if self.hypothetical and self.measured:
            raise ValueError("measured: a hypothetical device has no measurements; expected no 'measured' section")
        self._check_hierarchy()
        self._check_energy()
        for i, m in enumerate(self.measured):
            if m.key not in data:
                raise ValueError(
                    f"measured[{i}].key: {m.key!r} is not a value of this spec; expected one of {sorted(data)}"
                )
            if m.source is not None and m.source not in self.sources:
                raise ValueError(f"measured[{i}].source: unknown source {m.source!r}")
            try:
                si = units.parse(m.value, data[m.key].kind)
            except units.UnitError as exc:
                raise ValueError(f"measured[{i}].value: {exc}") from None
            if not si > 0:
                raise ValueError(f"measured[{i}].value: {m.value!r} must be greater than zero")
            if data[m.key].integer and not si.is_integer():
                raise ValueError(f"measured[{i}].value: {m.value!r} must be a whole number")
            object.__setattr__(m, "si", si)
        keys = [m.key for m in self.measured]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            raise ValueError(f"measured: key(s) {dup} appear more than once")
        return self

    def _check_energy(self) -> None:
        """Energy per byte only at levels the spec has; static power below the power limit (a device
        whose floor exceeds its cap could not run)."""
        if self.energy is None:
            return
        stray = [lvl for lvl in self.energy.per_byte if lvl not in self.memory]
        if stray:
            raise ValueError(f"energy.per_byte.{stray[0]}: the spec has no memory level {stray[0]!r}; "
                             f"expected one of {list(self.memory)}")
        static, tdp = self.energy.static_power, self.power.tdp
        if static is not None and static.known and tdp.known and static.si >= tdp.si:
            raise ValueError(f"energy.static_power: {static.value!r} is not below the power limit power.tdp "
                             f"({tdp.value!r}); static power is the floor under every dynamic term")

    def _check_hierarchy(self) -> None:
        """Device-wide levels grow outward; one SM's level is smaller than any device-wide level; known
        bandwidth does not grow outward. (Registers may exceed shared memory, and on small GPUs the
        register files together exceed L2, so per-SM levels are compared one SM at a time.)"""
        fmt = units.format_quantity
        levels = list(self.memory.items())
        for i, (name, level) in enumerate(levels):
            cap = level.capacity.si
            for pname, plevel in levels[:i]:
                pcap = plevel.capacity.si
                if cap is None or pcap is None or level.scope == "per_sm":
                    continue
                if cap <= pcap:
                    raise ValueError(
                        f"memory.{name}.capacity: {fmt(cap, 'capacity')} is not larger than the closer level "
                        f"{pname!r} ({fmt(pcap, 'capacity')}{' per SM' if plevel.scope == 'per_sm' else ''}); "
                        "levels must grow from on-chip to off-chip"
                    )
            bw = level.bandwidth.si
            for pname, plevel in levels[:i]:
                pbw = plevel.bandwidth.si
                if bw is not None and pbw is not None and bw > pbw:
                    raise ValueError(
                        f"memory.{name}.bandwidth: {fmt(bw, 'bandwidth')} exceeds the closer level {pname!r} "
                        f"({fmt(pbw, 'bandwidth')}); bandwidth must not grow from on-chip to off-chip"
                    )

    def data(self):
        """Yield (dotted path, Datum) for every value in the spec."""
        yield "compute.sm_count", self.compute.sm_count
        yield "compute.clock_boost", self.compute.clock_boost
        for dt, d in self.compute.tensor.items():
            yield f"compute.tensor.{dt}", d
        for dt, d in self.compute.vector.items():
            yield f"compute.vector.{dt}", d
        yield "compute.special_function", self.compute.special_function
        for dt, d in self.compute.tensor_mma_sync.items():
            yield f"compute.tensor_mma_sync.{dt}", d
        for p, d in self.compute.path.items():
            yield f"compute.path.{p}", d
        for c, d in self.compute.chain_step.items():
            yield f"compute.chain_step.{c}", d
        for name, level in self.memory.items():
            yield f"memory.{name}.capacity", level.capacity
            yield f"memory.{name}.bandwidth", level.bandwidth
            if level.latency is not None:
                yield f"memory.{name}.latency", level.latency
            if level.host_bandwidth is not None:
                yield f"memory.{name}.host_bandwidth", level.host_bandwidth
            for p, d in level.path.items():
                yield f"memory.{name}.path.{p}", d
        yield "launch.kernel", self.launch.kernel
        yield "launch.graph_node", self.launch.graph_node
        if self.launch.timed_call is not None:
            yield "launch.timed_call", self.launch.timed_call
        if self.launch.gemm_fixed is not None:
            yield "launch.gemm_fixed", self.launch.gemm_fixed
        if self.launch.library_fixed is not None:
            yield "launch.library_fixed", self.launch.library_fixed
        for cls, d in self.launch.host.items():
            yield f"launch.host.{cls}", d
        yield "power.tdp", self.power.tdp
        yield "power.idle", self.power.idle
        if self.energy is not None:
            if self.energy.static_power is not None:
                yield "energy.static_power", self.energy.static_power
            if self.energy.path_power is not None:
                yield "energy.path_power", self.energy.path_power
            for eng in ("tensor", "tensor_mma_sync", "vector"):
                for dt, d in getattr(self.energy.per_flop, eng).items():
                    yield f"energy.per_flop.{eng}.{dt}", d
            if self.energy.per_flop.special_function is not None:
                yield "energy.per_flop.special_function", self.energy.per_flop.special_function
            for lvl, d in self.energy.per_byte.items():
                yield f"energy.per_byte.{lvl}", d
        for i, link in enumerate(self.interconnect):
            yield f"interconnect.{i}.bandwidth", link.bandwidth
            if link.latency is not None:
                yield f"interconnect.{i}.latency", link.latency
            for name, c in link.collectives.items():
                yield f"interconnect.{i}.collectives.{name}.latency", c.latency
                yield f"interconnect.{i}.collectives.{name}.bus_bandwidth", c.bus_bandwidth


def value_kind(key: str) -> str:
    """The quantity kind (a key of ``units.CANONICAL``) of the value at dotted path ``key`` in any spec,
    read off the schema's own types (so it cannot drift from them): ``memory.dram.bandwidth`` is a
    bandwidth, ``launch.kernel`` a time. Whether a given spec lists the path is the spec's business;
    a path the schema has no value at raises ValueError naming it."""
    tp: object = Spec
    for part in key.split("."):
        if get_origin(tp) in (Union, types.UnionType):  # an optional section (energy)
            tp = next(a for a in get_args(tp) if a is not type(None))
        if get_origin(tp) is dict:
            tp = get_args(tp)[1]
        elif get_origin(tp) is list and part.isdigit():
            tp = get_args(tp)[0]
        elif isinstance(tp, type) and issubclass(tp, _Strict) and not issubclass(tp, Datum) and part in tp.model_fields:
            tp = tp.model_fields[part].annotation
        else:
            tp = None
            break
    if get_origin(tp) in (Union, types.UnionType):  # an optional value (memory.<level>.latency)
        tp = next(a for a in get_args(tp) if a is not type(None))
    if isinstance(tp, type) and issubclass(tp, Datum):
        return tp.kind
    raise ValueError(f"{key!r} is not a spec value path; expected a dotted path such as 'memory.dram.bandwidth', "
                     "'compute.tensor.bf16' or 'launch.kernel'")
