"""Every command of README.md and docs/*.md that needs no GPU runs, exactly as written, and exits 0.

The commands are the lines of the fenced ```bash blocks (continuation lines joined, comments
stripped). A block whose fence says more than ``bash`` is not run: ```bash gpu needs a GPU machine,
```bash network needs the network (CONTRIBUTING.md, "Before you push"). Each line runs with bash in
a temporary copy of the repository (its tracked files and untracked ones git does not ignore; no
.git, no virtual environment), one after the other (later lines use what earlier ones wrote, e.g.
profile.json), so nothing lands in the checkout; the ssmbench and python of the environment running
the tests come first on PATH.

Two steps are not run: ``pip install ...`` (this environment is already installed, the way the
README says) and ``pytest`` (the test suite is what runs this test).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
NOT_RUN_MARKS = {"gpu", "network"}  # words after ``bash`` in a fence that keep a block from running here
SKIPPED_STEPS = (re.compile(r"^pip install\b"), re.compile(r"^pytest\b"))
FENCE = re.compile(r"^```(.*)$")
COMMENT = re.compile(r"(^|\s)#.*$")  # a '#' that starts a word (no command here has one inside quotes)
TIMEOUT_S = 300


def blocks(text: str) -> list[tuple[str, list[str]]]:
    """(fence info string, lines) of every fenced block."""
    out, info, lines = [], None, []
    for line in text.splitlines():
        m = FENCE.match(line.strip())
        if m and info is None:
            info, lines = m.group(1).strip(), []
        elif m:
            out.append((info, lines))
            info = None
        elif info is not None:
            lines.append(line)
    assert info is None, "a fenced block is not closed"
    return out


def command_lines(lines: list[str]) -> list[str]:
    """The commands of a block: continuation lines joined, comments and blank lines dropped."""
    joined, cur = [], ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        joined.append(cur + line)
        cur = ""
    assert not cur, "a block ends in a continuation line"
    cmds = [COMMENT.sub("", c).strip() for c in joined]
    return [c for c in cmds if c]


def runnable(command: str) -> str | None:
    """The command without its skipped steps (``a && b``), or None when nothing is left to run."""
    steps = [s.strip() for s in command.split("&&")]
    kept = [s for s in steps if not any(p.match(s) for p in SKIPPED_STEPS)]
    return " && ".join(kept) or None


def doc_commands() -> list[tuple[str, str]]:
    """(doc file, command) of every block to run, in document order."""
    found = []
    for doc in DOCS:
        for info, lines in blocks(doc.read_text(encoding="utf-8")):
            words = info.split()
            if not words or words[0] != "bash" or NOT_RUN_MARKS & set(words[1:]):
                continue
            found += [(doc.name, c) for c in command_lines(lines)]
    return found


def _copy_repo(dest: Path) -> None:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():  # a tracked file deleted in the working tree is not copied
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def test_the_extraction_finds_the_readme_commands():
    cmds = [c for _, c in doc_commands()]
    assert "ssmbench predict --plot roofline.png" in [runnable(c) for c in cmds]
    assert any(c.startswith("ssmbench sweep ") and c.endswith("--out sweep.csv") for c in cmds)
    assert not any("pip download" in c for c in cmds)  # docs/gpu_setup.md's network block is not run
    assert command_lines(["a \\", "  b  # note", "# only a comment", ""]) == ["a    b"]
    assert runnable("pip install -e '.[test]' && pytest") is None


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(),
                    reason="copies the repository's files as git lists them")
def test_every_doc_command_without_a_gpu_exits_0(tmp_path):
    work = tmp_path / "repo"
    _copy_repo(work)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "MPLBACKEND": "Agg"}
    failures, took = [], []
    for doc, cmd in doc_commands():
        run = runnable(cmd)
        if run is None:
            continue
        t0 = time.perf_counter()
        r = subprocess.run(["bash", "-c", run], cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
        took.append(f"{time.perf_counter() - t0:6.1f} s  {run}")
        if r.returncode != 0:
            failures.append(f"{doc}: `{run}` exited {r.returncode}:\n{r.stderr[-2000:]}")
    print("\n".join(took))
    assert not failures, "\n\n".join(failures)
    for written in ("roofline.png", "sweep.csv", "crossover.png", "my-ceilings.yaml", "profile.json"):
        assert (work / written).is_file(), written
    assert list((work / "results" / "local").glob("run-*.json"))
