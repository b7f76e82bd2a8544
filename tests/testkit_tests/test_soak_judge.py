"""The soak's judge of a failed output (testkit.soak): leftovers are wrong unless the error names them and no
reader takes them for a whole output."""

from __future__ import annotations

import pytest

from mxrec.errors import ManifestError, RemoteError
from testkit import soak as soak_module

URL = "s3://bucket/out-1/converted.rec"


class _Soak:
    direct = None

    def __init__(self, left: list[str]) -> None:
        self.left = left

    def left_under(self, url: str) -> list[str]:
        return self.left


def _fail(message: str, *notes: str) -> None:
    exc = RemoteError(URL, message)
    for note in notes:
        exc.add_note(note)
    raise exc


def _refused(spec, storage=None):
    raise ManifestError(spec, "an incomplete set")


def test_nothing_left_keeps_the_error(monkeypatch):
    with pytest.raises(RemoteError), soak_module._whole_or_absent(_Soak([]), URL):
        _fail("moving failed")


def test_leftovers_the_error_names_and_readers_refuse_keep_the_error(monkeypatch):
    monkeypatch.setattr(soak_module, "open_dataset", _refused)
    left = ["out-1/converted.manifest.json", "out-1/converted_00000.rec"]
    with pytest.raises(RemoteError), soak_module._whole_or_absent(_Soak(left), URL):
        _fail("moving failed", "cleanup: could not remove s3://bucket/out-1/converted.manifest.json, "
                               "s3://bucket/out-1/converted_00000.rec")


def test_leftovers_the_error_does_not_name_are_wrong(monkeypatch):
    monkeypatch.setattr(soak_module, "open_dataset", _refused)
    with pytest.raises(soak_module.WrongData, match="does not name"), \
            soak_module._whole_or_absent(_Soak(["out-1/converted.manifest.json"]), URL):
        _fail("moving failed")


def test_leftovers_a_reader_takes_as_whole_are_wrong(monkeypatch):
    monkeypatch.setattr(soak_module, "open_dataset", lambda spec, storage=None: object())
    with pytest.raises(soak_module.WrongData, match="opens as a whole dataset"), \
            soak_module._whole_or_absent(_Soak(["out-1/converted.manifest.json"]), URL):
        _fail("moving failed", "cleanup: could not remove s3://bucket/out-1/converted.manifest.json")
