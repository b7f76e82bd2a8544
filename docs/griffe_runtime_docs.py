"""A griffe extension for the docs site: a class or function whose docstring is completed at import shows that one.

:func:`mxrec.errors.document_parameters` writes shared ``Parameters`` entries into docstrings when the objects are
made (the error classes, the transforms, the crops), so the source holds each description once; griffe reads the
source, and this takes such a docstring from the imported object instead.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from griffe import Class, Docstring, Extension, Function


class RuntimeDocstrings(Extension):
    """Use the imported object's ``__doc__`` where it differs from the docstring in the source."""

    def on_class_instance(self, *, cls: Class, **kwargs: Any) -> None:
        self.use_runtime(cls)

    def on_function_instance(self, *, func: Function, **kwargs: Any) -> None:
        self.use_runtime(func)

    @staticmethod
    def use_runtime(node: Class | Function) -> None:
        static = node.docstring
        if static is None or not node.path.startswith("mxrec."):
            return
        try:
            module = importlib.import_module(node.module.path)
        except ImportError:  # a module of an optional extra not installed here: its source docstring stays
            return
        obj: object = module
        for name in node.path[len(node.module.path) + 1:].split("."):  # a method or nested class by its path
            obj = getattr(obj, name, None)
        runtime = inspect.cleandoc(getattr(obj, "__doc__", None) or "")
        if runtime and runtime != static.value:
            node.docstring = Docstring(runtime, lineno=static.lineno, endlineno=static.endlineno, parent=node,
                                      parser=static.parser, parser_options=static.parser_options)
