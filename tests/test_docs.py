"""The docs site holds together: the nav lists pages that exist, a new page joins the Guide by itself, every API
block names a subpackage that exists, the README's links lead to pages, and the README keeps the two newcomer commands.
(`mkdocs build --strict`, run by .ci/run, checks the rendering: broken links and malformed docstrings.)"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import mxrec

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PACKAGE = Path(mxrec.__file__).parent
TEST_COMMAND = 'python -m pytest -n 3 -m "not ray" && python -m pytest -m ray'  # the tests, as CI runs them
NEWCOMER_COMMANDS = [
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[image]' && python examples/quickstart.py",
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[image,test]' torch==2.13.0 && " + TEST_COMMAND,
]


def nav_pages() -> list[str]:
    return re.findall(r"^\s*-\s*(?:[^:\n]+:\s*)?([\w./-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)


def hooks():
    spec = importlib.util.spec_from_file_location("mxrec_docs_hooks", DOCS / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_nav_lists_pages_that_exist_once():
    listed = nav_pages()
    assert len(listed) == len(set(listed)) and "guide/format.md" in listed and "api/io.md" in listed
    assert [page for page in listed if not (DOCS / page).is_file()] == []


def test_a_new_page_joins_the_guide_without_a_nav_entry():
    docs = hooks()
    nav = [{"Home": "index.md"}, {"Guide": [{"Format": "guide/format.md"}]}, {"API": ["api/io.md"]}]
    pages = ["index.md", "guide/format.md", "api/io.md", "probe.md", "convert.md"]
    out = docs.with_unlisted_pages(nav, pages)
    assert out[1] == {"Guide": [{"Format": "guide/format.md"}, "convert.md", "probe.md"]}
    assert sorted(docs.nav_paths(out)) == sorted(pages)
    assert docs.with_unlisted_pages([{"Home": "index.md"}], ["index.md", "x.md"]) == [{"Home": "index.md"},
                                                                                          {"Guide": ["x.md"]}]


def test_every_api_block_names_a_module():
    targets = [t for p in DOCS.rglob("*.md") for t in re.findall(r"^::: ([\w.]+)", p.read_text(), re.M)]
    assert "mxrec.io" in targets and "mxrec.recordio" in targets
    for target in targets:
        rel = Path(*target.split(".")[1:])
        assert target == "mxrec" or (PACKAGE / rel / "__init__.py").exists() or (PACKAGE / f"{rel}.py").exists(), (
            target)
    subpackages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert subpackages <= {t.split(".")[1] for t in targets if t.count(".") == 1}, "a subpackage without an API page"


def test_readme_is_the_front_page():
    readme = (ROOT / "README.md").read_text()
    for command in NEWCOMER_COMMANDS:
        assert command in readme
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", readme)
    assert len(links) >= 10
    for link in links:
        assert (ROOT / link).is_file(), link
    assert not re.search(r"\]\((?!docs/|https?://)[^)]+\)", readme), "a README link the site cannot follow"


def test_public_names_the_readme_shows_are_exported():
    readme = (ROOT / "README.md").read_text()
    for name in re.findall(r"`mxrec\.(\w+)", readme):
        assert hasattr(mxrec, name) or (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").exists(), name
    assert not (PACKAGE / "info.py").exists() and not (PACKAGE / "verify.py").exists()


def test_ci_runs_the_readmes_test_command():
    assert TEST_COMMAND in [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
