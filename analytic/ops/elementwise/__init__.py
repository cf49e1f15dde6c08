"""Elementwise activations: SiLU, softplus, SiLU gate; and the small ops around a block's kernels
(``plumbing.py``: layout copies, casts, the residual add, A = -exp(A_log)).

``cost.py`` holds the registered cost rules; ``ref.py`` the plain-PyTorch references (imported only
where torch is wanted, through ``registry.reference``)."""

from . import cost, plumbing  # noqa: F401  (registers the family's ops)
