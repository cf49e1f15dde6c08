"""Mamba-1 selective scan (fused kernel, naive materialized scan, per-step loop; decode step).

``cost.py`` holds the registered cost rules; ``ref.py`` the plain-PyTorch references (imported only
where torch is wanted, through ``registry.reference``)."""

from . import cost  # noqa: F401  (registers the family's ops)
