"""Layout rules of the Python package: its modules import each other without
circles (imports inside ``if TYPE_CHECKING:`` blocks, which never run, do
not count; imports inside functions do; a module's own parent packages are
imported before it anyway and do not count), and no module is longer than
600 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "evflow"
MAX_LINES = 600


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import that can run, wherever it is."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    files = {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        package = name if is_package else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                bases = [a.name for a in node.names]
                names: list[str] = []
            else:
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                bases = [base]
                names = [a.name for a in node.names]
            for base in bases:
                hit = [f"{base}.{n}" for n in names if f"{base}.{n}" in files]
                if hit:
                    targets.update(hit)
                elif base in files:
                    targets.add(base)
        # A module's own packages are imported before it whatever it says
        # (`from . import _native` names one): not an edge of the graph.
        ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        graph[name] = targets - ancestors - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return [*stack[stack.index(m) :], m]
            if m not in state and (c := visit(m)):
                return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (c := visit(n)):
            return c
    return None


def test_package_modules_form_a_dag() -> None:
    cycle = find_cycle(import_graph(PACKAGE))
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_package_modules_are_short() -> None:
    long = [
        f"{p.relative_to(PACKAGE)} ({n} lines)"
        for p in sorted(PACKAGE.rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    ]
    assert not long, f"modules over {MAX_LINES} lines: {long}"


@pytest.mark.parametrize(
    ("files", "circle"),
    [
        ({"a.py": "from . import b", "b.py": "def f():\n    from .a import x\n"}, True),
        (
            {
                "a.py": "from .b import y",
                "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\n",
            },
            False,
        ),
        (
            {
                "__init__.py": "from .sub import z",
                "sub/__init__.py": "from ._k import z",
                "sub/_k.py": "from ..a import q",
                "a.py": "",
            },
            False,
        ),
        ({"a.py": "import pkg.sub._k", "sub/__init__.py": "", "sub/_k.py": "from ...pkg import a"}, True),
    ],
)
def test_checker_sees_circles(tmp_path: Path, files: dict[str, str], circle: bool) -> None:
    root = tmp_path / "pkg"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "__init__.py").touch()
    assert (find_cycle(import_graph(root)) is not None) == circle
