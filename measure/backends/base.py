"""The backend registry: which real code runs which (op, impl, modes) on which devices.

A backend's ``prepare(case, device, seed)`` builds fresh random inputs (seeded) and returns a
``Prepared``: the region to time (``run``), the same computation in high precision
(``reference_hi``) and in plain PyTorch at the case dtype (``reference_lo``), for the correctness
gate. ``prepare`` raises ``Unavailable(reason)`` when the backend cannot run here (library missing,
no CUDA, shape the kernel does not support); the sweep records that as status ``unavailable``.

The registry is strict: registering the same (name, op) twice raises, an unknown backend raises with
the known names. Backend modules must import without torch or CUDA: heavy imports go inside
``prepare``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ...analytic.cases import CASE_DTYPES
from ...analytic.conventions import MODES
from ...errors import UserError


class Unavailable(Exception):
    """The backend cannot run here (library not importable, no CUDA, unsupported shape); message = reason."""


class UnknownBackend(UserError):
    """A suite or command named a backend that is not registered for that op."""


@dataclass
class Prepared:
    run: Callable[[], Any]  # the region to time; returns the output tensor(s); must not allocate inputs
    reference_hi: Callable[[], Any]  # high-precision reference output on the SAME inputs
    reference_lo: Callable[[], Any]  # plain PyTorch at the case dtype on the same inputs (gate baseline)
    output_of: Callable[[Any], list]  # maps run()/reference outputs to a list of tensors to compare
    tokens: int  # tokens processed per call (for energy per token)
    notes: str = ""


@dataclass(frozen=True)
class Backend:
    name: str
    op: str
    impl: str
    modes: tuple[str, ...]
    devices: tuple[str, ...]
    prepare: Callable[..., Prepared]  # (case, torch.device, seed) -> Prepared; raises Unavailable
    description: str = ""
    dtypes: tuple[str, ...] = CASE_DTYPES  # added by measure-core: dtypes the backend accepts
    # modes whose run() replays a CUDA graph the backend captured itself: the record's timing says
    # cuda_graph false (the timing loop adds no graph of its own), yet the call is one graph replay
    graph_modes: tuple[str, ...] = ()

    def __post_init__(self):
        bad_modes = [m for m in self.modes if m not in MODES]
        if bad_modes or not self.modes:
            raise ValueError(f"backend {self.name} ({self.op}): modes {list(self.modes)} must be a non-empty "
                             f"subset of {list(MODES)}")
        bad_dev = [d for d in self.devices if d not in ("cpu", "cuda")]
        if bad_dev or not self.devices:
            raise ValueError(f"backend {self.name} ({self.op}): devices {list(self.devices)} must be a non-empty "
                             "subset of ['cpu', 'cuda']")
        bad_dt = [d for d in self.dtypes if d not in CASE_DTYPES]
        if bad_dt or not self.dtypes:
            raise ValueError(f"backend {self.name} ({self.op}): dtypes {list(self.dtypes)} must be a non-empty "
                             f"subset of {list(CASE_DTYPES)}")
        if not set(self.graph_modes) <= set(self.modes):
            raise ValueError(f"backend {self.name} ({self.op}): graph_modes {list(self.graph_modes)} must be a "
                             f"subset of its modes {list(self.modes)}")
        if not callable(self.prepare):
            raise ValueError(f"backend {self.name} ({self.op}): prepare must be callable")


# Importing this module imports its package first, whose __init__ imports every backend module: the
# registry is complete by the time anyone can call get_backend.
_BACKENDS: dict[tuple[str, str], Backend] = {}


def register_backend(backend: Backend) -> Backend:
    k = (backend.name, backend.op)
    if k in _BACKENDS:
        raise ValueError(f"backend {backend.name!r} for op {backend.op!r} is already registered")
    _BACKENDS[k] = backend
    return backend


def unregister_backend(name: str, op: str) -> None:
    """Remove a backend (tests register throw-away backends and remove them afterwards)."""
    _BACKENDS.pop((name, op), None)


def all_backends() -> list[Backend]:
    return sorted(_BACKENDS.values(), key=lambda b: (b.op, b.name))


def backends_for(op: str) -> list[Backend]:
    return [b for b in all_backends() if b.op == op]


def get_backend(name: str, op: str) -> Backend:
    b = _BACKENDS.get((name, op))
    if b is None:
        known = sorted(x.name for x in _BACKENDS.values() if x.op == op)
        hint = f"backends for {op!r}: {', '.join(known)}" if known else f"no backend is registered for op {op!r}"
        raise UnknownBackend(f"unknown backend {name!r} for op {op!r}; {hint}")
    return b
