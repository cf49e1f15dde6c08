"""Hardware specs: one YAML file per device, the schema (v1) and the loader."""

from .ceilings import Ceiling, ceiling
from .loader import SpecError, builtin_dir, device_matches, get_spec, load_all, load_spec, parse_spec, spec_for_device
from .schema import DTYPES, MEMORY_LEVELS, SCHEMA_VERSION, Spec

__all__ = [
    "Ceiling", "ceiling", "SpecError", "builtin_dir", "device_matches", "get_spec", "load_all", "load_spec",
    "parse_spec", "spec_for_device",
    "DTYPES", "MEMORY_LEVELS", "SCHEMA_VERSION", "Spec",
]
