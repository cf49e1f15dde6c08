"""ssm-bench: do GPUs turn a state-space model's arithmetic savings into proportional speed and energy gains?

Subpackages: ``hwspecs`` (hardware specs), ``analytic`` (symbolic costs and roofline), ``measure``
(kernel timings and energy on real GPUs), ``calibrate`` (fits of measured vs predicted), ``figures``.

The Python API (``ssmbench.api``; README, "Python API"): ``predict``, ``point`` (a fast one-point bound), ``spec_table``, ``sweep``, ``cost``,
``energy``, ``get_spec``, ``get_model`` and the ``Prediction`` result. They are imported on first use, so that
``import ssmbench`` stays cheap (no numpy, sympy or torch) for the CLI and for tools that only read
``__version__``.
"""

__version__ = "0.1.0"

API = ("predict", "point", "spec_table", "sweep", "cost", "energy", "get_spec", "get_model", "Prediction")
__all__ = ["__version__", *API]


def __getattr__(name: str):
    if name in API:
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module 'ssmbench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(API))
