"""The metadata block written into every result and probe file: what ran, where, with what.

Every key is always present; a value that cannot be known here is ``None`` (for versions: the
library is not installed) and, where useful, a ``*_note`` says why.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import importlib.util
import os
import platform
from pathlib import Path
from typing import Any

from ..provenance import host_meta, utc_now  # noqa: F401  (utc_now is part of this module's API)

# (label, distribution names to try, import name for a __version__ fallback)
LIBRARIES = (
    ("torch", ("torch",), "torch"),
    ("triton", ("triton", "pytorch-triton"), "triton"),
    ("mamba_ssm", ("mamba-ssm", "mamba_ssm"), "mamba_ssm"),
    ("causal_conv1d", ("causal-conv1d", "causal_conv1d"), "causal_conv1d"),
    ("flash_attn", ("flash-attn", "flash_attn"), "flash_attn"),
    ("fla", ("fla-core", "flash-linear-attention"), "fla"),
    ("nvidia_ml_py", ("nvidia-ml-py",), None),
    ("numpy", ("numpy",), "numpy"),
)

REQUIRED_KEYS = (
    "command_line", "git", "hostname", "platform", "python", "ssmbench_version", "versions", "cuda_version",
    "device", "seed", "started_utc",
)


def library_version(dists: tuple[str, ...], module: str | None) -> str | None:
    for d in dists:
        try:
            return md.version(d)
        except md.PackageNotFoundError:
            continue
    # Built in place (e.g. an extension folder on PYTHONPATH) without package metadata.
    if module is None or importlib.util.find_spec(module) is None:
        return None
    try:
        return str(getattr(importlib.import_module(module), "__version__", "unknown"))
    except Exception as exc:  # a library that is present but does not import is worth recording
        return f"present, import failed: {type(exc).__name__}"


def versions() -> dict[str, str | None]:
    found = {label: library_version(dists, mod) for label, dists, mod in LIBRARIES}
    if importlib.util.find_spec("torch") is not None:
        # torch.__version__ is the build that runs, with its local tag ("2.14.1+cu130": which CUDA it
        # was built for); a distribution's metadata may drop that tag.
        import torch

        found["torch"] = str(torch.__version__)
    return found


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def device_name(device) -> str | None:
    """The device's model name as the metadata records it (``device.name``): the CUDA device
    properties' name ("NVIDIA H200"), or the CPU model."""
    import torch

    if device.type != "cuda":
        return _cpu_model()
    idx = device.index if device.index is not None else torch.cuda.current_device()
    return torch.cuda.get_device_properties(idx).name


def device_info(device) -> dict[str, Any]:
    """Name, UUID, driver, clocks and power limit of the device the run uses."""
    import torch

    if device.type != "cuda":
        return {"type": "cpu", "name": device_name(device), "logical_cores": os.cpu_count(),
                "torch_threads": torch.get_num_threads(), "uuid": None, "driver": None, "clocks": None,
                "power_limit_w": None}
    idx = device.index if device.index is not None else torch.cuda.current_device()
    p = torch.cuda.get_device_properties(idx)
    info: dict[str, Any] = {
        "type": "cuda", "index": idx, "name": device_name(device), "uuid": str(getattr(p, "uuid", "")) or None,
        "compute_capability": f"{p.major}.{p.minor}", "sm_count": p.multi_processor_count,
        "memory_bytes": int(p.total_memory), "l2_bytes": int(getattr(p, "L2_cache_size", 0)) or None,
        "driver": None, "clocks": None, "power_limit_w": None,
    }
    from .energy import open_device

    nv, reason = open_device(device)
    if nv is None:
        info["nvml_note"] = reason
        return info
    n = nv.nvml
    try:
        drv = n.nvmlSystemGetDriverVersion()
        info["driver"] = drv.decode() if isinstance(drv, bytes) else str(drv)
    except Exception as exc:
        info["nvml_note"] = f"driver version unreadable: {exc}"
    clocks: dict[str, Any] = nv.state()
    for key, kind in (("sm_max_mhz", n.NVML_CLOCK_SM), ("mem_max_mhz", n.NVML_CLOCK_MEM)):
        try:
            clocks[key] = int(n.nvmlDeviceGetMaxClockInfo(nv.handle, kind))
        except Exception:
            clocks[key] = None
    info["clocks"] = clocks
    try:
        info["power_limit_w"] = n.nvmlDeviceGetEnforcedPowerLimit(nv.handle) / 1000.0
    except Exception:
        pass
    return info


def collect(device, seed: int, argv: list[str] | None = None) -> dict[str, Any]:
    import torch

    return {
        **host_meta(argv),
        "versions": versions(),
        "cuda_version": torch.version.cuda,
        "cudnn_version": torch.backends.cudnn.version() if device.type == "cuda" else None,
        "device": device_info(device),
        "torch_settings": {
            # fp32 matmuls on tensor cores (TF32) change both speed and error: record the switches.
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "num_threads": torch.get_num_threads(),
        },
        "seed": seed,
        "started_utc": utc_now(),
    }
