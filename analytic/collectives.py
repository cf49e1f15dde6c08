"""Time of a collective on a spec's interconnect: the alpha-beta model with nccl-tests' bus bandwidth.

nccl-tests (NVIDIA/nccl-tests, doc/PERFORMANCE.md) reports for an operation on ``S`` bytes the
algorithm bandwidth ``algbw = S / t`` and the bus bandwidth ``busbw = algbw x factor(n)``, the rate
each rank's link must carry one way for the operation to take ``t``, so that busbw is comparable with
the hardware's one-direction link bandwidth whatever the rank count ``n``:

    all_reduce      2 (n - 1) / n      (S: the buffer each rank holds)
    reduce_scatter  (n - 1) / n        (S: the whole array, n x the per-rank output)
    all_gather      (n - 1) / n        (S: the whole array, n x the per-rank input)
    all_to_all      (n - 1) / n        (S: the bytes each rank sends in all, its own share included)
    send_recv       1                  (S: the message)

The time model is ``t(S) = alpha + S x factor(n) / busbw`` (PERFORMANCE.md: "roughly equal to
overhead + size / bw"). Where the values come from, in order:

1. the link's ``collectives.<name>`` ceilings (``latency`` = alpha, ``bus_bandwidth`` = busbw): a
   measurement of ``ssmbench probe --collectives`` (under ``measured:``) or a design assumption;
2. otherwise the link itself: busbw = its bandwidth per direction (the datasheet's bidirectional
   figure halved), the best a ring or tree can reach; alpha = the link's ``latency`` x the steps
   of a ring algorithm (2 (n - 1) for all_reduce, n - 1 for all_gather, reduce_scatter and all_to_all,
   1 for send_recv), or 0 where the latency is unknown: the time is then a bandwidth-only lower bound,
   and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UserError
from ..hwspecs.ceilings import Ceiling, ceiling
from ..hwspecs.schema import COLLECTIVES, Spec


def bus_factor(collective: str, n: int) -> float:
    """nccl-tests' busbw / algbw for ``n`` ranks (module docstring)."""
    if n < 1:
        raise ValueError(f"rank count must be >= 1, got {n}")
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if collective == "send_recv":
        return 1.0
    raise ValueError(f"unknown collective {collective!r}; expected one of {COLLECTIVES}")


def ring_steps(collective: str, n: int) -> int:
    """Latency-bound steps of a ring algorithm: each pays one transfer's fixed time."""
    if n == 1:
        return 0
    return {"all_reduce": 2 * (n - 1), "all_gather": n - 1, "reduce_scatter": n - 1, "all_to_all": n - 1,
            "send_recv": 1}[collective]


@dataclass(frozen=True)
class CommTime:
    """One collective's time: ``time_s`` = ``latency_s`` + ``bandwidth_s``, with where each came from."""

    collective: str
    ranks: int
    bytes: float  # S of the module docstring
    wire_bytes: float  # S x factor: what each rank's link carries one way
    latency_s: float
    bandwidth_s: float
    origin: str  # "measured", "datasheet", "derived", "design assumption" (of the bandwidth)
    provenance: str
    latency_known: bool

    @property
    def time_s(self) -> float:
        return self.latency_s + self.bandwidth_s


@dataclass(frozen=True)
class LinkModel:
    """The link a parallel group communicates over, as the spec gives it (``for_spec``)."""

    spec_id: str
    index: int
    name: str
    per_direction: Ceiling  # bytes/s one way
    latency: Ceiling
    direction_note: str

    def collective(self, spec: Spec, name: str, prefer: str) -> tuple[Ceiling | None, Ceiling | None]:
        """The link's own (alpha, busbw) ceilings for ``name``, each None where the spec has no known value."""
        link = spec.interconnect[self.index]
        if name not in link.collectives:
            return None, None
        base = f"interconnect.{self.index}.collectives.{name}"
        lat, bw = ceiling(spec, f"{base}.latency", prefer), ceiling(spec, f"{base}.bus_bandwidth", prefer)
        return (lat if lat.value is not None else None), (bw if bw.value is not None else None)

    def time(self, spec: Spec, collective: str, size_bytes: float, n: int, prefer: str = "measured") -> CommTime:
        """Time of ``collective`` over ``size_bytes`` (S) among ``n`` ranks (module docstring)."""
        if n <= 1 or size_bytes <= 0:
            return CommTime(collective, n, size_bytes, 0.0, 0.0, 0.0, "none", "no communication (one rank)", True)
        wire = size_bytes * bus_factor(collective, n)
        lat_c, bw_c = self.collective(spec, collective, prefer)
        if bw_c is not None:
            bw, origin, prov = bw_c.value, bw_c.origin, f"{self.name} {collective} bus bandwidth: {bw_c.provenance}"
        else:
            bw, origin = self.per_direction.value, self.per_direction.origin
            prov = f"{self.name} bandwidth per direction ({self.direction_note}): {self.per_direction.provenance}"
        if lat_c is not None:
            alpha, known = lat_c.value, True
            prov += f"; latency: {collective} {lat_c.origin} ({lat_c.provenance})"
        elif self.latency.value is not None:
            alpha, known = self.latency.value * ring_steps(collective, n), True
            prov += f"; latency: {ring_steps(collective, n)} ring steps x link latency ({self.latency.origin})"
        else:
            alpha, known = 0.0, False
            prov += f"; latency unknown ({self.latency.provenance}): bandwidth term only, a lower bound"
        return CommTime(collective, n, size_bytes, wire, alpha, wire / bw, origin, prov, known)


def for_spec(spec: Spec, link: str | None = None, prefer: str = "measured") -> LinkModel:
    """The link of ``spec`` named ``link`` (default: the first scale_up link, else the first link)."""
    if not spec.interconnect:
        raise UserError(f"{spec.id}: the spec lists no interconnect, so communication between GPUs cannot be "
                        "costed; add an 'interconnect:' link (docs/spec-template.yaml) or use one GPU")
    if link is None:
        index = next((i for i, k in enumerate(spec.interconnect) if k.scope == "scale_up"), 0)
    else:
        names = [k.name for k in spec.interconnect]
        if link not in names:
            raise UserError(f"--link {link!r}: {spec.id} has no such interconnect; its links: {', '.join(names)}")
        index = names.index(link)
    k = spec.interconnect[index]
    if k.direction is None:
        raise UserError(f"{spec.id}: interconnect {k.name!r} does not say whether its bandwidth counts both "
                        "directions or one; add 'direction: bidirectional' or 'direction: unidirectional'")
    bw = ceiling(spec, f"interconnect.{index}.bandwidth", prefer)
    if bw.value is None:
        raise UserError(f"{spec.id}: interconnect {k.name!r} bandwidth is unknown ({bw.provenance}); "
                        "communication cannot be costed")
    halve = k.direction == "bidirectional"
    per_dir = Ceiling(bw.key, bw.value / 2 if halve else bw.value, bw.origin, bw.provenance)
    note = "the datasheet's bidirectional figure / 2" if halve else f"{k.direction} as given"
    lat = ceiling(spec, f"interconnect.{index}.latency", prefer) if k.latency is not None else \
        Ceiling(f"interconnect.{index}.latency", None, "unknown", "the spec gives no link latency")
    return LinkModel(spec.id, index, k.name, per_dir, lat, note)
