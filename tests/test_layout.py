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
    "info": {"doctor"},
    "verify": {"doctor"},
    "__init__": {"*"},
    "__main__": {"cli"},
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
