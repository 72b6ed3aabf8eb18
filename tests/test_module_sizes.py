"""The tree stays readable: no module over 400 lines, and each pytest fixture defined once.

A module past the limit is split by meaning (a package, or helpers beside it that it
re-exports); a fixture two folders need lives in `tests/fixtures/` (or the nearest
conftest they share) and is imported, never defined a second time under the same name
with another meaning or another type.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 400
# Generated, vendored or not ours: migrations are written by makemigrations.
SKIPPED_PARTS = {".venv", "node_modules", "migrations", "var", "static", ".git"}


def python_modules(under: Path = ROOT) -> list[Path]:
    return sorted(path for path in under.rglob("*.py") if not SKIPPED_PARTS & set(path.relative_to(ROOT).parts))


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_is_over_the_limit():
    lines_of = {str(path.relative_to(ROOT)): line_count(path) for path in python_modules()}
    too_long = {path: lines for path, lines in lines_of.items() if lines > MAX_LINES}
    assert too_long == {}


def _is_fixture(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(target, ast.Attribute) and target.attr == "fixture") or (
        isinstance(target, ast.Name) and target.id == "fixture"
    )


def _fixture_name(function: ast.FunctionDef | ast.AsyncFunctionDef, decorator: ast.expr) -> str:
    """The name pytest registers: the function's, or `@pytest.fixture(name=...)`'s."""
    if isinstance(decorator, ast.Call):
        for keyword in decorator.keywords:
            if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                return str(keyword.value.value)
    return function.name


def fixture_definitions(paths: list[Path], *, root: Path = ROOT) -> dict[str, list[str]]:
    """Fixture name -> where each definition of it is (path:line), by AST."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in node.decorator_list:
                    if _is_fixture(decorator):
                        found[_fixture_name(node, decorator)].append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_each_fixture_is_defined_once():
    defined = fixture_definitions(python_modules(ROOT / "tests"))
    assert {name: places for name, places in defined.items() if len(places) > 1} == {}


def test_the_fixture_scan_sees_a_second_definition(tmp_path):
    # A redefinition anywhere (a conftest, a test module, a class body, renamed with name=) is found.
    first, second = tmp_path / "conftest.py", tmp_path / "test_story.py"
    first.write_text("import pytest\n\n@pytest.fixture\ndef treasury():\n    return 'a group'\n")
    second.write_text(
        "from pytest import fixture\n\nclass TestStory:\n    @fixture(name='treasury')\n"
        "    def a_dict(self):\n        return {}\n"
    )
    defined = fixture_definitions([first, second], root=tmp_path)
    assert defined["treasury"] == ["conftest.py:4", "test_story.py:5"]
