"""A griffe extension for the docs site: a class whose docstring is completed at import shows the completed one.

:func:`mxrec.errors.document_parameters` appends ``Parameters`` entries to docstrings when the classes are made
(the error classes, the transforms), so the source holds each description once; griffe reads the source, and this
takes such a class's docstring from the imported class instead.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from griffe import Class, Docstring, Extension


class RuntimeDocstrings(Extension):
    """Use the imported class's ``__doc__`` where it extends the docstring in the source."""

    def on_class_instance(self, *, cls: Class, **kwargs: Any) -> None:
        static = cls.docstring
        if static is None or not cls.path.startswith("mxrec."):
            return
        try:
            module = importlib.import_module(cls.module.path)
        except ImportError:  # a module of an optional extra not installed here: its source docstring stays
            return
        obj: object = module
        for name in cls.path[len(cls.module.path) + 1:].split("."):  # a nested class by its qualified name
            obj = getattr(obj, name, None)
        runtime = inspect.cleandoc(getattr(obj, "__doc__", None) or "")
        if runtime != static.value and runtime.startswith(static.value.rstrip()):
            cls.docstring = Docstring(runtime, lineno=static.lineno, endlineno=static.endlineno, parent=cls,
                                      parser=static.parser, parser_options=static.parser_options)
