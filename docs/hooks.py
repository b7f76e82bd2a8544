"""mkdocs hook: the site's front page is README.md, so the README and the site never disagree.

README.md links to the guide as ``docs/guide/x.md``; on the site the page sits in ``docs/``, so those links lose the
``docs/`` prefix here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parent.parent / "README.md"


def on_page_read_source(page: Any, config: Any) -> str | None:  # mkdocs calls it for every page
    if page.file.src_uri != "index.md":
        return None
    return re.sub(r"\]\(docs/", "](", README.read_text(encoding="utf-8"))
