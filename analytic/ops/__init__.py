"""Op families, one module each; importing this package registers every op they define."""

import importlib
import pkgutil

for _mod in sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")):
    importlib.import_module(f"{__name__}.{_mod}")
