"""Optimizer steps of a training step (the parameter update after the backward).

``cost.py`` holds the registered cost rules; ``ref.py`` the plain-PyTorch references (imported only
where torch is wanted, through ``registry.reference``)."""

from . import cost  # noqa: F401  (registers the family's ops)
