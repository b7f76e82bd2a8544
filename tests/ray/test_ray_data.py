"""``mxrec.ray`` on a real local Ray cluster: ``read_recordio``, ``write_recordio`` and the ``map_batches`` steps.

Reads are compared with :class:`~mxrec.io.local_reader.RecordReader`, writes byte for byte with files real MXNet
wrote (``tests/data/golden``), the image steps with the local code they wrap.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from mxrec.errors import DuplicateKeyError, MxrecError, ParameterError
from mxrec.format.header import unpack
from mxrec.format.manifest import manifest_path
from mxrec.image.codec import decode_pixels, to_rgb
from mxrec.io.opener import RecordReader
from mxrec.io.shards import ShardLimit, read_manifest
from mxrec.packing.job import pack_list
from mxrec.packing.prepare import ImageTransform
from mxrec.train.record_iter import ImageRecordIter
from testkit.ray_cluster import crash_worker_once

pytestmark = pytest.mark.slow


def reader_rows(rec: Path, key_type: type = int) -> list[tuple]:
    """``(key, flag, label, id, id2, image bytes)`` of every record, as RecordReader gives them."""
    rows = []
    with RecordReader(rec, key_type=key_type) as reader:
        for position, key in enumerate(reader.keys):
            header, body = unpack(reader[position])
            rows.append((key, header.flag, np.asarray(header.label, np.float32).tolist(), header.id, header.id2,
                         body))
    return rows


def set_records(manifest: str | Path) -> list[tuple[object, bytes]]:
    """``(key, payload)`` of every record of a shard set, shard by shard, read with RecordReader."""
    folder = Path(manifest).parent
    out = []
    for shard in read_manifest(manifest).shards:
        with RecordReader(folder / shard.rec, folder / shard.idx) as reader:
            out += list(zip(reader.keys, reader, strict=True))
    return out


def only_label(row: dict) -> float:
    """The one label of a row read with read_recordio's default (every label: a list)."""
    assert len(row["label"]) == 1, row["label"]
    return float(row["label"][0])


def leftovers(folder: Path) -> list[str]:
    """Files and folders a finished write must not leave: staging folders and partial files."""
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".partial") or ".staging-" in p.name)


# ------------------------------------------------------------------------------------------------------ reading

def test_rows_equal_record_reader(mray, im2rec):
    rec = im2rec / "default" / "sub.rec"
    rows = mray.read_recordio(rec, override_num_blocks=3).take_all()
    got = [(r["key"], r["flag"], only_label(r), r["id"], r["id2"], r["data"]) for r in rows]
    assert got == reader_rows(rec)
    assert isinstance(rows[0]["key"], int) and rows[0]["data"][:2] == b"\xff\xd8"


def test_label_width_follows_image_record_iter(mray, im2rec, tmp_path):
    pack_list(im2rec / "packlabel3" / "sub.lst", im2rec / "photos200", tmp_path / "multi.rec", pack_label=True)
    expected = reader_rows(tmp_path / "multi.rec")
    every = mray.read_recordio(tmp_path / "multi.rec").take_all()  # every label, by default
    assert [(r["key"], r["flag"], list(r["label"]), r["data"]) for r in every] == \
        [(k, f, label, body) for k, f, label, _, _, body in expected]
    batch = mray.read_recordio(tmp_path / "multi.rec", label_width=3).take_batch(50)
    assert batch["label"].shape == (50, 3) and batch["label"].dtype == np.float32
    assert batch["label"].tolist() == [label for _, _, label, _, _, _ in expected]
    with pytest.raises(ParameterError, match=r"multi\.rec: record 39 holds 3 label\(s\) but label_width is 1"):
        mray.read_recordio(tmp_path / "multi.rec", label_width=1).take_all()


def test_idx_ranges_give_the_requested_blocks_from_one_file(mray, golden):
    rec = golden / "idx" / "idx.rec"  # 255 records written by MXIndexedRecordIO
    assert len(mray.RecordSource(rec, header=False).get_read_tasks(7)) == 7
    ds = mray.read_recordio(rec, header=False, override_num_blocks=7).materialize()
    assert ds.num_blocks() == 7
    blocks = [batch["key"].tolist() for batch in ds.iter_batches(batch_size=None, batch_format="numpy")]
    assert len(blocks) == 7 and all(blocks)
    assert sorted(key for block in blocks for key in block) == list(range(255))
    assert all(block == list(range(block[0], block[-1] + 1)) for block in blocks)  # each a contiguous range
    assert max(map(len, blocks)) - min(map(len, blocks)) <= 1  # equal records: equal bytes, equal ranges
    with RecordReader(rec) as reader:
        assert [(r["key"], r["data"]) for r in ds.take_all()] == list(zip(reader.keys, reader, strict=True))
    # Fewer records than blocks asked for: one block per record.
    assert mray.read_recordio(golden / "idx" / "ooo.rec", header=False, override_num_blocks=8).materialize() \
        .num_blocks() == 5


def test_count_comes_from_the_index_without_reading_a_record(mray, im2rec, tmp_path):
    for name in ("sub.rec", "sub.idx"):
        shutil.copy(im2rec / "default" / name, tmp_path / name)
    ds = mray.read_recordio(tmp_path / "sub.rec")
    (tmp_path / "sub.rec").write_bytes(b"")  # a read task would now fail
    assert ds.count() == 50


def test_keys_as_written_out_of_order_and_strings(mray, golden):
    ooo = mray.read_recordio(golden / "idx" / "ooo.rec", header=False).take_all()
    with RecordReader(golden / "idx" / "ooo.rec") as reader:
        assert [(r["key"], r["data"]) for r in ooo] == list(zip(reader.keys, reader, strict=True))
    strs = mray.read_recordio(golden / "idx" / "strkeys.rec", header=False, key_type=str).take_all()
    assert [r["key"] for r in strs] == ["img_b", "img_a", "x y"]
    with pytest.raises(DuplicateKeyError, match=r"dupkey\.idx.*key 5 appears again"):
        mray.read_recordio(golden / "idx" / "dupkey.rec", header=False)


def test_shard_sets_by_manifest_name_glob_list_and_folder(mray, im2rec, tmp_path):
    (tmp_path / "set").mkdir()
    result = pack_list(im2rec / "default" / "sub.lst", im2rec / "photos200", tmp_path / "set" / "train.rec",
                       shard_limit=ShardLimit(records=17))
    shards = [Path(rec) for rec, _ in result.outputs]
    assert len(shards) == 3
    expected = [row for shard in shards for row in reader_rows(shard)]
    specs = [result.manifest, tmp_path / "set" / "train.rec", str(tmp_path / "set" / "train_*.rec"), shards,
             tmp_path / "set"]
    for spec in specs:
        ds = mray.read_recordio(spec, override_num_blocks=4)
        assert ds.count() == 50
        got = [(r["key"], r["flag"], only_label(r), r["id"], r["id2"], r["data"]) for r in ds.take_all()]
        assert got == expected, spec
    # A shard without its .idx is read whole and keyed by position; the manifest still gives the count.
    os.unlink(tmp_path / "set" / "train_00001.idx")
    manifest = tmp_path / "set" / "train.manifest.json"
    manifest.write_text(manifest.read_text().replace('"train_00001.idx"', "null").replace(
        '"idx_bytes": ' + str(read_manifest(manifest).shards[1].idx_bytes), '"idx_bytes": null'))
    ds = mray.read_recordio(manifest, override_num_blocks=4)
    assert ds.count() == 50
    rows = ds.take_all()
    assert [r["key"] for r in rows[17:34]] == list(range(17))
    assert [r["data"] for r in rows] == [row[-1] for row in expected]


def test_urls_each_task_fetches_its_own_byte_range(mray, im2rec, golden, s3_server, s3_bucket):
    for name in ("sub.rec", "sub.idx"):
        s3_server.put_object(s3_bucket, f"set/{name}", (im2rec / "default" / name).read_bytes())
    s3_server.put_object(s3_bucket, "seq.rec", (golden / "seq" / "seq.rec").read_bytes())
    options = s3_server.storage_options()
    mark = s3_server.log.mark()
    ds = mray.read_recordio(f"s3://{s3_bucket}/set/sub.rec", storage_options=options, override_num_blocks=4)
    assert ds.count() == 50
    rows = ds.take_all()
    assert [(r["key"], r["flag"], only_label(r), r["id"], r["id2"], r["data"]) for r in rows] == \
        reader_rows(im2rec / "default" / "sub.rec")
    gets = s3_server.log.since(mark, method="GET", key="set/sub.rec")
    assert len(gets) == 4  # one ranged request per read task, nothing read twice
    raw = mray.read_recordio(f"s3://{s3_bucket}/seq.rec", header=False, storage_options=options).take_all()
    with RecordReader(golden / "seq" / "seq.rec") as reader:
        assert [(r["key"], r["data"]) for r in raw] == list(enumerate(reader))


def test_file_without_idx_is_scanned_by_one_task(mray, golden):
    rec = golden / "seq" / "seq.rec"  # edge-case payloads: empty, magic inside (multi-part), 3 MiB
    assert len(mray.RecordSource(rec, header=False).get_read_tasks(4)) == 1
    ds = mray.read_recordio(rec, header=False, override_num_blocks=4)
    with RecordReader(rec) as reader:
        assert reader.index_path is None
        assert [(r["key"], r["data"]) for r in ds.take_all()] == list(enumerate(reader))
    assert [r["key"] for r in mray.read_recordio(rec, header=False, key_type=str).take(3)] == ["0", "1", "2"]


def test_decoded_images(mray, im2rec):
    rec = im2rec / "centercrop_resize64" / "sub.rec"
    expected = [body for *_, body in reader_rows(rec)]
    rows = mray.read_recordio(rec, decode=True).take_all()
    assert "data" not in rows[0] and rows[0]["image"].shape == (64, 64, 3)
    assert all(np.array_equal(r["image"], to_rgb(decode_pixels(b, 3))) for r, b in zip(rows, expected, strict=True))
    grey = mray.read_recordio(rec, decode=True, channels=1).take(1)[0]["image"]
    assert np.array_equal(grey, decode_pixels(expected[0], 1))
    # Images of different sizes in one dataset: a variable-shaped tensor column.
    mixed = mray.read_recordio(im2rec / "default" / "sub.rec", decode=True, bgr=True, override_num_blocks=2)
    images = [r["image"] for r in mixed.take_all()]
    assert len({img.shape for img in images}) > 1
    assert all(np.array_equal(img, decode_pixels(b, 3)) for img, (*_, b) in
               zip(images, reader_rows(im2rec / "default" / "sub.rec"), strict=True))


# ------------------------------------------------------------------------------------------------------ writing

@pytest.mark.parametrize(("folder", "name", "options"), [
    ("im2rec/default", "sub", {}),
    ("idx", "idx", {"header": False}),
    ("idx", "ooo", {"header": False}),
    ("idx", "strkeys", {"header": False, "key_type": str}),
    ("seq", "seq", {"header": False}),
])
def test_one_block_writes_mxnets_files_byte_for_byte(mray, golden, tmp_path, folder, name, options):
    source = golden / folder / f"{name}.rec"
    manifest = mray.write_recordio(mray.read_recordio(source, override_num_blocks=1, **options),
                                   tmp_path / f"{name}.rec")
    with RecordReader(source, key_type=options.get("key_type", int)) as reader:
        assert [(s.rec, s.records) for s in manifest.shards] == [(f"{name}_00000.rec", len(reader))]
    assert (tmp_path / f"{name}_00000.rec").read_bytes() == source.read_bytes()
    if source.with_suffix(".idx").exists():
        assert (tmp_path / f"{name}_00000.idx").read_bytes() == source.with_suffix(".idx").read_bytes()
    assert read_manifest(manifest_path(tmp_path / f"{name}.rec")) == manifest
    assert leftovers(tmp_path) == []


def test_many_blocks_and_shard_size_keep_every_record_in_order(mray, im2rec, tmp_path):
    rec = im2rec / "default" / "sub.rec"
    with RecordReader(rec) as reader:
        expected = list(zip(reader.keys, reader, strict=True))
    ds = mray.read_recordio(rec, override_num_blocks=4)
    manifest = mray.write_recordio(ds, tmp_path / "four.rec")
    assert len(manifest.shards) == 4 and manifest.records == 50
    assert set_records(tmp_path / "four.manifest.json") == expected
    manifest = mray.write_recordio(ds, tmp_path / "capped.rec", shard_size=10)
    assert max(s.records for s in manifest.shards) == 10 and len(manifest.shards) >= 6  # 4 tasks, <= 10 each
    assert set_records(tmp_path / "capped.manifest.json") == expected
    names = {p.name for p in tmp_path.iterdir()}
    assert names == {"four.manifest.json", "capped.manifest.json"} | {
        n for s in read_manifest(tmp_path / "four.manifest.json").shards + read_manifest(
            tmp_path / "capped.manifest.json").shards for n in s.files()}  # (.rec, .idx and checksums)
    assert all(s.checksums is True for s in read_manifest(tmp_path / "capped.manifest.json").shards)


def test_rewriting_a_set_replaces_the_old_one(mray, im2rec, tmp_path):
    ds = mray.read_recordio(im2rec / "default" / "sub.rec", override_num_blocks=5)
    mray.write_recordio(ds, tmp_path / "out.rec")
    mray.write_recordio(ds.limit(20).repartition(2), tmp_path / "out.rec")
    assert sorted(p.name for p in tmp_path.iterdir()) == [  # (the older set's later shards and sidecars gone)
        "out.manifest.json", *(f"out_0000{n}.{ext}" for n in range(2) for ext in ("checksums", "idx", "rec"))]
    assert len(set_records(tmp_path / "out.manifest.json")) == 20


def _crash_on_key(batch: dict, marker: str, key: int) -> dict:
    if key in batch["key"].tolist():
        crash_worker_once(marker)  # the worker dies with this task's first block already written
    return batch


def test_a_killed_write_task_is_retried_and_each_record_written_once(mray, ray_module, im2rec, tmp_path):
    rec = im2rec / "default" / "sub.rec"
    with RecordReader(rec) as reader:
        expected = list(zip(reader.keys, reader, strict=True))
    context = ray_module.data.DataContext.get_current()
    context.target_max_block_size = 200_000  # several blocks per read task: the crash comes mid-task
    marker = tmp_path / "crashed"
    ds = mray.read_recordio(rec, override_num_blocks=2).map_batches(
        _crash_on_key, fn_kwargs={"marker": str(marker), "key": expected[40][0]}, batch_size=None)
    (tmp_path / "out").mkdir()
    manifest = mray.write_recordio(ds, tmp_path / "out" / "set.rec")
    assert marker.exists(), "no worker was killed: the test proves nothing"
    assert manifest.records == 50
    assert set_records(tmp_path / "out" / "set.manifest.json") == expected
    assert leftovers(tmp_path / "out") == []


def _fail_on_key(batch: dict, key: int) -> dict:
    if key in batch["key"].tolist():
        raise ParameterError(f"record {key}: refused")
    return batch


def test_a_failed_write_leaves_nothing(mray, ray_module, im2rec, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    ds = mray.read_recordio(im2rec / "default" / "sub.rec", override_num_blocks=4)
    with pytest.raises(ray_module.exceptions.RayTaskError, match=r"record 7: refused"):
        mray.write_recordio(ds.map_batches(_fail_on_key, fn_kwargs={"key": 7}), out / "set.rec")
    assert list(out.iterdir()) == []
    with pytest.raises(ParameterError, match=r"need a 'data' column"):
        mray.write_recordio(ds.drop_columns(["data"]), out / "set.rec")
    assert list(out.iterdir()) == []


# ------------------------------------------------------------------------------------------------ preprocessing

def test_transform_images_re_encodes_as_im2rec(mray, im2rec, tmp_path):
    """Resizing the pass-through records' original photos on the cluster gives im2rec's --resize 128 bytes."""
    ds = mray.read_recordio(im2rec / "passthrough" / "sub.rec", override_num_blocks=3)
    resized = ds.map_batches(mray.TransformImages(ImageTransform(resize=128, quality=90)), batch_format="pyarrow")
    mray.write_recordio(resized, tmp_path / "resized.rec", shard_size=1000)
    golden = im2rec / "resize128_q90"
    with RecordReader(golden / "sub.rec") as reader:
        assert set_records(tmp_path / "resized.manifest.json") == list(zip(reader.keys, reader, strict=True))


def test_decode_images_step(mray, im2rec):
    rec = im2rec / "resize128_q90" / "sub.rec"
    rows = mray.read_recordio(rec).map_batches(mray.DecodeImages(), batch_size=7).take_all()
    bodies = [body for *_, body in reader_rows(rec)]
    assert [r["key"] for r in rows] == [row[0] for row in reader_rows(rec)]
    assert all(np.array_equal(r["image"], to_rgb(decode_pixels(b, 3))) for r, b in zip(rows, bodies, strict=True))


def test_train_images_equal_image_record_iter(mray, im2rec):
    rec = im2rec / "default" / "sub.rec"
    params = {"resize": 40, "mean_r": 123.0, "mean_g": 117.0, "mean_b": 104.0, "std_r": 58.0, "std_g": 57.0,
              "std_b": 57.5, "mirror": True}
    ds = mray.read_recordio(rec, override_num_blocks=3).map_batches(mray.TrainImages((3, 32, 32), **params),
                                                                    batch_format="pyarrow", batch_size=16)
    batch = ds.take_batch(50)
    with ImageRecordIter(path_imgrec=str(rec), data_shape=(3, 32, 32), batch_size=50, **params) as it:
        expected = next(iter(it))
    assert batch["image"].dtype == np.float32 and batch["image"].shape == (50, 3, 32, 32)
    np.testing.assert_array_equal(batch["image"], expected.data[0])
    np.testing.assert_array_equal(batch["label"], expected.label[0])
    with pytest.raises(ParameterError, match=r"unknown parameter 'rand_crap'.*'rand_crop'"):
        mray.TrainImages((3, 32, 32), rand_crap=True)


def test_random_augmentation_is_reproducible_with_a_seed(mray, im2rec):
    rec = im2rec / "default" / "sub.rec"

    def images(**options: object) -> np.ndarray:
        step = mray.TrainImages((3, 32, 32), resize=40, rand_crop=True, rand_mirror=True, **options)
        return mray.read_recordio(rec, override_num_blocks=2).map_batches(step, batch_format="pyarrow") \
            .take_batch(50)["image"]

    first = images(seed=3)
    assert np.array_equal(first, images(seed=3))
    assert not np.array_equal(first, images(seed=3, epoch=1))
    assert not np.array_equal(images(), images())


@pytest.mark.parametrize(("remainder", "per_rank"), [("drop", 16), ("pad", 17)])
def test_split_for_ranks_feeds_each_rank_equally(mray, im2rec, remainder, per_rank):
    ds = mray.read_recordio(im2rec / "default" / "sub.rec", override_num_blocks=5)
    iterators = mray.split_for_ranks(ds, 3, remainder=remainder)
    seen: list[list[int]] = [[] for _ in iterators]

    def consume(rank: int) -> None:
        for batch in iterators[rank].iter_batches(batch_size=4, batch_format="numpy"):
            seen[rank] += batch["key"].tolist()

    threads = [threading.Thread(target=consume, args=(rank,)) for rank in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert [len(keys) for keys in seen] == [per_rank] * 3
    keys = [k for rank in seen for k in rank]
    with RecordReader(im2rec / "default" / "sub.rec") as reader:
        assert set(keys) <= set(reader.keys)
        if remainder == "pad":
            assert set(keys) == set(reader.keys)  # nobody left out; one record seen twice
        else:
            assert len(set(keys)) == 48
    with pytest.raises(MxrecError, match="remainder must be"):
        mray.split_for_ranks(ds, 2, remainder="wrap")
