"""Every command that writes a file or a folder, given a bad output path, exits 2 with a message naming
the path, no traceback, and writes and replaces nothing.

The commands are found in the parser (``ssmbench.cli.build_parser()``): every subcommand option whose
dest is out / plot / output, so a new command is covered without touching this file. An option with
metavar DIR names a folder; every other one a file. The options allowed to replace an existing file
are listed in REPLACES; any other must refuse it (a new command refuses unless added there).
Required arguments are filled from ARGUMENTS where the command needs a real value, else with a
placeholder: the output check comes before the command reads anything else.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

import ssmbench.cli as cli

REPO = Path(__file__).resolve().parent.parent
OUTPUT_DESTS = ("out", "plot", "output")
# (command, dest) of the options that replace an existing file: derived outputs (reports, figures, CSV)
REPLACES = {("gap", "out"), ("gap", "plot"), ("gap", "energy_plot"), ("energy-fit", "plot"), ("predict", "plot"),
            ("plot", "out"), ("sweep", "out"), ("characterize", "out"), ("characterize", "plot"), ("explore", "out"),
            ("explore", "plot"), ("explore", "front_out"), ("require", "out")}
# real values where a placeholder would not reach the work (a fit, a suite run) if the check were missing
ARGUMENTS = {"suite": "cpu_smoke", "device": "cpu", "limit": "1", "hw": "h200-sxm",
             "results": str(REPO / "results" / "h200" / "2026-12-02" / "calibration-torchref")}
UNWRITABLE = Path("/proc/ssmbench-bad-paths-test")  # /proc takes no new files, even from root


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield prefix + (name,), sub
                yield from _commands(sub, prefix + (name,))


def _output_options():
    found = []
    for path, sub in _commands(cli.build_parser()):
        for a in sub._actions:
            if a.dest in OUTPUT_DESTS and a.option_strings:
                found.append((path, sub, a))
    return found


OPTIONS = _output_options()


def _argv(path: tuple[str, ...], sub: argparse.ArgumentParser, option: argparse.Action, value: str) -> list[str]:
    argv = list(path)
    for a in sub._actions:
        if a is option or isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if not a.option_strings:  # a positional: its first choice, or a placeholder
            argv.append(a.choices[0] if a.choices else "placeholder")
        elif a.dest in ARGUMENTS and a.nargs != 0:
            argv += [a.option_strings[0], ARGUMENTS[a.dest]]
        elif a.required:
            argv += [a.option_strings[0], "placeholder"]
    return argv + [option.option_strings[0], value]


def _suffix(option: argparse.Action) -> str:
    text = (option.help or "") + (option.metavar or "")
    if option.dest == "plot" or ".png" in text:
        return ".png"
    return ".yaml" if ".yaml" in text else ".json"


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in root.rglob("*")}


def test_the_parser_lists_the_known_output_options():
    names = {(" ".join(path), a.dest) for path, _, a in OPTIONS}
    assert names >= {("measure", "out"), ("probe", "out"), ("calibrate", "out"), ("gap", "out"), ("gap", "plot"),
                      ("predict", "plot"), ("plot", "out"), ("sweep", "out")}


def _cases():
    for path, sub, option in OPTIONS:
        folder = option.metavar == "DIR"
        name = "out" if folder else "out" + _suffix(option)
        bad = {"under a file": "afile.txt/" + name, "missing parent": "missing/sub/" + name,
               "unwritable": str(UNWRITABLE / name)}
        if folder:
            bad["an existing file"] = "existing.txt"
        else:
            bad["a folder"] = "adir"
            if (path[-1], option.dest) not in REPLACES:
                bad["an existing file"] = "existing" + _suffix(option)
        for why, rel in bad.items():
            yield pytest.param(path, sub, option, rel, id=f"{' '.join(path)} {option.option_strings[0]}: {why}")


@pytest.mark.parametrize("path, sub, option, rel", list(_cases()))
def test_a_bad_output_path_is_exit_2_naming_it_and_writes_nothing(tmp_path, capsys, path, sub, option, rel):
    (tmp_path / "afile.txt").write_text("a regular file\n")
    (tmp_path / "adir").mkdir()
    (tmp_path / "existing.txt").write_text("keep\n")
    (tmp_path / ("existing" + _suffix(option))).write_text("keep\n")
    target = tmp_path / rel  # an absolute rel (under /proc) stays as it is
    before = _tree(tmp_path)
    try:
        code = cli.main(_argv(path, sub, option, str(target)))
    except SystemExit as exc:  # argparse
        code = exc.code
    except Exception as exc:  # noqa: BLE001 - any other exception is the traceback a user would see
        pytest.fail(f"{' '.join(path)} {option.option_strings[0]} {target}: raised {type(exc).__name__}: {exc}")
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    assert str(target) in err, err
    assert _tree(tmp_path) == before
    assert not UNWRITABLE.exists()
