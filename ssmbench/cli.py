"""The ``ssmbench`` command. Each module of ``ssmbench.commands`` (one per subsystem) adds its
subcommands through ``register(subparsers)``; every command returns an exit code. Bad input raises
``UserError``, which becomes one clear message on stderr and exit code 2, never a traceback.

Conventions every command gets from ``Parser`` (subparsers are built with the parent's class, so a new
command gets them without asking): ``--help`` shows each option's default; a subcommand without a
description takes its one-line help as one; a mistyped option, command or choice is answered with the
nearest correct one ("unknown option --hww; did you mean --hw?", exit code 2). Python 3.14's argparse
has ``suggest_on_error``; 3.10 to 3.13 do not, hence ``difflib`` here.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import re
import sys

from . import __version__
from .errors import UserError

COMMAND_MODULES = (
    "ssmbench.commands.specs",
    "ssmbench.commands.ops",
    "ssmbench.commands.measure",
    "ssmbench.commands.predict",
    "ssmbench.commands.plot",
    "ssmbench.commands.calibrate",
    "ssmbench.commands.explore",
    "ssmbench.commands.report",
    "ssmbench.commands.characterize",
    "ssmbench.commands.energy",
)


# A help text that already says what the default is ("(default 4)", "default: from --out's suffix",
# "%(default)s") is left as written, so that no option says it twice.
_STATES_DEFAULT = re.compile(r"\bdefault", re.IGNORECASE)


def _default_text(value) -> str:
    if value is None or value == []:
        return "none"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    return str(value)


class DefaultsFormatter(argparse.HelpFormatter):
    """Appends "(default: X)" to an option's help unless the help states its default already. Flags
    (no value), required options and positionals have no default to show."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (not action.option_strings or action.nargs == 0 or action.required
                or action.default is argparse.SUPPRESS or _STATES_DEFAULT.search(text)):
            return text
        # argparse %-formats the help: a literal % in the default's text must be doubled
        return f"{text} (default: {_default_text(action.default).replace('%', '%%')})"


class RawDescriptionDefaultsFormatter(argparse.RawDescriptionHelpFormatter, DefaultsFormatter):
    """``DefaultsFormatter`` for a command whose description is laid out by hand (kept as written)."""


def _nearest(word: str, candidates) -> str | None:
    """The closest of ``candidates`` to ``word`` (difflib's default cutoff 0.6), or None."""
    close = difflib.get_close_matches(word, [c for c in candidates if isinstance(c, str)], n=1)
    return close[0] if close else None


class _SubParsers(argparse._SubParsersAction):
    """A subcommand without a description shows its one-line help at the top of its ``--help``."""

    def add_parser(self, name, **kwargs):
        if kwargs.get("help") and not kwargs.get("description"):
            kwargs["description"] = kwargs["help"]
        return super().add_parser(name, **kwargs)


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` with the conventions of the module docstring."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", _SubParsers)

    def _check_value(self, action, value) -> None:
        # argparse's own check (a private method, stable from 3.10 to 3.14), plus the nearest choice.
        if action.choices is None or value in action.choices:
            return
        message = f"invalid choice: {value!r}"
        if isinstance(value, str) and (near := _nearest(value, action.choices)):
            message += f"; did you mean {near!r}?"
        raise argparse.ArgumentError(action, message + f" (choose from {', '.join(map(repr, action.choices))})")

    def parse_known_args(self, args=None, namespace=None):
        # kept for error(): the strings this parser (a subcommand: the rest of the line) was given
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            chosen = self._selected(namespace)
            chosen.error(chosen._typo(extras) or f"unrecognized arguments: {' '.join(extras)}")
        return namespace

    def error(self, message: str):
        # A mistyped required option reads as a missing one: name the typo, which is the cause.
        typo = self._typo(getattr(self, "_given", []))
        if typo and message.startswith("the following arguments are required"):
            message = f"{typo} ({message})"
        super().error(message)

    def _selected(self, namespace) -> Parser:
        """The innermost subcommand parser the command line chose: the one whose options a typo meant."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(namespace, action.dest, None))
                if isinstance(chosen, Parser):
                    return chosen._selected(namespace)
        return self

    def _typo(self, strings: list[str]) -> str | None:
        """The message for the first option in ``strings`` this parser does not know (neither exactly nor
        as an abbreviation), with the nearest it does know; None when every option is known."""
        known = list(self._option_string_actions)
        for s in strings:
            if s == "--":
                break
            option = s.split("=", 1)[0]
            if (not option.startswith(tuple(self.prefix_chars)) or len(option) < 2
                    or self._negative_number_matcher.match(option) or any(k.startswith(option) for k in known)):
                continue
            near = _nearest(option, known)
            return f"unknown option {option}" + (f"; did you mean {near}?" if near else
                                                  f"; see `{self.prog} --help` for the options")
        return None


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="ssmbench",
        description=(
            "Roofline model, kernel measurements and calibration for state-space models (S4, Mamba-1/2/3), "
            "attention and hybrids on real GPUs and hypothetical accelerators."
        ),
    )
    parser.add_argument("--version", action="version", version=f"ssmbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"ssmbench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ssmbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
