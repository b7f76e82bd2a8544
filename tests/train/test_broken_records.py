"""One rule for broken records in every loader: with ``on_broken="skip"`` the next record that decodes takes the
broken one's place (``ImageRecordIter``, ``ImageIter``, ``mxrec.torch``), the record is warned about and counted."""

from __future__ import annotations

import pytest

from mxrec.errors import HeaderError, ImageDecodeError, ParameterError
from mxrec.format.header import IRHeader, pack
from mxrec.train import ImageIter, ImageRecordIter
from mxrec.train.pipeline import BrokenRecordWarning, check_on_broken, load_decodable
from testkit.iterdata import gradient_image, image_record, write_records

# records 0..7: ids 100, 101, broken, 102, 103, broken (too short for a header), 104, 105
EXPECTED_IDS = [100, 101, 102, 102, 103, 104, 104, 105]


@pytest.fixture
def broken(tmp_path):
    payloads = [image_record(gradient_image(16, 16, seed=i), float(100 + i), 100 + i) for i in range(6)]
    payloads.insert(2, pack(IRHeader(0, 9.0, 900, 0), b"not an image"))
    payloads.insert(5, b"short")
    return str(write_records(tmp_path / "broken.rec", payloads))


def test_load_decodable_takes_the_next_record_and_wraps():
    good = {1, 3}

    def load(position):
        if position not in good:
            raise ImageDecodeError("bad")
        return position

    assert load_decodable(1, 4, load, on_broken="skip", describe=str) == (1, [])
    value, skipped = load_decodable(2, 4, load, on_broken="skip", describe=str)
    assert value == 3 and [p for p, _ in skipped] == [2]
    value, skipped = load_decodable(0, 4, load, on_broken="skip", describe=str)
    assert value == 1 and [p for p, _ in skipped] == [0]
    with pytest.raises(ImageDecodeError, match="record 2: bad"):
        load_decodable(2, 4, load, on_broken="error", describe=lambda p: f"record {p}")
    with pytest.raises(ImageDecodeError, match="all 4 are broken"):
        load_decodable(0, 4, lambda p: (_ for _ in ()).throw(HeaderError("short")), on_broken="skip", describe=str)
    with pytest.raises(ParameterError, match="on_broken"):
        check_on_broken("ignore")


@pytest.mark.parametrize("iterator", [ImageRecordIter, ImageIter])
def test_iterators_use_the_next_record(broken, iterator):
    params = dict(path_imgrec=broken, data_shape=(3, 16, 16), batch_size=4)
    if iterator is ImageRecordIter:
        params["preprocess_threads"] = 2
    with iterator(**params) as it, pytest.warns(BrokenRecordWarning, match="the next record is used in its place"):
        batches = list(it)
    assert [b.pad for b in batches] == [0, 0]
    assert [float(x) for b in batches for x in b.label[0].ravel()] == [float(i) for i in EXPECTED_IDS]
    assert len(it.skipped) == 2


def test_torch_uses_the_same_rule(broken):
    pytest.importorskip("torch")
    from mxrec.torch import ImageRecordDataset

    ds = ImageRecordDataset(broken)
    with pytest.warns(BrokenRecordWarning, match="the next record is used in its place"):
        labels = [float(ds[i][1]) for i in range(len(ds))]
    assert labels == [float(i) for i in EXPECTED_IDS] and len(ds.skipped) == 2
    batched = ImageRecordDataset(broken, preprocess=dict(data_shape=(3, 16, 16)))
    with pytest.warns(BrokenRecordWarning):
        _, label = batched.__getitems__(list(range(8)))
    assert label.tolist() == [float(i) for i in EXPECTED_IDS]
