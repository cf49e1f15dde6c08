"""Op families, one package each (``<family>/cost.py`` beside ``<family>/ref.py``); importing this
package registers every op their cost modules define. ``common/`` holds helpers shared by families.
The references (``ref.py``) are not imported here: they are resolved through the registry
(``registry.reference``) only where torch is wanted."""

import importlib
import pkgutil

for _pkg in sorted(m.name for m in pkgutil.iter_modules(__path__) if m.ispkg and m.name != "common"):
    importlib.import_module(f"{__name__}.{_pkg}")
