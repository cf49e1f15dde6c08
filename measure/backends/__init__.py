"""Backends, one module per library or family; importing this package registers every backend.

Every module here must import without torch, CUDA or the kernel libraries (they are imported inside
``prepare``). A module that fails to import is an error, never skipped silently.
"""

import importlib
import pkgutil

for _mod in sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")):
    if _mod != "base":
        importlib.import_module(f"{__name__}.{_mod}")
