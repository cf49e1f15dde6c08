"""README.md's answer section is what scripts/readme_answer.py computes from the stored H200 data now
(the script writes it; a change of the data, the models or the report that moves a number must come
with the regenerated section)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("readme_answer", REPO / "scripts" / "readme_answer.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_answer_is_up_to_date():
    mod = _script()
    text, fig = mod.section()
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert text in readme, "README.md's answer section is out of date: run python scripts/readme_answer.py"
    assert fig[:8] == b"\x89PNG\r\n\x1a\n" and (REPO / mod.FIGURE).is_file()


def test_replaced_keeps_the_rest_of_the_readme():
    mod = _script()
    readme = f"intro\n{mod.BEGIN}\nold\n{mod.END}\noutro\n"
    assert mod.replaced(readme, f"{mod.BEGIN}\nnew\n{mod.END}") == f"intro\n{mod.BEGIN}\nnew\n{mod.END}\noutro\n"
