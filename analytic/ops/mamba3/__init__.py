"""Mamba-3 SISO and MIMO (chunked prefill, backward, decode step).

``cost.py`` holds the registered cost rules; ``ref.py`` the plain-PyTorch references (imported only
where torch is wanted, through ``registry.reference``)."""

from . import cost, prep  # noqa: F401  (registers the family's ops; prep: the module's eager pre-processing)
