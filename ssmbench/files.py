"""Reading the files users hand to the tool (specs, suites, models, results, profiles): one place for
the two rules every reader follows — an unreadable file is a UserError naming the path, and a YAML
mapping with a repeated key is an error, not a silent overwrite. And the one YAML writer for files
people read and edit (a probe's fragment, a new spec)."""

from __future__ import annotations

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


class _PlainDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
    """PyYAML writes an object met twice (one date shared by several entries) as an anchor and aliases
    (``&id001`` / ``*id001``); a file people read and edit spells each value out."""

    def ignore_aliases(self, data):
        return True


def dump_yaml(data) -> str:
    """``data`` as the YAML files in this project are written: keys in their order, no aliases, dates as
    dates, text as UTF-8."""
    return yaml.dump(data, Dumper=_PlainDumper, sort_keys=False, allow_unicode=True, width=110)
