"""Load and validate spec files; every failure names the file, the key path and what was expected."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml
from pydantic import ValidationError

from ..errors import UserError
from ..files import UniqueKeyLoader
from .schema import SCHEMA_VERSION, Spec


class SpecError(UserError):
    """A spec that cannot be used. ``str()`` is the message a user sees."""

    def __init__(self, file: str | Path, problems: list[str]):
        self.file = str(file)
        self.problems = problems
        super().__init__("\n".join(f"{self.file}: {p}" for p in problems))

    @classmethod
    def combine(cls, messages: list[str]) -> "SpecError":
        """One error carrying several already-prefixed messages (several files)."""
        err = cls("", [])
        err.problems = messages
        err.args = ("\n".join(messages),)
        return err


def describe_error(err: dict) -> str:
    """One pydantic error as "key.path: what is wrong or expected", in the words a spec author reads."""
    loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    if err["type"] == "extra_forbidden":
        msg = "unknown key (not part of spec schema v1; check its spelling and place)"
    elif err["type"] == "missing":
        msg = "required key is missing"
    elif err["type"] == "literal_error":
        msg = f"{msg}; got {err.get('input')!r}"
    return f"{loc}: {msg}" if loc else msg


def parse_spec(data: object, file: str | Path = "<data>") -> Spec:
    if not isinstance(data, dict):
        raise SpecError(file, [f"expected a mapping of spec keys at the top level, got {type(data).__name__}"])
    version = data.get("schema_version")
    if isinstance(version, bool) or version != SCHEMA_VERSION:
        raise SpecError(file, [f"schema_version: expected {SCHEMA_VERSION}, got {version!r}"])
    try:
        return Spec.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            line = describe_error(err)
            if line not in problems:
                problems.append(line)
        raise SpecError(file, problems) from None


def load_spec(path: str | Path) -> Spec:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(path, ["file not found"]) from None
    except IsADirectoryError:
        raise SpecError(path, ["is a directory, expected a YAML spec file"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(path, [f"cannot read: {exc}"]) from None
    try:
        data = yaml.load(text, Loader=UniqueKeyLoader)
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f"line {mark.line + 1}, column {mark.column + 1}: "
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(path, [f"{where}not valid YAML ({problem})"]) from None
    return parse_spec(data, path)


def builtin_dir() -> Path:
    return Path(str(resources.files("ssmbench.hwspecs") / "specs"))


def load_all(paths: list[str | Path] | None = None) -> dict[str, Spec]:
    """Load the built-in specs (or the given files); ids must be unique across them."""
    files = [Path(p) for p in paths] if paths is not None else sorted(builtin_dir().glob("*.yaml"))
    specs: dict[str, Spec] = {}
    where: dict[str, Path] = {}
    errors: list[str] = []
    for f in files:
        try:
            spec = load_spec(f)
        except SpecError as exc:
            errors.append(str(exc))
            continue
        if spec.id in specs:
            errors.append(f"{f}: id: {spec.id!r} is already used by {where[spec.id]}; ids must be unique")
            continue
        specs[spec.id] = spec
        where[spec.id] = f
    if errors:
        raise SpecError.combine(errors)
    return specs


def get_spec(spec_id_or_path: str) -> Spec:
    """A built-in spec by id, or a spec file by path."""
    p = Path(spec_id_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return load_spec(p)
    specs = load_all()
    if spec_id_or_path not in specs:
        raise SpecError("<builtin>", [f"unknown spec id {spec_id_or_path!r}; known: {', '.join(sorted(specs))}"])
    return specs[spec_id_or_path]


def device_matches(spec: Spec, name: str) -> bool:
    """The one device rule: a device (its name as the driver reports it and measure records it,
    e.g. "NVIDIA H200") is the spec's device iff the name is one of the spec's ``device_names``,
    exactly. No substring or word matching. Nothing was ever measured on a hypothetical design: no
    device matches one, even one derived from a real spec that kept its device_names."""
    return not spec.hypothetical and name in spec.device_names


def spec_for_device(name: str) -> Spec:
    """The built-in spec of the device named ``name`` (see ``device_matches``); a SpecError naming the
    known device names when no spec, or several, list it."""
    specs = load_all()
    found = [s for s in specs.values() if device_matches(s, name)]
    if len(found) == 1:
        return found[0]
    if found:
        raise SpecError("<builtin>", [f"device {name!r} is listed in the device_names of several specs "
                                      f"({', '.join(s.id for s in found)}); a device name must name one spec"])
    known = sorted(f"{n!r} ({s.id})" for s in specs.values() for n in s.device_names)
    raise SpecError("<builtin>", [f"no built-in spec lists device {name!r} in its device_names; known device "
                                  f"names: {', '.join(known)}; add the name to the matching spec's device_names "
                                  "or pass a spec file"])
