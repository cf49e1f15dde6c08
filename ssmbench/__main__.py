"""``python -m ssmbench``: the ``ssmbench`` command, also as a module, which is what torchrun starts
(``torchrun --nproc-per-node N -m ssmbench measure ... --distributed``)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
