"""Mamba-2 SSD: the chunked scan, its five stages, the quadratic and recurrent forms, decode.

``cost.py`` holds the registered cost rules; ``ref.py`` the plain-PyTorch references (imported only
where torch is wanted, through ``registry.reference``)."""

from . import cost  # noqa: F401  (registers the family's ops)
