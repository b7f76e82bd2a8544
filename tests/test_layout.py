"""The house rules: each subpackage (a layer) imports only the layers its ``__init__`` docstring allows.

A subpackage's docstring says ``May import: :mod:`mxrec.a`, :mod:`mxrec.b` ....`` in one sentence;
this test reads that line and checks every ``import`` in the subpackage against it,
so the documented layering and the code cannot drift apart. The top-level
modules beside the subpackages are listed here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import mxrec

PACKAGE = Path(mxrec.__file__).parent
SUBPACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
# Modules beside the subpackages, and what they may import ("*": anything).
TOP_LEVEL = {
    "errors": set(),
    "recordio": {"errors", "format", "storage", "io", "image"},
    "__init__": {"*"},
    "__main__": {"cli"},
    "grain": {"errors", "datasets", "io", "train"},  # mxrec.grain: Grain over mxrec's datasets and decoding
}
SUBPACKAGE_OF = re.compile(r"^mxrec\.(\w+)")


def allowed(subpackage: str) -> set[str]:
    """The subpackages ``subpackage`` may import, from its docstring (or :data:`TOP_LEVEL`)."""
    if subpackage in TOP_LEVEL:
        return TOP_LEVEL[subpackage]
    doc = ast.get_docstring(ast.parse((PACKAGE / subpackage / "__init__.py").read_text())) or ""
    match = re.search(r"May\s+import:(.*?)(?:\.\s|\.\Z|\n\n|\Z)", doc, re.S)  # to the end of that sentence
    assert match, f"mxrec/{subpackage}/__init__.py: the docstring does not say what it may import ('May import:')"
    return set(re.findall(r":mod:`mxrec\.(\w+)`", match.group(1))) | ({"*"} if "anything" in match.group(1) else set())


def imported_subpackages(path: Path) -> set[tuple[str, int]]:
    """``(subpackage, line)`` for every ``mxrec.*`` import in ``path``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] if node.module != "mxrec" else [f"mxrec.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            match = SUBPACKAGE_OF.match(name)
            if match:
                found.add((match.group(1), node.lineno))
    return found


def modules() -> list[tuple[str, Path]]:
    out = [(p.stem, p) for p in PACKAGE.glob("*.py")]
    out += [(subpackage, p) for subpackage in SUBPACKAGES for p in (PACKAGE / subpackage).rglob("*.py")]
    return out


@pytest.mark.parametrize(("subpackage", "path"), modules(),
                         ids=lambda v: str(v.relative_to(PACKAGE)) if isinstance(v, Path) else v)
def test_subpackages_import_only_what_their_docstring_allows(subpackage, path):
    may = allowed(subpackage)
    wrong = [f"line {line}: mxrec.{other}" for other, line in sorted(imported_subpackages(path))
             if other != subpackage and "*" not in may and other not in may]
    assert not wrong, f"{path.relative_to(PACKAGE)} ({subpackage}) may import {sorted(may)}, but imports: {wrong}"


@pytest.mark.parametrize("subpackage", SUBPACKAGES)
def test_every_subpackage_docstring_lists_its_modules(subpackage):
    """A newcomer finds a module from its subpackage's ``__init__``: each is named there (``:mod:`mxrec.x.y```)."""
    doc = ast.get_docstring(ast.parse((PACKAGE / subpackage / "__init__.py").read_text())) or ""
    held = sorted(p.stem for p in (PACKAGE / subpackage).glob("*.py") if p.name != "__init__.py")
    missing = [name for name in held if not re.search(rf"mxrec\.{subpackage}\.{name}\b", doc)]
    assert not missing, f"mxrec/{subpackage}/__init__.py: the docstring does not name {missing}"


def test_every_module_is_in_a_subpackage_or_listed():
    loose = {p.stem for p in PACKAGE.glob("*.py")} - set(TOP_LEVEL)
    assert not loose, f"modules beside the subpackages that belong in one: {sorted(loose)}"


def test_no_subpackage_shadows_a_public_name():
    """``mxrec.pack`` is the function: a subpackage named like a public name would replace it on ``import mxrec``."""
    import types

    modules = [name for name in mxrec.__all__ if isinstance(getattr(mxrec, name), types.ModuleType)]
    assert modules == ["recordio"]
    assert not set(SUBPACKAGES) & set(mxrec.__all__)


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


#: Where the bytes live is asked only here (and ``cli`` may, to parse its arguments).
IO_LAYERS = ("storage", "io", "datasets")
_STRING_TESTS = {"startswith", "endswith", "partition", "rpartition", "split", "rsplit", "find", "rfind", "index",
                 "removeprefix", "count"}

#: ``(file, code)``: strings with ``://`` that are not about where data lives.
NOT_ABOUT_DATA = {
    ("format/manifest.py", '"://" in name'),  # a manifest's shard must be a name inside its folder: input checked
    ("ray/session.py", 'address.split("://", 1)'),  # a Ray cluster's address (ray://HOST:PORT), not data
}


def url_branches(path: Path) -> list[tuple[int, str]]:
    """``(line, code)`` of each place in ``path`` that asks whether a path is remote: ``is_url(...)``,
    ``is_remote``, ``"://" in path``, ``path.startswith("s3://")``, ``path.split("://")`` and the like."""
    text = path.read_text()

    def has_scheme(node: ast.AST) -> bool:
        values = node.elts if isinstance(node, ast.Tuple) else [node]
        return any(isinstance(v, ast.Constant) and isinstance(v.value, str) and "://" in v.value for v in values)

    found = [(n, "is_remote") for n, line in enumerate(text.splitlines(), 1) if "is_remote" in line]
    for node in ast.walk(ast.parse(text)):
        hit = False
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            hit = name in ("is_url", "is_remote") or (name in _STRING_TESTS and isinstance(node.func, ast.Attribute)
                                                      and any(has_scheme(a) for a in node.args))
        elif isinstance(node, ast.Compare):
            hit = any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) and has_scheme(node.left)
        if hit:
            found.append((node.lineno, ast.get_source_segment(text, node)))
    return found


def test_only_the_io_layers_ask_where_data_lives():
    """Where the bytes live is the business of :mod:`mxrec.storage`, :mod:`mxrec.io` and :mod:`mxrec.datasets`:
    consumers read through the :class:`~mxrec.io.records.Records` contract (``fetch``, ``follow``) and use their
    path functions (``join``, ``absolute``, ``shown``, ``image_path``...), which work for a path and a URL alike."""
    found = []
    for p in sorted(PACKAGE.rglob("*.py")):
        rel = p.relative_to(PACKAGE).as_posix()
        if rel.split("/")[0] in IO_LAYERS:
            continue
        found += [f"{rel}:{line}: {code}" for line, code in url_branches(p) if (rel, code) not in NOT_ABOUT_DATA]
    assert not found, f"asking whether data is remote outside {IO_LAYERS}: {found}"


def test_the_url_branch_check_finds_each_way_to_ask(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('if is_url(p) or "://" in p or p.startswith(("s3://", "gs://")) or p.split("://")[0]:\n'
                      '    x = reader.is_remote\n'
                      'print("s3:// or gs:// URLs")\n')  # a message naming schemes is no branch
    assert [line for line, _ in url_branches(sample)] == [2, 1, 1, 1, 1]


def test_no_subpackage_imports_another_subpackages_private_names():
    wrong = []
    for subpackage, path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                match = SUBPACKAGE_OF.match(node.module)
                other = match.group(1) if match else None
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if other and other != subpackage and private:
                    wrong.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.module} {private}")
    assert not wrong, f"private names of another subpackage: {wrong}"


def test_consumers_read_records_through_the_contract():
    """The training subpackages open records through :mod:`mxrec.io` and :mod:`mxrec.datasets`, never through the
    storage internals (ranged reads, block caches, memory maps); files that are not records (image files, an
    atomic output) they may still reach through :mod:`mxrec.storage.filesystem` and :mod:`mxrec.storage.atomic`."""
    internals = ("mxrec.storage.remote_file", "mxrec.storage.block_cache", "mxrec.storage.memory_map")
    wrong = [f"{path.relative_to(PACKAGE)}: {m}" for subpackage, path in modules() if subpackage in ("train", "torch")
             for m in sorted(imported_modules(path)) if m.startswith(internals)]
    assert not wrong, f"storage internals imported by a consumer: {wrong}"
