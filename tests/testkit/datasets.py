"""Small generated image datasets for the dataset-doctor tests: one clean, one with a fault of every kind.

:func:`make_faulty_dataset` writes ``train.rec``/``.idx``/``.lst`` (with an
image folder) and ``val.rec``/``.idx``, and returns where each injected fault
is, so tests can assert that ``verify`` reports exactly those (no misses, no
false alarms). Images are tiny so decoding them all takes milliseconds.
"""

from __future__ import annotations

import contextlib
import shutil
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import fsspec
import numpy as np

from mxrec.format import framing
from mxrec.format.header import IRHeader, pack
from mxrec.format.lst import ListEntry, format_list_line
from mxrec.io.index import write_index
from mxrec.io.lists import write_list
from mxrec.io.writer import RecordWriter

NUM_CLASSES = 7


def photo(seed: int, width: int = 64, height: int = 48, channels: int = 3) -> np.ndarray:
    """A smooth, seed-unique test picture (BGR, or grey for one channel)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    phase = rng.uniform(0, 6.28, 3)
    img = np.stack([127 + 100 * np.sin(x / (5 + c) + y / (7 + seed % 5) + phase[c]) for c in range(3)], -1)
    img = (img + rng.normal(0, 8, img.shape)).clip(0, 255).astype(np.uint8)
    return img[..., 0].copy() if channels == 1 else img


def jpeg(img: np.ndarray, quality: int = 90) -> bytes:
    return cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, quality])[1].tobytes()


def png(img: np.ndarray) -> bytes:
    return cv2.imencode(".png", img)[1].tobytes()


def clean_jpeg(key: int) -> bytes:
    return jpeg(photo(key, 64 + key % 7, 48 + key % 5))


def jpeg_with_aligned_magic(img: np.ndarray) -> bytes:
    """A valid JPEG whose comment segment puts the RecordIO magic at payload offset 32 (after a 24-byte header)."""
    data = jpeg(img)
    comment = b"xx" + framing.MAGIC_BYTES + b"yy"
    return data[:2] + b"\xff\xfe" + (len(comment) + 2).to_bytes(2, "big") + comment + data[2:]


def zero_height_jpeg(img: np.ndarray) -> bytes:
    data = bytearray(jpeg(img))
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 7] = b"\0\0"
    return bytes(data)


def corrupt_scan_jpeg(img: np.ndarray) -> bytes:
    """Headers intact, entropy-coded data damaged (libjpeg: 'Corrupt JPEG data: bad Huffman code')."""
    data = bytearray(jpeg(img))
    sos = data.index(b"\xff\xda")
    data[sos + 20:sos + 60] = b"\xff\x00" * 20
    return bytes(data)


@dataclass
class FaultyDataset:
    """Paths of the generated files and where each injected fault is."""

    rec: Path
    idx: Path
    lst: Path
    root: Path
    val: Path
    offsets: dict = field(default_factory=dict)  # key -> byte offset of its record in rec
    garbage_at: int = 0
    padding_key: int = 0
    lst_lines: dict = field(default_factory=dict)  # name -> line number of an injected .lst fault
    intact_payloads: list = field(default_factory=list)  # payloads of every intact record, in file order


def _record(key: int, label: object, image: bytes) -> bytes:
    if isinstance(label, list):
        return pack(IRHeader(len(label), label, key, 0), image)
    return pack(IRHeader(0, label, key, 0), image)


def make_faulty_dataset(folder: Path) -> FaultyDataset:
    """Write the faulty train set and a val set sharing two of its images; see the tests for what is where."""
    folder.mkdir(parents=True, exist_ok=True)
    root = folder / "images"
    root.mkdir(exist_ok=True)
    records: list[tuple[int, bytes, tuple]] = []  # (key, payload, .lst labels or None)
    for key in range(30):
        records.append((key, _record(key, key % 5, clean_jpeg(key)), (key % 5,)))
    records += [
        (30, _record(30, 0, png(photo(30, 66, 50))), (0,)),
        (31, _record(31, 1, png(photo(31, 62, 49))), (1,)),
        (32, _record(32, 2, jpeg_with_aligned_magic(photo(32))), (2,)),  # multi-part, intact
        (33, _record(33, 3, (lambda d: d[:4] + b"\x00\x01" + d[6:])(jpeg(photo(33)))), (3,)),  # bad APP0 length
        (34, _record(34, 4, corrupt_scan_jpeg(photo(34))), (4,)),
        (35, _record(35, 0, (lambda d: d[:len(d) * 6 // 10])(jpeg(photo(35)))), (0,)),  # truncated JPEG
        (36, _record(36, 1, b""), (1,)),  # empty image
        (37, _record(37, 2, zero_height_jpeg(photo(37))), (2,)),
        (38, b"", None),  # zero-byte record: no header
        (39, b"0123456789", None),  # too short for a header
        (40, _record(40, 9, clean_jpeg(40)), (9,)),  # label >= NUM_CLASSES
        (41, _record(41, -1, clean_jpeg(41)), (-1,)),
        (42, _record(42, 2.5, clean_jpeg(42)), (2.5,)),
        (43, _record(43, 6, clean_jpeg(43)), (6,)),  # valid, but class 5 is then missing
        (44, _record(44, [1, 0], clean_jpeg(44)), (1, 0)),  # label width 2
        (45, _record(45, float("nan"), clean_jpeg(45)), (float("nan"),)),
        (46, _record(46, 3, jpeg(photo(46, channels=1))), (3,)),  # grey among colour
        (47, _record(47, 4, jpeg(photo(47, 8, 8))), (4,)),  # tiny
        (48, _record(48, 0, jpeg(photo(48, 320, 60))), (0,)),  # very wide
        (49, _record(49, 3, clean_jpeg(3)), (3,)),  # duplicate of 3, same label
        (50, _record(50, 1, clean_jpeg(4)), (1,)),  # duplicate of 4, other label
        (51, _record(51, 1, (lambda d: d[:len(d) * 6 // 10])(png(photo(51)))), (1,)),  # truncated PNG
        (52, _record(52, 2, clean_jpeg(52)), (2,)),  # its magic is destroyed below
    ]
    lone_data = b"lone start part of a lost record"
    lone_part = framing.part_header(framing.CFLAG_START, len(lone_data)) + lone_data
    for key in range(54, 58):
        records.append((key, _record(key, key % 5, clean_jpeg(key)), (key % 5,)))

    out = bytearray()
    offsets: dict = {}
    intact = []
    padding_key = None
    for key, payload, _ in records:
        if key == 54:
            offsets[53] = len(out)
            out += lone_part
        offsets[key] = len(out)
        encoded = framing.encode_record(payload)
        if padding_key is None and key < 30 and len(payload) % 4:
            padding_key = key
            encoded = encoded[:-1] + b"\x55"  # non-zero padding byte: a warning, the record is intact
        out += encoded
        if key != 52:
            intact.append(payload)
    out[offsets[52]:offsets[52] + 4] = b"\0\0\0\0"
    garbage_at = len(out)
    out += b"GARBAGE!!!"
    rec = folder / "train.rec"
    rec.write_bytes(bytes(out))

    # .idx: key 7 points 4 bytes into its record, key 8 is missing, key 2 is listed twice,
    # key 500 points past the end; 52 and 53 point at the damaged bytes.
    idx_entries = []
    for key in sorted(offsets):
        if key == 8:
            continue
        idx_entries.append((key, offsets[key] + (4 if key == 7 else 0)))
        if key == 2:
            idx_entries.append((2, offsets[2]))
    idx_entries.append((500, len(out) + 100))
    idx = folder / "train.idx"
    write_index(idx, [k for k, _ in idx_entries], [o for _, o in idx_entries])

    # .lst: a line per record with a header (52 and 53 included: they were packed, then lost), except 6;
    # image files exist for all but key 9; key 11's line has the wrong label; key 12 has two lines;
    # then lines that do not parse and an index with no record.
    lines, lst_lines = [], {}
    for key, _, labels in [*records, (53, b"", (3,))]:
        if labels is None or key == 6:
            continue
        path = f"img_{key}.jpg"
        if key != 9:
            (root / path).write_bytes(b"jpeg bytes")
        if key == 11:
            labels = (3,)
        lines.append(format_list_line(ListEntry(key, labels, path)))
        lst_lines[key] = len(lines)
        if key == 12:
            lines.append(format_list_line(ListEntry(key, labels, path)))
            lst_lines["dup12"] = len(lines)
    for name, text in (("bad_label", "900\tabc\timg_0.jpg\n"), ("empty_label", "901\t\timg_0.jpg\n"),
                       ("no_label", "902\timg_0.jpg\n"), ("no_record", "999\t1.000000\timg_0.jpg\n")):
        lines.append(text)
        lst_lines[name] = len(lines)
    lst = folder / "train.lst"
    lst.write_text("".join(lines))

    # val: images of train keys 10 (same label) and 11 (other label), and two of its own.
    val = folder / "val.rec"
    val_payloads = [_record(0, 0, clean_jpeg(10)), _record(1, 4, clean_jpeg(11)),
                    _record(2, 2, clean_jpeg(1000)), _record(3, 3, clean_jpeg(1001))]
    write_indexed(val, range(4), val_payloads)
    return FaultyDataset(rec, idx, lst, root, val, offsets, garbage_at, padding_key, lst_lines, intact)


def make_clean_dataset(path: Path, count: int = 20, classes: int = 4) -> list[bytes]:
    """A clean indexed dataset (keys = ids = 0..count-1); returns the payloads."""
    payloads = [_record(key, key % classes, clean_jpeg(key)) for key in range(count)]
    write_indexed(path, range(count), payloads)
    return payloads


def make_photo_set(path: Path, count: int, width: int = 160, height: int = 120) -> None:
    """``count`` noisy JPEG photos (about 13 KB at 160x120), keys and ids ``0..count-1``, labels ``key % 5``,
    as ``path`` and its ``.idx``: large enough for the remote tests to span several read-ahead windows."""
    write_indexed(path, range(count), [_record(k, k % 5, jpeg(photo(k, width, height), quality=95))
                                       for k in range(count)])


def write_indexed(rec: Path, keys: Iterable[int], payloads: list[bytes]) -> None:
    """``payloads`` as ``rec`` and the ``.idx`` beside it, listed under ``keys``."""
    with RecordWriter(rec, index=True) as writer:
        writer.write_batch(payloads, list(keys))


def random_payloads(count: int, size: int, seed: int) -> list[bytes]:
    """``count`` payloads of ``size`` random bytes (deterministic for ``seed``)."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, size, dtype=np.uint8).tobytes() for _ in range(count)]


def upload_indexed(server: Any, bucket: str, rec: Path, name: str = "train.rec") -> str:
    """Put ``rec`` and its ``.idx`` into ``bucket`` on the S3 test server; clear its request log; the URL."""
    server.put_object(bucket, name, rec.read_bytes())
    server.put_object(bucket, name[:-len(".rec")] + ".idx", rec.with_suffix(".idx").read_bytes())
    server.log.clear()
    return f"s3://{bucket}/{name}"


@contextlib.contextmanager
def on_memory_fs(rec: Path) -> Iterator[str]:
    """``rec`` and its ``.idx`` copied to fsspec's ``memory://`` in a folder of their own; yields the URL, removes
    the folder afterwards."""
    fs = fsspec.filesystem("memory")
    folder = f"/t-{uuid.uuid4().hex}"
    fs.pipe_file(f"{folder}/data.rec", rec.read_bytes())
    fs.pipe_file(f"{folder}/data.idx", rec.with_suffix(".idx").read_bytes())
    try:
        yield f"memory://{folder}/data.rec"
    finally:
        fs.rm(folder, recursive=True)


def make_broken_image_set(folder: Path, photos: Path) -> tuple[Path, Path]:
    """``(folder/set.lst, folder/root)``: three good photos of ``photos/camera`` and every kind of bad image
    file (empty, cut, not an image, missing), listed in one .lst with indices 10.. and labels 0.."""
    root = folder / "root"
    root.mkdir()
    good = sorted((photos / "camera").glob("*.jpg"))[:3]
    for path in good:
        shutil.copy(path, root / path.name)
    (root / "empty.jpg").write_bytes(b"")
    (root / "cut.jpg").write_bytes(good[0].read_bytes()[:5000])
    (root / "text.jpg").write_bytes(b"this is not an image")
    names = [good[0].name, "empty.jpg", good[1].name, "cut.jpg", "missing.jpg", "text.jpg", good[2].name]
    write_list(folder / "set.lst", [ListEntry(10 + i, (float(i),), n) for i, n in enumerate(names)])
    return folder / "set.lst", root
