"""Reading the files users hand to the tool (specs, suites, models, results, profiles): one place for
the two rules every reader follows — an unreadable file is a UserError naming the path, and a YAML
mapping with a repeated key is an error, not a silent overwrite. The one YAML writer for files
people read and edit (a probe's fragment, a new spec). And the paths users hand it to write:
``check_output_file`` / ``check_output_folder``, called by every command before its work."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import yaml

from .errors import UserError


def read_user_text(path: str | Path, error: type[UserError] = UserError, what: str = "file") -> str:
    """The text of ``path``; a missing or unreadable file raises ``error`` naming the path."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory, expected a {what}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read {what} ({exc})") from None


class UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """PyYAML keeps the last of two equal keys silently; a file with a repeated key is an error.
    (The libyaml parser is used where PyYAML has it: the pure-Python one is ~10x slower.)"""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:
                continue  # the base class reports an unhashable key with its position
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice in one mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


# Output paths -------------------------------------------------------------------------------------
# Every command that writes checks its output paths before its work (a fit, a sweep, a measurement):
# a bad path found afterwards loses that work, and a traceback names no option.

def _check_folder(folder: Path, option: str, path: Path) -> None:
    """``folder`` (where ``path`` goes) exists, is a folder, and a file can be created in it."""
    if not folder.is_dir():
        if folder.exists():
            raise UserError(f"{option} {path}: {folder} is a file, not a folder")
        raise UserError(f"{option} {path}: folder {folder} does not exist (create it first, or choose another path)")
    try:
        # the real test of writability: permission bits say nothing for root, nor for /proc or a
        # read-only mount. TemporaryFile leaves no name behind (O_TMPFILE, or unlinked at once).
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot write in folder {folder} ({exc.strerror or exc})") from None


def check_output_file(path: str | Path, option: str, *, replace: bool = True, refuse: str = "") -> Path:
    """``path`` can be written as a file by the option ``option``: not a folder, in an existing folder
    that can be written. An existing file is replaced only where ``replace`` (the command's rule);
    otherwise it is an error ending in ``refuse`` (what the command does instead)."""
    p = Path(path)
    if p.is_dir():
        raise UserError(f"{option} {p}: is a folder; expected a file name")
    if p.exists() or p.is_symlink():
        if not replace:
            raise UserError(f"{option} {p}: file exists; {refuse}")
        if not os.access(p, os.W_OK):
            raise UserError(f"{option} {p}: file exists and cannot be written")
    _check_folder(p.parent, option, p)
    return p


def check_output_folder(path: str | Path, option: str) -> Path:
    """``path`` is a folder that can be written in, or can be created in an existing writable folder."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UserError(f"{option} {p}: is a file; expected a folder")
    _check_folder(p if p.is_dir() else p.parent, option, p)
    return p


class _PlainDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
    """PyYAML writes an object met twice (one date shared by several entries) as an anchor and aliases
    (``&id001`` / ``*id001``); a file people read and edit spells each value out."""

    def ignore_aliases(self, data):
        return True


def dump_yaml(data) -> str:
    """``data`` as the YAML files in this project are written: keys in their order, no aliases, dates as
    dates, text as UTF-8."""
    return yaml.dump(data, Dumper=_PlainDumper, sort_keys=False, allow_unicode=True, width=110)
