"""mkdocs hooks.

* A page under ``docs/`` that ``mkdocs.yml``'s nav does not list joins the "Guide" section (titled by its first
  heading), so a new ``docs/<topic>.md`` is on the site without touching ``mkdocs.yml``; list it there to place it.
* The site's front page is README.md, so the README and the site never disagree. README.md links to the guide as
  ``docs/guide/x.md``; on the site the page sits in ``docs/``, so those links lose the ``docs/`` prefix here.
* Docstrings use Sphinx roles (``:func:`~mxrec.io.opener.RecordReader```), which Sphinx and IDEs understand;
  mkdocstrings shows them as text. Here each becomes a cross-reference that mkdocs-autorefs resolves to its API
  page (``optional``: a name it cannot find stays plain code, without a warning). A name relative to its module
  (``:class:`BatchPipeline```) is completed when exactly one documented object ends with it.
"""

from __future__ import annotations

import html
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parent.parent / "README.md"
ROLE = re.compile(r":(?:class|func|mod|meth|attr|data|exc|obj):<code>([^<]+)</code>")
EXPLICIT = re.compile(r"(?s)(.*?)\s*<([\w.]+)>")
OPTIONAL_REF = re.compile(r'<autoref identifier="([\w.]+)" optional>')


GUIDE = "Guide"


def nav_paths(nav: list) -> list[str]:
    """Every page path in a nav (a list of strings and ``{title: path or list}`` entries)."""
    paths = []
    for entry in nav:
        for item in entry.values() if isinstance(entry, dict) else [entry]:
            paths.extend(nav_paths(item) if isinstance(item, list) else [item])
    return paths


def with_unlisted_pages(nav: list, pages: list[str]) -> list:
    """``nav`` with the ``pages`` it does not list appended to its Guide section (made if missing), in name order."""
    listed = set(nav_paths(nav))
    extra = sorted(page for page in pages if page not in listed)
    if not extra:
        return nav
    for entry in nav:
        if isinstance(entry, dict) and isinstance(entry.get(GUIDE), list):
            entry[GUIDE].extend(extra)
            return nav
    return [*nav, {GUIDE: extra}]


def on_config(config: Any) -> Any:
    docs = Path(config["docs_dir"])
    if config["nav"] is not None:
        pages = [p.relative_to(docs).as_posix() for p in docs.rglob("*.md")]
        config["nav"] = with_unlisted_pages(config["nav"], pages)
    return config


def on_page_read_source(page: Any, config: Any) -> str | None:  # mkdocs calls it for every page
    if page.file.src_uri != "index.md":
        return None
    return re.sub(r"\]\(docs/", "](", README.read_text(encoding="utf-8"))


def _reference(match: re.Match) -> str:
    text = html.unescape(match[1]).strip()
    explicit = EXPLICIT.fullmatch(text)
    if explicit:  # :meth:`title <target>`
        title, target = explicit[1], explicit[2]
    else:
        target = text.lstrip("~")
        title = target.rsplit(".", 1)[-1] if text.startswith("~") else target
    return f'<autoref identifier="{html.escape(target)}" optional><code>{html.escape(title)}</code></autoref>'


def on_page_content(content: str, page: Any, config: Any, files: Any) -> str:
    return ROLE.sub(_reference, content)


def on_env(env: Any, config: Any, files: Any) -> Any:
    """Complete relative names before mkdocs-autorefs (whose ``on_env`` runs later) resolves the references."""
    autorefs = config.plugins.get("autorefs")
    known = set(getattr(autorefs, "_primary_url_map", {}))  # the objects documented (mkdocs-autorefs 1.4)
    by_suffix: dict[str, set[str]] = defaultdict(set)
    for identifier in known:
        parts = identifier.split(".")
        if len(parts) > 2:  # objects in a subpackage; mxrec.X is the same object re-exported
            for start in range(1, len(parts)):
                by_suffix[".".join(parts[start:])].add(identifier)

    def complete(match: re.Match) -> str:
        candidates = by_suffix.get(match[1], set())
        if match[1] in known or len(candidates) != 1:
            return match[0]
        return f'<autoref identifier="{next(iter(candidates))}" optional>'

    for file in files:
        if file.page is not None and file.page.content:
            file.page.content = OPTIONAL_REF.sub(complete, file.page.content)
    return env
