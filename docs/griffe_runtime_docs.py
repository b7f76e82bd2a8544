"""A griffe extension for the docs site: a class whose docstring is completed at import shows the completed one.

``mxrec.errors.MxrecError.__init_subclass__`` writes each error class's ``Parameters`` section from one table, so
the source holds only the summaries; griffe reads source, and this takes those classes' ``__doc__`` from the
imported module instead.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from griffe import Class, Docstring, Extension


class RuntimeDocstrings(Extension):
    """Replace a class's docstring with its runtime ``__doc__`` where the class is an ``mxrec.errors`` one."""

    def on_class_instance(self, *, cls: Class, **kwargs: Any) -> None:
        if cls.module.path != "mxrec.errors" or cls.docstring is None:
            return
        runtime = getattr(importlib.import_module("mxrec.errors"), cls.name, None)
        if runtime is not None and runtime.__doc__:
            cls.docstring = Docstring(inspect.cleandoc(runtime.__doc__), lineno=cls.docstring.lineno,
                                      endlineno=cls.docstring.endlineno, parent=cls,
                                      parser=cls.docstring.parser, parser_options=cls.docstring.parser_options)
