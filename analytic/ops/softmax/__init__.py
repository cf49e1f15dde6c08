"""Softmax over attention scores, and the training loss's log-softmax (``loss.py``: cross_entropy).

``cost.py`` holds the registered cost rules; ``ref.py`` the plain-PyTorch references (imported only
where torch is wanted, through ``registry.reference``)."""

from . import cost, loss  # noqa: F401  (registers the family's ops)
