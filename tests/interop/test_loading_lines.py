"""Each library's usual first lines on what ``mxrec convert`` writes, as a new user of that library types them:
WebDataset's ``WebLoader`` with workers, ``datasets.load_dataset("parquet", data_dir=...)`` and ``data_files=``,
``set_transform`` with PyTorch's default collate, TFRecord globs, ArrayRecord's own reader and Grain's data source;
and the format registry those outputs come from (the CLI help and the docs table).
"""

from __future__ import annotations

import glob
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import mxrec
from mxrec.cli import main
from mxrec.errors import ParameterError
from mxrec.interop import formats
from mxrec.io.opener import RecordReader
from testkit import GOLDEN
from testkit.datasets import write_indexed

SUB = GOLDEN / "im2rec" / "default" / "sub.rec"  # 50 JPEG photos, 10 classes, written by MXNet's im2rec
ROOT = Path(__file__).resolve().parents[2]


def golden() -> list[tuple[str, bytes]]:
    with RecordReader(SUB) as reader:
        return [(str(key), mxrec.unpack(reader[n])[1]) for n, key in enumerate(reader.keys)]


# -- WebDataset -------------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # webdataset leaves its tars open
def test_webloader_with_two_workers_reads_every_sample_once(tmp_path):
    """The default cut gives a small set enough shards for workers x ranks (one tar made WebLoader fail with "No
    samples found in dataset; perhaps you have fewer shards than workers")."""
    wds = pytest.importorskip("webdataset")
    out = mxrec.convert(SUB, tmp_path / "wds", target_format="webdataset")
    assert len(out.files) >= mxrec.interop.job.DEFAULT_SHARDS and not out.notes
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the docs' line: no shardshuffle warning
        dataset = wds.WebDataset(sorted(glob.glob(str(tmp_path / "wds" / "*.tar"))), shardshuffle=False)
    loader = wds.WebLoader(dataset.to_tuple("__key__", "jpg", "cls"), batch_size=None, num_workers=2)
    seen = sorted((str(key), bytes(image), int(label)) for key, image, label in loader)
    expected = golden()
    assert [(k, i) for k, i, _ in seen] == sorted(expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        shuffled = wds.WebDataset(f"{tmp_path}/wds/sub_{{00000..{len(out.files) - 1:05d}}}.tar", shardshuffle=100)
        assert sorted(s["__key__"] for s in shuffled) == sorted(k for k, _ in expected)


def test_a_set_too_small_for_many_workers_says_so(tmp_path, capsys):
    write_indexed(tmp_path / "five.rec", range(5), [mxrec.pack(mxrec.IRHeader(0, n, n, 0), b"x") for n in range(5)])
    out = mxrec.convert(tmp_path / "five.rec", tmp_path / "wds", target_format="webdataset")
    assert len(out.files) == 5 and "5 shard(s), fewer than 16 (the set has 5 records)" in out.notes[0]
    assert main(["convert", str(tmp_path / "five.rec"), str(tmp_path / "again"), "--to", "webdataset",
                 "--no-progress"]) == 0
    assert "note: 5 shard(s)" in capsys.readouterr().err


# -- Hugging Face datasets ----------------------------------------------------------------------------------


def test_load_dataset_data_dir_takes_the_shards_only(tmp_path):
    """The manifest is in .mxrec/ (hidden: data_dir does not take it; it read train.convert.json as Parquet)."""
    datasets = pytest.importorskip("datasets")
    out = mxrec.convert(SUB, tmp_path / "hf", target_format="parquet")
    assert Path(out.manifest).parent.name == ".mxrec" and len(out.files) > 1
    loaded = datasets.load_dataset("parquet", data_dir=str(tmp_path / "hf"), split="train",
                                   cache_dir=str(tmp_path / "cache"))
    assert sorted(zip(loaded["key"], (row["bytes"] for row in loaded.cast_column(
        "image", datasets.Image(decode=False))["image"]), strict=True)) == sorted(golden())
    back = mxrec.convert(tmp_path / "hf", tmp_path / "back.rec")  # mxrec still finds its manifest
    assert back.records == 50 and (tmp_path / "back.rec").read_bytes() == SUB.read_bytes()


def test_one_file_output_takes_the_name_asked_for(tmp_path):
    datasets = pytest.importorskip("datasets")
    out = mxrec.convert(SUB, tmp_path / "data" / "hf" / "train.parquet")  # the README's line
    assert out.files == [str(tmp_path / "data" / "hf" / "train.parquet")]
    loaded = datasets.load_dataset("parquet", data_files=str(tmp_path / "data" / "hf" / "train.parquet"),
                                   split="train", cache_dir=str(tmp_path / "cache"))
    assert len(loaded) == 50


def test_set_transform_with_torch_default_collate(tmp_path):
    """The datasets tutorial's pattern: every column through PyTorch's default collate (a column of nulls,
    ``irheader``, stopped it with "found <class 'NoneType'>")."""
    datasets = pytest.importorskip("datasets")
    torch = pytest.importorskip("torch")
    out = mxrec.convert(SUB, tmp_path / "hf" / "sub.parquet")
    loaded = datasets.load_dataset("parquet", data_files=out.files, split="train", cache_dir=str(tmp_path / "c"))
    assert "irheader" not in loaded.column_names

    def transform(batch):
        batch["image"] = [torch.from_numpy(np.asarray(image.convert("RGB").resize((32, 32)))) for image in
                          batch["image"]]
        return batch

    loaded.set_transform(transform)
    batches = list(torch.utils.data.DataLoader(loaded, batch_size=8))
    assert sum(len(b["label"]) for b in batches) == 50 and batches[0]["image"].shape == (8, 32, 32, 3)


def test_the_header_column_appears_only_when_needed_and_the_round_trip_stays_exact(tmp_path, monkeypatch):
    """A NaN label after some row groups: the column is added to the rows written so far (nulls), once."""
    pq = pytest.importorskip("pyarrow.parquet")
    import struct

    from mxrec.interop import parquet

    monkeypatch.setattr(parquet, "ROW_GROUP_ROWS", 2)
    nan = struct.unpack("<f", struct.pack("<I", 0x7FC01234))[0]
    payloads = [mxrec.pack(mxrec.IRHeader(0, n, n, 0), b"img%d" % n) for n in range(5)]
    payloads.append(struct.pack("<IfQQ", 0, nan, 9, 0) + b"nan label")
    payloads.append(mxrec.pack(mxrec.IRHeader(0, 6, 6, 0), b"after"))
    write_indexed(tmp_path / "odd.rec", range(len(payloads)), payloads)
    out = mxrec.convert(tmp_path / "odd.rec", tmp_path / "pq" / "odd.parquet")
    table = pq.read_table(out.files[0])
    assert pq.ParquetFile(out.files[0]).metadata.num_row_groups == 4
    assert table.column("irheader").to_pylist() == [None] * 5 + [payloads[5][:24], None]
    mxrec.convert(out.files[0], tmp_path / "back.rec")
    assert (tmp_path / "back.rec").read_bytes() == (tmp_path / "odd.rec").read_bytes()
    assert (tmp_path / "back.idx").read_bytes() == (tmp_path / "odd.idx").read_bytes()


# -- TFRecord ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", ["sub_*", "*.tfrecord*"])
def test_tfrecord_globs_take_the_records_only(pattern, tmp_path):
    """DALI's indexes are in .mxrec/ (a glob beside the shards took them as records: "corrupted record at 0")."""
    reader = pytest.importorskip("tfrecord.reader")
    out = mxrec.convert(SUB, tmp_path / "tf", target_format="tfrecord")
    files = sorted(glob.glob(str(tmp_path / "tf" / pattern)))
    assert files == sorted(out.files)
    images = [bytes(e["image/encoded"]) for f in files for e in reader.tfrecord_loader(f, None)]
    assert sorted(images) == sorted(image for _, image in golden())
    indexes = sorted(glob.glob(str(tmp_path / "tf" / ".mxrec" / "*.idx")))
    assert [Path(i).name for i in indexes] == [Path(f).name + ".idx" for f in files]


# -- ArrayRecord ------------------------------------------------------------------------------------------


def test_array_record_both_ways_on_the_command_line_is_exact(tmp_path, capsys):
    pytest.importorskip("array_record")
    rec = tmp_path / "train.rec"
    rec.write_bytes(SUB.read_bytes())
    rec.with_suffix(".idx").write_bytes(SUB.with_suffix(".idx").read_bytes())
    assert main(["convert", str(rec), str(tmp_path / "train.array_record"), "--no-progress"]) == 0
    assert main(["convert", str(tmp_path / "train.array_record"), str(tmp_path / "back.rec"), "--no-progress"]) == 0
    assert "converted 50 records arrayrecord -> recordio" in capsys.readouterr().out
    assert (tmp_path / "back.rec").read_bytes() == SUB.read_bytes()
    assert (tmp_path / "back.idx").read_bytes() == SUB.with_suffix(".idx").read_bytes()


def test_array_record_package_reads_what_mxrec_writes(tmp_path):
    """Its own reader, and Grain's ArrayRecordDataSource on the usual glob; each record a tf.train.Example."""
    module = pytest.importorskip("array_record.python.array_record_module")
    source_module = pytest.importorskip("array_record.python.array_record_data_source")
    example_pb2 = pytest.importorskip("tfrecord.example_pb2")  # an Example definition that is not mxrec's
    out = mxrec.convert(SUB, tmp_path / "ar", target_format="arrayrecord")
    assert len(out.files) >= 16 and sorted(glob.glob(str(tmp_path / "ar" / "*.array_record"))) == out.files
    reader = module.ArrayRecordReader(out.files[0])
    assert reader.writer_options_string().startswith("group_size:1,") and "uncompressed" in (
        reader.writer_options_string())
    reader.close()
    source = source_module.ArrayRecordDataSource(sorted(glob.glob(str(tmp_path / "ar" / "*.array_record"))))
    assert len(source) == 50
    expected = golden()
    for n in (0, 17, 49):  # random access, as Grain reads
        feature = example_pb2.Example.FromString(source[n]).features.feature
        assert feature["mxrec/key"].bytes_list.value[0].decode() == expected[n][0]
        assert feature["image/encoded"].bytes_list.value[0] == expected[n][1]
        assert feature["image/format"].bytes_list.value[0] == b"jpeg"


def test_a_damaged_array_record_file_names_the_file(tmp_path):
    pytest.importorskip("array_record")
    bad = tmp_path / "bad.array_record"
    bad.write_bytes(b"not an array record file" * 10)
    with pytest.raises(mxrec.RecordFormatError, match=r"bad\.array_record: at byte 0: not an ArrayRecord file"):
        mxrec.convert(bad, tmp_path / "x.rec")
    assert not (tmp_path / "x.rec").exists()


# -- the registry -----------------------------------------------------------------------------------------


def test_an_opened_dataset_converts(tmp_path):
    with mxrec.open_dataset(SUB) as opened:
        out = mxrec.convert(opened, tmp_path / "wds", target_format="webdataset", workers=2)  # (pickled to workers)
        with RecordReader(SUB) as fresh:  # the caller's dataset is left open, still read
            assert out.records == 50 and opened[49] == fresh[49]
    mxrec.convert(out.manifest, tmp_path / "back.rec")
    assert (tmp_path / "back.rec").read_bytes() == SUB.read_bytes()


def test_an_opened_shard_set_converts(tmp_path):
    one, two = tmp_path / "one.rec", tmp_path / "two.rec"
    write_indexed(one, range(3), [mxrec.pack(mxrec.IRHeader(0, 0, n, 0), b"one%d" % n) for n in range(3)])
    write_indexed(two, range(3, 5), [mxrec.pack(mxrec.IRHeader(0, 1, n, 0), b"two%d" % n) for n in range(2)])
    with mxrec.open_dataset([one, two]) as shards:
        out = mxrec.convert(shards, tmp_path / "pq" / "both.parquet")
    back = mxrec.convert(out.files[0], tmp_path / "back.rec")
    with RecordReader(tmp_path / "back.rec") as reader:
        assert back.records == 5 and list(reader.keys) == [0, 1, 2, 3, 4]
        assert [mxrec.unpack(reader[n])[1] for n in range(5)] == [b"one0", b"one1", b"one2", b"two0", b"two1"]


def test_a_mixture_converts_with_source_keys(tmp_path):
    one, two = tmp_path / "one.rec", tmp_path / "two.rec"
    write_indexed(one, range(3), [mxrec.pack(mxrec.IRHeader(0, 0, n, 0), b"one%d" % n) for n in range(3)])
    write_indexed(two, range(2), [mxrec.pack(mxrec.IRHeader(0, 1, n, 0), b"two%d" % n) for n in range(2)])
    with mxrec.mix([mxrec.open_dataset(one), mxrec.open_dataset(two)], weights=[3, 2]) as mixture:
        out = mxrec.convert(mixture, tmp_path / "mixed.rec")
        assert out.records == len(mixture) == 5
    with RecordReader(tmp_path / "mixed.rec", key_type=str) as back:
        assert sorted(back.keys) == ["0-0", "0-1", "0-2", "1-0", "1-1"]
        assert sorted(mxrec.unpack(back.read_key(k))[1] for k in back.keys) == [b"one0", b"one1", b"one2",
                                                                                  b"two0", b"two1"]


def test_a_registered_format_is_known_everywhere(tmp_path, monkeypatch):
    """One line makes a format: convert, infer_format, the CLI choices; a wrong one names the problem."""
    monkeypatch.setattr(formats, "known_formats", dict(formats.known_formats))
    with pytest.raises(ParameterError, match="already known"):
        formats.register_format("parquet", "mxrec.interop.parquet")
    formats.register_format("broken", "no_such_package.formats")
    with pytest.raises(ParameterError, match="format 'broken': its module no_such_package.formats cannot be loaded"):
        mxrec.convert(SUB, tmp_path / "x", target_format="broken")
    del formats.known_formats["broken"]
    formats.register_format("tar2", "mxrec.interop.webdataset")
    with pytest.raises(ParameterError, match="declares format 'webdataset', registered as 'tar2'"):
        mxrec.convert(SUB, tmp_path / "x", target_format="tar2")
    with pytest.raises(ParameterError, match="unknown format 'nope': one of recordio, webdataset, parquet, tfrecord, "
                                          "arrayrecord, tar2, folder"):
        mxrec.convert(SUB, tmp_path / "x", target_format="nope")


def test_cli_help_and_docs_table_come_from_the_registry(capsys):
    with pytest.raises(SystemExit):
        main(["convert", "--help"])
    shown = capsys.readouterr().out
    for declared in formats.formats():
        assert declared.name in shown and f"mxrec[{declared.extra}]" in shown
    assert formats.formats_table() in (ROOT / "docs" / "convert.md").read_text()
    assert re.search(r"\| `arrayrecord` \| ArrayRecord", formats.formats_table())


def test_a_remote_array_record_set_converts_back(tmp_path, http_server):
    """The array_record reader opens local paths: a remote file is copied for it (storage.files.local_file)."""
    pytest.importorskip("array_record")
    out = mxrec.convert(SUB, tmp_path / "ar", target_format="arrayrecord", shard_size=30)
    for path in [*out.files, out.manifest]:
        http_server.put(Path(path).relative_to(tmp_path).as_posix(), Path(path).read_bytes())
    mxrec.convert(http_server.url_for("ar/.mxrec/sub.convert.json"), tmp_path / "back.rec")
    assert (tmp_path / "back.rec").read_bytes() == SUB.read_bytes()
    assert (tmp_path / "back.idx").read_bytes() == SUB.with_suffix(".idx").read_bytes()
