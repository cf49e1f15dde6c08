"""CLI-wide conventions (ssmbench/cli.py ``Parser``), checked over every command ``build_parser()``
builds, so that a new command is held to them without a new test: every command and option has a
description, ``--help`` shows each option's default once, and a typo is answered with the nearest
correct name (exit code 2, no traceback)."""

from __future__ import annotations

import argparse
import re

import pytest

import ssmbench.cli as cli


def _parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command path, parser) for the top level and every subcommand, depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                assert helps.get(name), f"command {' '.join(path + (name,))!r} has no help line"
                yield from _parsers(sub, path + (name,))


def _options(parser: argparse.ArgumentParser):
    return [a for a in parser._actions if not isinstance(a, (argparse._SubParsersAction, argparse._HelpAction))]


ALL = list(_parsers(cli.build_parser()))


def test_walk_covers_nested_commands():
    paths = {" ".join(p) for p, _ in ALL}
    assert {"predict", "calibrate", "gap", "measure", "models list", "specs show", "ops list"} <= paths


@pytest.mark.parametrize("path,parser", ALL, ids=[" ".join(p) or "ssmbench" for p, _ in ALL])
def test_every_command_and_option_is_described(path, parser):
    assert parser.description, f"`ssmbench {' '.join(path)} --help` has no description"
    for action in _options(parser):
        name = "/".join(action.option_strings) or action.dest
        assert action.help and action.help.strip(), f"ssmbench {' '.join(path)}: {name} has no help text"


@pytest.mark.parametrize("path,parser", ALL, ids=[" ".join(p) or "ssmbench" for p, _ in ALL])
def test_help_shows_every_default_once(path, parser):
    parser.format_help()  # every help string %-formats (a stray % would raise here)
    formatter = parser._get_formatter()
    for action in _options(parser):
        if not action.option_strings or action.nargs == 0 or action.required:
            continue  # positionals and required options have no default; a flag's is "not given"
        text = formatter._expand_help(action)
        name = "/".join(action.option_strings)
        assert re.search(r"\bdefault", text, re.I), f"ssmbench {' '.join(path)} {name}: no default in {text!r}"
        assert not re.search(r"\bdefault\b.*\(default: ", text, re.I), f"default stated twice: {text!r}"


def test_default_appended_where_the_help_does_not_state_it():
    parser = cli.build_parser()
    text = parser.format_help() + "".join(sub.format_help() for _, sub in ALL)
    flat = " ".join(text.split())  # help is wrapped to the terminal width
    assert "decode only: tokens already in the cache (default: none, then --seqlen is the context)" in flat
    assert "measured (attained) values where present, or the datasheet's (default: measured)" in flat  # appended
    assert "(default mamba2-2.7b)" in text and "(default mamba2-2.7b) (default" not in text  # stated: kept


def _run(capsys, *argv: str):
    with pytest.raises(SystemExit) as exc:
        cli.main(list(argv))
    out, err = capsys.readouterr()
    return exc.value.code, err


@pytest.mark.parametrize("argv,message", [
    (("predict", "--hww", "h200-sxm"), "unknown option --hww; did you mean --hw?"),
    (("predict", "--seqln=128"), "unknown option --seqln; did you mean --seqlen?"),
    (("specs", "list", "--jsn"), "unknown option --jsn; did you mean --json?"),
    (("measure", "--suite", "cpu_smoke", "--out", "x", "--dry-rnu"),
     "unknown option --dry-rnu; did you mean --dry-run?"),
    (("calibrate", "--resuls", "r", "--hw", "h200-sxm", "--out", "p.json"),
     "unknown option --resuls; did you mean --results?"),
    (("predcit",), "invalid choice: 'predcit'; did you mean 'predict'?"),
    (("models", "lsit"), "invalid choice: 'lsit'; did you mean 'list'?"),
    (("predict", "--phase", "prefil"), "invalid choice: 'prefil'; did you mean 'prefill'?"),
    (("--verison",), "unknown option --verison; did you mean --version?"),
])
def test_typo_names_the_nearest(capsys, argv, message):
    code, err = _run(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err


def test_unknown_option_without_a_near_one_points_to_help(capsys):
    code, err = _run(capsys, "predict", "--zzzzzz")
    assert code == 2 and "unknown option --zzzzzz; see `ssmbench predict --help`" in err


def test_abbreviations_and_stray_words_keep_argparse_behaviour(capsys):
    assert cli.build_parser().parse_args(["predict", "--seq", "128"]).seqlen == "128"  # a list option: "128" or "1,2"
    code, err = _run(capsys, "predict", "extra")
    assert code == 2 and "unrecognized arguments: extra" in err
