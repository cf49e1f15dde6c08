"""Import direction: the analytic model and the specs sit at the bottom of the pipeline.

``analytic/`` and ``hwspecs/`` import nothing from measure, calibrate, figures or the CLI (the
``ssmbench.cli`` entry point, the ``ssmbench.commands`` modules, ``ssmbench.output``), at module level
or inside a function; from the front door they may use ``ssmbench.errors``, ``ssmbench.files`` and
``ssmbench.provenance``. Checked twice: by reading every file's imports (relative ones resolved
through pyproject's package-dir mapping), and by importing the packages in a fresh interpreter.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECKED_DIRS = ("analytic", "hwspecs")
FORBIDDEN = ("ssmbench.measure", "ssmbench.calibrate", "ssmbench.figures", "ssmbench.cli",
             "ssmbench.commands", "ssmbench.output")


def _package_dirs() -> dict[str, str]:
    """pyproject's [tool.setuptools.package-dir]: import name -> folder."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the section is flat '"name" = "folder"' lines
        section = text.split("[tool.setuptools.package-dir]", 1)[1].split("\n[", 1)[0]
        return dict(re.findall(r'^"([\w.]+)"\s*=\s*"([^"]+)"', section, re.M))
    return tomllib.loads(text)["tool"]["setuptools"]["package-dir"]


PACKAGE_DIRS = _package_dirs()


def module_name(path: Path) -> str:
    """The import name of a source file, through the deepest package folder that holds it."""
    rel = path.resolve().relative_to(ROOT)
    best = max((d for d in PACKAGE_DIRS.items() if rel.parts[:len(Path(d[1]).parts)] == Path(d[1]).parts),
               key=lambda d: len(Path(d[1]).parts), default=None)
    assert best is not None, f"{rel} is in no package of pyproject's package-dir"
    name, folder = best
    rest = list(rel.with_suffix("").parts[len(Path(folder).parts):])
    if rest and rest[-1] == "__init__":
        rest.pop()
    return ".".join([name, *rest])


def imported_modules(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, absolute module) for every import anywhere in ``source``, relative ones resolved. For
    ``from X import a`` both X and X.a are listed (``a`` may be a submodule); ``importlib.import_module``
    and ``__import__`` with a literal name count as imports."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                assert node.level <= len(parts), f"{module}:{node.lineno}: relative import beyond the top package"
                base = ".".join(parts[:len(parts) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module
            found.append((node.lineno, target))
            found += [(node.lineno, f"{target}.{a.name}") for a in node.names if a.name != "*"]
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("import_module", "__import__")):
            found.append((node.lineno, node.args[0].value))
    return found


def _forbidden(target: str) -> bool:
    return any(target == f or target.startswith(f + ".") for f in FORBIDDEN)


def _files() -> list[Path]:
    return sorted(p for d in CHECKED_DIRS for p in (ROOT / d).rglob("*.py"))


def test_module_names_follow_the_package_dir_mapping():
    assert module_name(ROOT / "analytic" / "workloads" / "report.py") == "ssmbench.analytic.workloads.report"
    assert module_name(ROOT / "analytic" / "ops" / "__init__.py") == "ssmbench.analytic.ops"
    assert module_name(ROOT / "hwspecs" / "units.py") == "ssmbench.hwspecs.units"
    assert module_name(ROOT / "ssmbench" / "cli.py") == "ssmbench.cli"


@pytest.mark.parametrize("source, expected", [
    # the imports the pre-refactor tree had: inside functions, relative, two and three levels up
    ("def f():\n    from ...calibrate.estimate import sum_estimates\n", "ssmbench.calibrate.estimate"),
    ("from ...output import print_json\n", "ssmbench.output"),
    ("from ..output import print_json\n", "ssmbench.analytic.output"),  # two dots: analytic's own module
    ("from ... import figures\n", "ssmbench.figures"),
    ("import ssmbench.measure.sweep as s\n", "ssmbench.measure.sweep"),
    ("from ssmbench import cli\n", "ssmbench.cli"),
    ("import importlib\nimportlib.import_module('ssmbench.commands.predict')\n", "ssmbench.commands.predict"),
])
def test_the_check_sees_every_form_of_import(source, expected):
    found = imported_modules(source, "ssmbench.analytic.workloads.report", is_package=False)
    assert expected in {t for _, t in found}
    assert any(_forbidden(t) for _, t in found) == _forbidden(expected)


@pytest.mark.parametrize("source", ["from ...errors import UserError\n", "from ... import files, provenance\n",
                                    "from ..roofline import SpecTable\n", "import numpy as np\n"])
def test_the_check_allows_the_neutral_modules(source):
    found = imported_modules(source, "ssmbench.analytic.workloads.report", is_package=False)
    assert not any(_forbidden(t) for _, t in found), found


def test_analytic_and_hwspecs_import_nothing_above_them():
    files = _files()
    assert len(files) > 20 and any(p.name == "report.py" for p in files)
    bad = []
    for path in files:
        found = imported_modules(path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py")
        hits: dict[int, str] = {}
        for line, target in found:  # one line per import statement: the module, not each name
            if _forbidden(target) and len(target) < len(hits.get(line, target + " ")):
                hits[line] = target
        bad += [f"{path.relative_to(ROOT)}:{line}: imports {target}" for line, target in sorted(hits.items())]
    assert not bad, "analytic/ and hwspecs/ must not import measure, calibrate, figures or the CLI:\n" + "\n".join(bad)


def _fresh(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_loading_every_op_does_not_import_torch():
    p = _fresh("import ssmbench.analytic, ssmbench.analytic.registry, ssmbench.hwspecs, sys\n"
               "ops = ssmbench.analytic.registry.all_ops()\n"
               "assert len(ops) > 20, sorted(ops)\n"
               "assert 'torch' not in sys.modules, 'torch was imported'\n")
    assert p.returncode == 0, p.stderr


def test_importing_every_analytic_and_hwspecs_module_loads_nothing_above_them():
    names = [module_name(p) for p in _files()]
    p = _fresh("import importlib, sys\n"
               f"for name in {names!r}:\n"
               "    importlib.import_module(name)\n"
               f"loaded = sorted(m for m in sys.modules if m == 'torch' or any(m == f or m.startswith(f + '.') "
               f"for f in {FORBIDDEN!r}))\n"
               "assert not loaded, loaded\n")
    assert p.returncode == 0, p.stderr


def test_the_cli_lists_every_command_module():
    from ssmbench import cli
    modules = {f"ssmbench.commands.{p.stem}" for p in (ROOT / "ssmbench" / "commands").glob("*.py")
               if p.name != "__init__.py"}
    assert set(cli.COMMAND_MODULES) == modules


def test_readme_layout_table_matches_the_tree():
    """Every folder the README's layout table names exists, and every top-level folder is in it."""
    import re

    repo = Path(__file__).resolve().parents[1]
    text = (repo / "README.md").read_text(encoding="utf-8")
    table = text[text.index("## Layout"):]
    listed = set(re.findall(r"^\| `([\w.-]+)/` \|", table, flags=re.M))
    folders = {p.name for p in repo.iterdir() if p.is_dir() and not p.name.startswith(".")
               and not p.name.endswith(".egg-info") and p.name not in ("build", "dist", "venv", "__pycache__")}
    assert listed == folders, (sorted(listed - folders), sorted(folders - listed))
    # the ops packages the table promises: one per family, cost.py beside ref.py
    for family in (repo / "analytic" / "ops").iterdir():
        if (family / "__init__.py").exists() and family.name != "common":
            assert (family / "cost.py").exists() and (family / "ref.py").exists(), family


def test_pyproject_installs_every_package_folder():
    """A package folder missing from pyproject.toml imports from a checkout but is absent from an
    installed wheel: every folder with an ``__init__.py`` under the mapped roots must be listed."""
    import tomllib

    repo = Path(__file__).resolve().parents[1]
    cfg = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    listed, dirs = set(cfg["packages"]), cfg["package-dir"]

    def folder(package: str) -> Path:  # setuptools: the longest mapped prefix, then one folder a level
        prefix = max((n for n in dirs if package == n or package.startswith(n + ".")), key=len)
        return Path(dirs[prefix], *package[len(prefix):].split(".")[1:])

    in_wheel = {folder(n) for n in listed}
    for root in ("ssmbench", "hwspecs", "analytic", "measure", "calibrate", "figures"):
        for init in (repo / root).rglob("__init__.py"):
            rel = init.parent.relative_to(repo)
            assert rel in in_wheel, f"{rel}: a package folder that pyproject.toml's packages list leaves out"
