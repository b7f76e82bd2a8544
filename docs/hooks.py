"""mkdocs hooks.

* The site's front page is README.md, so the README and the site never disagree. README.md links to the guide as
  ``docs/guide/x.md``; on the site the page sits in ``docs/``, so those links lose the ``docs/`` prefix here.
* Docstrings use Sphinx roles (``:class:`~mxrec.io.reader.RecordReader```), which Sphinx and IDEs understand;
  mkdocstrings shows them as text. Here each becomes a cross-reference that mkdocs-autorefs resolves to its API
  page (``optional``: a name it cannot find stays plain code, without a warning).
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parent.parent / "README.md"
ROLE = re.compile(r":(?:class|func|mod|meth|attr|data|exc|obj):<code>([^<]+)</code>")
EXPLICIT = re.compile(r"(?s)(.*?)\s*<([\w.]+)>")


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
