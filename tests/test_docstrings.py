"""Every public name has a numpy-style docstring that matches its signature (numpydoc's validation).

The public names are those in ``mxrec.__all__`` and in each top-level module's or subpackage's ``__all__``
(``mxrec.<name>.__all__``), and the public methods and properties the classes among them define. Each is run
through :func:`numpydoc.validate.validate`; the test fails on the codes in :data:`CHECKED`, and on a
``Raises`` section that names something which is not an exception class, all reported in one message.
A named tuple documents its fields as ``Attributes`` (the docs site's renderer does not take them for
parameters), which must then be its fields.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import inspect
import pkgutil

from numpydoc.docscrape import NumpyDocString
from numpydoc.validate import validate

import mxrec
import mxrec.errors

# being written; emptied when their docstrings land
PENDING = {
    "mxrec.datasets",
    "mxrec.io",
    "mxrec.train",
}
CHECKED = {
    "GL08": "no docstring",
    "PR01": "a parameter is not documented",
    "PR02": "a documented parameter is not in the signature",
    "RT01": "no Returns section although it returns something",
}


def pending(module_name: str) -> bool:
    return any(module_name == name or module_name.startswith(name + ".") for name in PENDING)


def public_modules() -> list:
    """``mxrec`` and its top-level modules and subpackages that are not pending (``__main__`` runs the CLI)."""
    names = [m.name for m in pkgutil.iter_modules(mxrec.__path__) if m.name != "__main__"]
    return [mxrec] + [importlib.import_module(f"mxrec.{name}") for name in names if not pending(f"mxrec.{name}")]


def public_objects() -> dict[str, object]:
    """``{import path: object}`` for every function, class, method and property to check, each once."""
    found: dict[str, object] = {}
    seen: set[int] = set()
    for module in public_modules():
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)) or pending(obj.__module__) or id(obj) in seen:
                continue  # modules and constants have no signature to match
            seen.add(id(obj))
            path = f"{obj.__module__}.{obj.__qualname__}"
            found[path] = obj
            if inspect.isclass(obj):
                for key, member in vars(obj).items():
                    if key.startswith("_"):
                        continue  # __init__'s parameters are checked in the class docstring
                    if isinstance(member, (staticmethod, classmethod)):
                        member = member.__func__
                    if inspect.isfunction(member) or isinstance(member, property):
                        found[f"{path}.{key}"] = member
    return found


def named_tuple_faults(obj: object) -> tuple[list[str], bool]:
    """For a named tuple: the faults of its ``Attributes`` against its fields, and ``True`` (else ``[], False``)."""
    if not (inspect.isclass(obj) and issubclass(obj, tuple) and hasattr(obj, "_fields")):
        return [], False
    documented = [name.strip() for p in NumpyDocString(inspect.getdoc(obj) or "")["Attributes"]
                  for name in p.name.split(",")]
    missing, unknown = set(obj._fields) - set(documented), set(documented) - set(obj._fields)
    return ([f"ATTRIBUTES fields {sorted(missing)} not documented"] if missing else []) + (
        [f"ATTRIBUTES {sorted(unknown)} are not fields"] if unknown else []), True


def unknown_raises(path: str, obj: object) -> list[str]:
    """The names in ``obj``'s ``Raises`` section that are not exception classes."""
    doc = inspect.getdoc(obj)
    if not doc:
        return []
    target = obj.fget if isinstance(obj, property) else obj
    namespace = {**vars(builtins), **vars(mxrec.errors), **vars(inspect.getmodule(target) or mxrec)}
    bad = []
    for param in NumpyDocString(doc)["Raises"]:
        for name in [n.strip() for n in (param.type or param.name).split(",") if n.strip()]:
            obj_ = namespace.get(name)
            if obj_ is None and "." in name:
                module_name, _, attr = name.rpartition(".")
                try:
                    obj_ = getattr(importlib.import_module(module_name), attr, None)
                except ImportError:
                    obj_ = None
            if not (inspect.isclass(obj_) and issubclass(obj_, BaseException)):
                bad.append(name)
    return bad


def test_the_public_api_has_numpy_docstrings_matching_the_signatures():
    objects = public_objects()
    assert len(objects) > 100  # the walk finds the API (a broken walk would pass on nothing)
    failures = []
    for path, obj in sorted(objects.items()):
        result = validate(path)
        fields, named_tuple = named_tuple_faults(obj)
        checked = CHECKED.keys() - ({"PR01", "PR02"} if named_tuple else set())
        failures += [f"{path}: {code} {message}" for code, message in result["errors"] if code in checked]
        failures += [f"{path}: {fault}" for fault in fields]
        failures += [f"{path}: RAISES {name!r} is not an exception class" for name in unknown_raises(path, obj)]
    assert not failures, f"{len(failures)} docstring faults:\n" + "\n".join(failures)


def test_pending_subpackages_exist():
    """A name in PENDING that is not a subpackage (renamed, a typo) would silently skip nothing."""
    for name in PENDING:
        assert importlib.util.find_spec(name) is not None, name
