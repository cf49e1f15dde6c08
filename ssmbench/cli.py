"""The ``ssmbench`` command. Each module of ``ssmbench.commands`` (one per subsystem) adds its
subcommands through ``register(subparsers)``; every command returns an exit code. Bad input raises
``UserError``, which becomes one clear message on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
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
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
