"""Errors, one way: bad input raises an ``MxrecError`` (also the built-in that callers catch), a missing extra raises
``MissingExtraError`` through one helper, and no module raises a bare built-in error on bad input."""

from __future__ import annotations

import ast
import inspect
import json
import sys
import uuid
from pathlib import Path

import fsspec
import pytest

import mxrec
from mxrec.datasets.opening import open_dataset
from mxrec.datasets.subset import RecordSubset
from mxrec.errors import (
    MissingExtraError,
    MissingFolderError,
    MxrecError,
    OptionError,
    OutputPathError,
    ParameterError,
    RecordPositionError,
    import_extra,
    missing_extra,
)
from mxrec.io.index import build_index
from mxrec.io.opener import RecordReader
from mxrec.io.shards import ShardedWriter, ShardLimit
from mxrec.io.shuffle_window import ShuffleWindow
from mxrec.io.writer import RecordWriter
from mxrec.storage.block_cache import BlockCache, parse_bytes
from testkit.datasets import on_memory_fs

SRC = Path(mxrec.__file__).parent


@pytest.fixture
def rec(tmp_path):
    path = tmp_path / "data.rec"
    with RecordWriter(path, index=True) as writer:
        for i in range(5):
            writer.write(b"record %d" % i, key=i)
    return path


@pytest.fixture
def shards(tmp_path):
    with ShardedWriter(tmp_path / "set.rec", ShardLimit(records=2)) as writer:
        for i in range(5):
            writer.write(b"record %d" % i, key=i)
    return tmp_path / "set.rec"


@pytest.fixture
def remote(rec):
    with on_memory_fs(rec) as url:
        yield url


def _write_batch_mismatch(path):
    with RecordWriter(path / "w.rec") as writer:
        writer.write_batch([b"a", b"b"], keys=[1])


BAD_OPTIONS = {
    "size": lambda tmp: parse_bytes("12 parsecs"),
    "cache sizes": lambda tmp: BlockCache(tmp, max_bytes=10, block_size=100),
    "shuffle window sizes": lambda tmp: ShuffleWindow(0, 4),
    "index keys": lambda tmp: build_index(tmp / "data.rec", keys="names"),
    "write_batch keys": _write_batch_mismatch,
    "IntKeys step": lambda tmp: __import__("mxrec.format.idx", fromlist=["IntKeys"]).IntKeys(range(0, 9, 2)),
    "layout": lambda tmp: __import__("mxrec.format.insightface", fromlist=["x"]).resolve_layout("faces"),
    "dataset kind": lambda tmp: mxrec.verify_dataset(tmp / "data.rec", dataset_kind="photos"),
    "label kind": lambda tmp: __import__("mxrec.doctor.check_labels", fromlist=["x"]).resolve_label_kind([], "x"),
    "no tiles": lambda tmp: __import__("mxrec.doctor.preview", fromlist=["x"]).grid([]),
    "duplicates": lambda tmp: RecordReader(tmp / "data.rec", duplicates="first"),
    "shard set index": lambda tmp: open_dataset(str(tmp / "set.manifest.json"), index=str(tmp / "data.idx")),
}


@pytest.mark.parametrize("name", sorted(BAD_OPTIONS))
def test_bad_options_raise_option_error(rec, shards, name):
    with pytest.raises(OptionError) as info:
        BAD_OPTIONS[name](rec.parent)
    assert isinstance(info.value, MxrecError) and isinstance(info.value, ValueError)


def test_remote_reader_bad_duplicates(remote):
    with pytest.raises(OptionError, match="duplicates"):
        RecordReader(remote, duplicates="first")


def test_empty_integer_range_is_a_parameter_error():
    from mxrec.transforms.rng import SampleRandom

    with pytest.raises(ParameterError, match="empty integer range") as info:
        SampleRandom(1, 2).integers(3, 1)
    assert isinstance(info.value, ValueError)


def test_positions_out_of_range_name_the_file(rec, shards, remote):
    local, far = RecordReader(rec), RecordReader(remote)
    sharded = open_dataset(str(shards.parent / "set.manifest.json"))
    subset = RecordSubset(local, [1, 3])
    attempts = [lambda: local[5], lambda: local.view(-6), lambda: sharded[5], lambda: sharded.read_batch([0, 9]),
                lambda: far.read_batch([7]), lambda: subset[2], lambda: subset.view(-3), lambda: subset.fetch([0, 2]),
                lambda: subset.read_batch([-3])]
    for attempt in attempts:
        with pytest.raises(RecordPositionError, match="out of range") as info:
            attempt()
        assert isinstance(info.value, IndexError) and isinstance(info.value, MxrecError)
    with pytest.raises(RecordPositionError, match=r"data\.rec: record 5 out of range for 5 records"):
        local[5]
    with pytest.raises(RecordPositionError, match=r"data\.rec: record 2 out of range for the 2 records of the subset"):
        subset[2]
    assert list(local) == [b"record %d" % i for i in range(5)]  # iteration still ends where the records do
    assert list(subset) == [b"record 1", b"record 3"] and subset[-1] == b"record 3"


def test_missing_folder_is_an_output_path_error_and_file_not_found():
    error = MissingFolderError("/nowhere: no such folder")
    assert isinstance(error, OutputPathError) and isinstance(error, FileNotFoundError) and isinstance(error, MxrecError)


def test_missing_extra_message_names_the_extra():
    error = missing_extra("plots need matplotlib", "plot", ImportError("No module named 'matplotlib'"))
    assert isinstance(error, MissingExtraError) and isinstance(error, ImportError)
    assert str(error) == "plots need matplotlib: pip install 'mxrec[plot]' (No module named 'matplotlib')"
    assert str(missing_extra("hdfs:// URLs need", "pyarrow (and a local Hadoop client)")) == (
        "hdfs:// URLs need: pyarrow (and a local Hadoop client)")
    assert import_extra("json", "never", "none").dumps(1) == "1"


@pytest.mark.parametrize(("module", "call", "extra"), [
    ("matplotlib", lambda: __import__("mxrec.doctor.stats", fromlist=["x"]).pyplot(), "plot"),
    ("cv2", lambda: __import__("mxrec.image.codec", fromlist=["x"]).opencv(), "image"),
    ("ray.data", lambda: __import__("mxrec.ray.session", fromlist=["x"]).require_ray(), "ray"),
])
def test_every_missing_extra_is_a_missing_extra_error(monkeypatch, module, call, extra):
    if module == "ray.data":
        pytest.importorskip("ray")
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if the package were not installed
    with pytest.raises(MissingExtraError, match=rf"pip install 'mxrec\[{extra}\]'"):
        call()


def test_strict_jpeg_without_simplejpeg(monkeypatch):
    from mxrec.image import codec

    monkeypatch.setattr(codec, "simplejpeg", lambda: None)
    with pytest.raises(MissingExtraError, match=r"simplejpeg: pip install 'mxrec\[image\]'"):
        codec.require_simplejpeg()


def test_torch_without_pytorch_is_a_missing_extra_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.delitem(sys.modules, "mxrec.torch", raising=False)
    with pytest.raises(MissingExtraError, match=r"mxrec.torch needs PyTorch: pip install 'mxrec\[torch\]'"):
        import mxrec.torch  # noqa: F401


def test_remote_url_without_its_backend(monkeypatch):
    from mxrec.storage import filesystem

    def no_backend(url, **options):
        raise ImportError("Install s3fs to access S3")

    monkeypatch.setattr(fsspec.core, "url_to_fs", no_backend)
    monkeypatch.setattr(filesystem, "_filesystems", {})
    with pytest.raises(MissingExtraError, match=r"s3:// URLs needs its fsspec back-end: pip install 'mxrec\[s3\]'"):
        filesystem.filesystem(f"s3://bucket-{uuid.uuid4().hex}/x.rec")


# Built-in errors a module may still raise: protocol signals and programming errors, not reports of bad input.
ALLOWED = {
    "NotImplementedError", "AssertionError", "StopIteration",
    "ArgumentTypeError",  # argparse's way to reject an option value (cli/options.py), reported by the CLI
    "UnpicklingError",  # the restricted unpickler's refusal, turned into VerificationSetError by its caller
}
PROTOCOL = {("io/keys.py", "KeyError"),  # the Mapping protocol: the reader turns it into RecordKeyError
            ("recordio.py", "TypeError"),  # pickle's protocol: an object that cannot be pickled raises TypeError
            # the attribute protocol: a dunder the shim lacks is a plain AttributeError (hasattr, copy, pickle)
            ("compat/mx.py", "AttributeError"), ("compat/ndarray.py", "AttributeError"),
            # a 404 said the way the other back-ends say it, for the request layer to name (RemoteNotFoundError)
            ("storage/backends.py", "FileNotFoundError")}


def test_no_bare_builtin_errors_on_bad_input():
    import mxrec.storage.filesystem

    def family(cls: type) -> set[str]:
        return {cls.__name__}.union(*(family(sub) for sub in cls.__subclasses__()))

    errors = {name for name in dir(mxrec.errors) if isinstance(getattr(mxrec.errors, name), type)}
    errors |= family(mxrec.errors.MxrecError)  # mxrec's errors defined beside the code that raises them
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                func = node.exc.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if (name and name.endswith(("Error", "Exception")) and name not in errors and name not in ALLOWED
                        and (rel, name) not in PROTOCOL and not name[0].islower()):
                    found.append(f"{rel}:{node.lineno}: raise {name}")
    assert found == []


def test_one_broken_record_rule_one_definition():
    from mxrec.train import pipeline

    text = {p.relative_to(SRC).as_posix(): p.read_text() for p in SRC.rglob("*.py")}
    defining = [rel for rel, t in text.items() if "(ImageDecodeError, HeaderError)" in t]
    assert defining == ["train/pipeline.py"]
    assert (mxrec.ImageDecodeError, mxrec.HeaderError) == pipeline.BROKEN_RECORD_ERRORS


def _family(cls: type) -> set[type]:
    return {cls}.union(*(_family(sub) for sub in cls.__subclasses__()))


def _all_errors() -> list[type]:
    """Every mxrec error class: those of :mod:`mxrec.errors`, those exported, and those defined beside their code."""
    import mxrec.storage.faults  # noqa: F401  (defines RemoteError's subclasses)

    return sorted(_family(MxrecError), key=lambda cls: cls.__name__)


def _own_init(cls: type) -> object | None:
    """The ``__init__`` mxrec wrote for ``cls`` (its own or inherited), or ``None`` (the built-in one: a message)."""
    for base in cls.__mro__:
        if base.__module__.startswith("mxrec") and "__init__" in vars(base):
            return vars(base)["__init__"]
    return None


def test_one_name_for_a_bad_option_or_parameter():
    assert OptionError is ParameterError is mxrec.ParameterError
    assert issubclass(ParameterError, ValueError) and issubclass(ParameterError, TypeError)


@pytest.mark.parametrize("cls", _all_errors(), ids=lambda cls: cls.__name__)
def test_every_error_class_has_the_one_constructor_shape(cls):
    """A message alone, or ``(path, reason, *, keywords)``: the file or URL first, then what was wrong (a class whose
    reason is fixed by what it is takes none), anything else by keyword."""
    init = _own_init(cls)
    if init is None:
        assert str(cls("what was wrong")) == "what was wrong"
        return
    params = list(inspect.signature(init).parameters.values())[1:]  # without self
    positional = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert positional[:1] in (["path"], ["url"]) and positional[1:] in ([], ["reason"]), positional
    assert all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params), params
    required = {p.name: 7 for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty}
    error = cls("/data/set.rec", *(["what was wrong"] if len(positional) == 2 else []), **required)
    assert str(error).startswith("/data/set.rec") and isinstance(error, MxrecError)


def test_every_error_is_raised_in_its_shape():
    """Each ``SomeError(...)`` in ``src`` binds to its class's signature: a call in another shape (an older argument
    order) fails here, not when the fault it reports first happens."""
    shaped = {cls.__name__: inspect.signature(_own_init(cls)) for cls in _all_errors() if _own_init(cls)}
    wrong = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name not in shaped or any(isinstance(a, ast.Starred) for a in node.args) or \
                    any(k.arg is None for k in node.keywords):
                continue
            try:
                shaped[name].bind(None, *node.args, **{k.arg: None for k in node.keywords})
            except TypeError as exc:
                wrong.append(f"{path.relative_to(SRC)}:{node.lineno}: {name}: {exc}")
    assert wrong == []


def _bad_mixture(tmp):
    (tmp / "bad.mix.json").write_text(json.dumps({"sources": [], "seed": "x"}))
    return open_dataset(str(tmp / "bad.mix.json"))


def _bad_manifest(tmp):
    (tmp / "set.manifest.json").write_text("{not json")
    return open_dataset(str(tmp / "set.manifest.json"))


def _bad_index(tmp):
    (tmp / "data.idx").write_text("0\tzero\n")
    return open_dataset(str(tmp / "data.rec"))


BAD_OPENS = {
    "index with a shard set": lambda tmp: open_dataset(str(tmp / "set.manifest.json"), index=str(tmp / "data.idx")),
    "cache size": lambda tmp: open_dataset(str(tmp / "data.rec"), cache_dir=tmp / "cache", cache_size="12 parsecs"),
    "request policy": lambda tmp: open_dataset(str(tmp / "data.rec"), requests="attempts=many"),
    "duplicates": lambda tmp: open_dataset(str(tmp / "data.rec"), duplicates="first"),
    "two storages": lambda tmp: open_dataset(str(tmp / "data.rec"), storage={}, storage_options={}),
    "opened twice": lambda tmp: open_dataset(open_dataset(str(tmp / "data.rec")), index=False),
    "mixture file": _bad_mixture,
    "manifest": _bad_manifest,
    "index": _bad_index,
    "no such file": lambda tmp: open_dataset(str(tmp / "nothing.rec")),
}


@pytest.mark.parametrize("name", sorted(BAD_OPENS))
def test_open_dataset_raises_only_what_mxrec_exports(rec, shards, name):
    """What ``open_dataset`` raises on bad input a user can catch by a name ``mxrec`` exports (or a built-in)."""
    with pytest.raises(Exception) as info:  # any class: which one it is, is the point of the test
        BAD_OPENS[name](rec.parent)
    raised = type(info.value)
    assert raised.__module__ == "builtins" or (raised.__name__ in mxrec.__all__ and getattr(mxrec, raised.__name__)
                                               is raised), f"{raised.__module__}.{raised.__name__}: {info.value}"
