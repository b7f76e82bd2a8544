"""The shard-set manifest format: round trip, naming, and a clear error for each kind of bad manifest."""

from __future__ import annotations

import json

import pytest

from mxrec.errors import ManifestError
from mxrec.format.manifest import Manifest, ShardEntry, manifest_path, parse_manifest

SET = Manifest((ShardEntry("t_00000.rec", "t_00000.idx", 3, 120, 15), ShardEntry("t_00001.rec", None, 1, 40)))


def test_round_trip_and_totals():
    text = SET.to_json()
    assert parse_manifest(text) == SET and SET.records == 4
    data = json.loads(text)
    assert data["format"] == "mxrec-shards" and data["version"] == 1 and data["records"] == 4
    assert parse_manifest(Manifest(()).to_json()).records == 0


@pytest.mark.parametrize("rec, expected", [
    ("data/train.rec", "data/train.manifest.json"), ("train", "train.manifest.json"),
    ("s3://bucket/a/train.rec", "s3://bucket/a/train.manifest.json"),
])
def test_manifest_sits_beside_the_shards(rec, expected):
    assert manifest_path(rec) == expected


def edited(**changes) -> str:
    data = json.loads(SET.to_json())
    for key, value in changes.items():
        if key.startswith("shard0_"):
            data["shards"][0][key[len("shard0_"):]] = value
        else:
            data[key] = value
    return json.dumps(data)


@pytest.mark.parametrize("text, message", [
    ("{not json", "not JSON"),
    ('{"format": "other"}', "not an mxrec shard manifest"),
    (edited(version=7), "version 7 is not supported"),
    (edited(records=5), '"records" is 5 but the shards hold 4'),
    (edited(shards={}), '"shards" is not a list'),
    (edited(shard0_rec="../outside.rec"), "not a file name inside the manifest's folder"),
    (edited(shard0_rec="/abs.rec"), "not a file name inside the manifest's folder"),
    (edited(shard0_records=-1), "records must be a non-negative integer"),
    (edited(shard0_idx_bytes=None), "idx and idx_bytes must both be given"),
])
def test_bad_manifests_name_the_file_and_the_fault(text, message):
    with pytest.raises(ManifestError, match=message) as caught:
        parse_manifest(text, "d/t.manifest.json")
    assert str(caught.value).startswith("d/t.manifest.json: ")
