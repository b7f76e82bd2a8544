"""The house rules: each room (subpackage) imports only the rooms its ``__init__`` docstring allows.

A room's docstring says ``May import: :mod:`mxrec.a`, :mod:`mxrec.b` ....`` in one sentence;
this test reads that line and checks every ``import`` in the room against it,
so the documented layering and the code cannot drift apart. The top-level
modules beside the rooms are listed here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import mxrec

PACKAGE = Path(mxrec.__file__).parent
ROOMS = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
# Modules beside the rooms, and what they may import ("*": anything).
TOP_LEVEL = {
    "errors": set(),
    "recordio": {"errors", "format", "storage", "io", "image"},
    "__init__": {"*"},
    "__main__": {"cli"},
    "grain": {"errors", "datasets", "io", "train"},  # mxrec.grain: Grain over mxrec's datasets and decoding
}
ROOM_OF = re.compile(r"^mxrec\.(\w+)")


def allowed(room: str) -> set[str]:
    """The rooms ``room`` may import, from its docstring (or :data:`TOP_LEVEL`)."""
    if room in TOP_LEVEL:
        return TOP_LEVEL[room]
    doc = ast.get_docstring(ast.parse((PACKAGE / room / "__init__.py").read_text())) or ""
    match = re.search(r"May\s+import:(.*?)(?:\.\s|\.\Z|\n\n|\Z)", doc, re.S)  # to the end of that sentence
    assert match, f"mxrec/{room}/__init__.py: the docstring does not say what the room may import ('May import:')"
    return set(re.findall(r":mod:`mxrec\.(\w+)`", match.group(1))) | ({"*"} if "anything" in match.group(1) else set())


def imported_rooms(path: Path) -> set[tuple[str, int]]:
    """``(room, line)`` for every ``mxrec.*`` import in ``path``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] if node.module != "mxrec" else [f"mxrec.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            match = ROOM_OF.match(name)
            if match:
                found.add((match.group(1), node.lineno))
    return found


def modules() -> list[tuple[str, Path]]:
    out = [(p.stem, p) for p in PACKAGE.glob("*.py")]
    out += [(room, p) for room in ROOMS for p in (PACKAGE / room).rglob("*.py")]
    return out


@pytest.mark.parametrize(("room", "path"), modules(), ids=lambda v: str(v.relative_to(PACKAGE)) if isinstance(v, Path)
                         else v)
def test_rooms_import_only_what_their_docstring_allows(room, path):
    may = allowed(room)
    wrong = [f"line {line}: mxrec.{other}" for other, line in sorted(imported_rooms(path))
             if other != room and "*" not in may and other not in may]
    assert not wrong, f"{path.relative_to(PACKAGE)} ({room}) may import {sorted(may)}, but imports: {wrong}"


def test_every_module_is_in_a_room_or_listed():
    loose = {p.stem for p in PACKAGE.glob("*.py")} - set(TOP_LEVEL)
    assert not loose, f"modules beside the rooms that belong in one: {sorted(loose)}"


def test_no_room_shadows_a_public_name():
    """``mxrec.pack`` is the function: a room named like a public name would replace it on ``import mxrec``."""
    import types

    modules = [name for name in mxrec.__all__ if isinstance(getattr(mxrec, name), types.ModuleType)]
    assert modules == ["recordio"]
    assert not set(ROOMS) & set(mxrec.__all__)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """The mxrec modules ``path`` imports, anywhere in the file (inside functions too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("mxrec"):
            for alias in node.names:  # ``from mxrec.a import b``: module mxrec.a.b if there is one, else mxrec.a
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in ALL_MODULES else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("mxrec"))
    return found


ALL_MODULES = {module_name(p) for p in PACKAGE.rglob("*.py")}


def test_no_import_circles_between_files():
    """No two files import each other, directly or through others (a circle hides which one is built first).
    Package ``__init__`` modules that only re-export are left out: importing ``mxrec.x.y`` runs them anyway."""
    graph = {module_name(p): {m for m in imported_modules(p) if m in ALL_MODULES}
             for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent.name == "torch"}
    packages = {module_name(p) for p in PACKAGE.rglob("__init__.py") if p.parent.name != "torch"}
    state: dict[str, int] = {}
    circles = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for other in sorted(graph.get(node, ()) - packages):
            if state.get(other) == 1:
                circles.append(" -> ".join([*trail[trail.index(other):], other]))
            elif other not in state:
                visit(other, [*trail, other])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not circles, f"import circles: {circles}"


def test_only_the_io_rooms_ask_whether_data_is_remote():
    """Where the bytes live is the business of :mod:`mxrec.storage`, :mod:`mxrec.io` and :mod:`mxrec.datasets`:
    consumers read through the :class:`~mxrec.io.records.Records` contract (``fetch``, ``follow``)."""
    found = [f"{p.relative_to(PACKAGE)}:{n}" for p in PACKAGE.rglob("*.py")
             if p.relative_to(PACKAGE).parts[0] not in ("storage", "io", "datasets")
             for n, line in enumerate(p.read_text().splitlines(), 1) if "is_remote" in line]
    assert not found, f"is_remote outside the I/O rooms: {found}"


def test_no_room_imports_another_rooms_private_names():
    wrong = []
    for room, path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                match = ROOM_OF.match(node.module)
                other = match.group(1) if match else None
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if other and other != room and private:
                    wrong.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.module} {private}")
    assert not wrong, f"private names of another room: {wrong}"


def test_consumers_read_records_through_the_contract():
    """The training rooms open records through :mod:`mxrec.io` and :mod:`mxrec.datasets`, never through the
    storage internals (ranged reads, block caches, memory maps); files that are not records (image files, an
    atomic output) they may still reach through :mod:`mxrec.storage.filesystem` and :mod:`mxrec.storage.atomic`."""
    internals = ("mxrec.storage.remote_file", "mxrec.storage.block_cache", "mxrec.storage.memory_map")
    wrong = [f"{path.relative_to(PACKAGE)}: {m}" for room, path in modules() if room in ("train", "torch")
             for m in sorted(imported_modules(path)) if m.startswith(internals)]
    assert not wrong, f"storage internals imported by a consumer: {wrong}"
