"""Shared fixtures: a valid spec as plain data, a writer for spec files, and the CLI run in-process."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

SPEC_DIR = Path(__file__).resolve().parent.parent / "hwspecs" / "specs"


@pytest.fixture(scope="session")
def _h200_data() -> dict:
    return yaml.safe_load((SPEC_DIR / "h200-sxm.yaml").read_text(encoding="utf-8"))


@pytest.fixture
def h200_dict(_h200_data) -> dict:
    """The shipped H200 SXM spec (with its measured section) as a fresh dict to mutate."""
    return copy.deepcopy(_h200_data)


@pytest.fixture
def write_spec(tmp_path):
    """Write a dict (as YAML) or raw text to a spec file under tmp_path; return its path as str."""
    def write(content, name: str = "spec.yaml") -> str:
        path = tmp_path / name
        text = content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False)
        path.write_text(text, encoding="utf-8")
        return str(path)
    return write


@pytest.fixture
def run_cli(monkeypatch, capsys):
    """Run ``ssmbench`` in-process with only the hwspecs commands wired in; return (exit code, stdout, stderr).

    Other subsystems' command modules are left out so that these tests do not depend on them.
    """
    import ssmbench.cli as cli

    monkeypatch.setattr(cli, "COMMAND_MODULES", ("ssmbench.commands.specs",))

    def run(*argv: str):
        try:
            code = cli.main(list(argv))
        except SystemExit as exc:  # argparse: --help (0) and usage errors (2)
            code = exc.code
        out, err = capsys.readouterr()
        return code, out, err
    return run
