"""Contact sheets: a grid of a dataset's images, each captioned with its key and label, saved as one image.

A person looking at the sheet sees at a glance whether images and labels
belong together (all cats labelled 3?), which no automatic check can tell.
:func:`contact_sheet` picks records (given keys, or a seeded random sample),
decodes each (:func:`mxrec.image.codec.decode_image`), fits it into a square tile
and writes ``key <k> | <label>`` under it; a record that cannot be read or
decoded gets a tile saying so instead of stopping the sheet.
:func:`write_image` saves the sheet atomically.
"""

from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from mxrec.datasets.face_set import read_face_set
from mxrec.datasets.opening import DatasetSpec, hold_dataset
from mxrec.doctor.html import escape, fragment, image_uri
from mxrec.errors import HeaderError, ImageDecodeError, LayoutError, MxrecError, OptionError
from mxrec.format.header import label_array, unpack
from mxrec.format.idx import KeyType
from mxrec.image.codec import can_encode, decode_image, encode_image, opencv
from mxrec.io.records import Records
from mxrec.storage.atomic import atomic_open
from mxrec.storage.filesystem import check_writable

CAPTION_HEIGHT = 22
GAP = 2
BACKGROUND = (40, 40, 40)
TEXT_COLOUR = (255, 255, 255)
FAULT_COLOUR = (60, 60, 230)  # BGR red


class ContactSheet(NamedTuple):
    """What :func:`contact_sheet` made: the sheet (``uint8`` BGR image) and the keys shown, in order; in
    Jupyter, the sheet itself."""

    image: np.ndarray
    keys: list

    def _repr_html_(self) -> str:
        shown = ", ".join(map(str, self.keys))
        return fragment(f"mxrec preview: {len(self.keys)} record(s)", [
            f"<img src=\"{image_uri(self.image, None, bgr=True, quality=90)}\" alt=\"contact sheet\" "
            f"id=\"sheet\">", f"<p>keys {escape(shown)}</p>"])


def sample_positions(total: int, count: int, seed: int = 0) -> list[int]:
    """``count`` distinct positions out of ``total`` (all of them if fewer), sorted, reproducible for ``seed``."""
    if count >= total:
        return list(range(total))
    return sorted(np.random.default_rng(seed).choice(total, size=count, replace=False).tolist())


def label_text(labels: np.ndarray, limit: int = 4, label_names: dict[int, str] | None = None) -> str:
    """A short caption for a record's label(s): ``7``, ``7 cat`` (with its name) or ``[7, 4, -9.75]``.

    ``...`` stands for the values past ``limit``.
    """
    values = [f"{v:g}" for v in labels.tolist()]
    if len(values) == 1:
        value = float(labels[0])
        name = (label_names or {}).get(int(value)) if value.is_integer() else None
        return values[0] if name is None else f"{values[0]} {name}"
    return "[" + ", ".join(values[:limit]) + (", ..." if len(values) > limit else "") + "]"


def fit_tile(image: np.ndarray, tile: int) -> np.ndarray:
    """``image`` (BGR) scaled to fit a ``tile`` x ``tile`` square, centred on the background."""
    cv2 = opencv()
    out = np.empty((tile, tile, 3), np.uint8)
    out[:] = BACKGROUND
    height, width = image.shape[:2]
    scale = tile / max(height, width)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    scaled = cv2.resize(image, size, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)
    top, left = (tile - size[1]) // 2, (tile - size[0]) // 2
    out[top:top + size[1], left:left + size[0]] = scaled
    return out


def _put_text(canvas: np.ndarray, text: str, origin_y: int, colour: tuple[int, int, int]) -> None:
    """Draw ``text`` left-aligned on ``canvas`` with its baseline at ``origin_y``, shrunk or cut to fit."""
    cv2 = opencv()
    font, width = cv2.FONT_HERSHEY_SIMPLEX, canvas.shape[1] - 6
    scale = 0.45
    while cv2.getTextSize(text, font, scale, 1)[0][0] > width and scale > 0.3:
        scale -= 0.05
    while cv2.getTextSize(text, font, scale, 1)[0][0] > width and len(text) > 4:
        text = text[:-4] + "..."
    cv2.putText(canvas, text, (3, origin_y), font, scale, colour, 1, cv2.LINE_AA)


def record_tile(payload: bytes | None, key: object, tile: int, fault: str | None = None,
                label_names: dict[int, str] | None = None) -> tuple[np.ndarray, str | None]:
    """One captioned tile: the record's image and ``key <k> | <label>``, or what is wrong with the record.

    Returns the tile and the fault drawn on it (``None`` for a sound record).
    """
    canvas = np.empty((tile + CAPTION_HEIGHT, tile, 3), np.uint8)
    canvas[:] = BACKGROUND
    caption = f"key {key}"
    if fault is None and payload is not None:
        try:
            header, image_bytes = unpack(payload)
            caption += f" | {label_text(label_array(header), label_names=label_names)}"
            canvas[:tile] = fit_tile(decode_image(image_bytes, 1, what=f"record {key!r}"), tile)
        except (HeaderError, ImageDecodeError) as exc:
            fault = str(exc)
    if fault is not None:
        lines = textwrap.wrap(fault, width=max(8, tile // 8))[:(tile - 4) // 16]
        for row, line in enumerate(lines):
            _put_text(canvas, line, 18 + 16 * row, FAULT_COLOUR)
    canvas[tile:] = 0
    _put_text(canvas, caption, tile + CAPTION_HEIGHT - 7, TEXT_COLOUR)
    return canvas, fault


def grid(tiles: Sequence[np.ndarray], columns: int | None = None) -> np.ndarray:
    """Tiles of one size laid out row by row, ``columns`` wide (default: a near-square grid)."""
    if not tiles:
        raise OptionError("no tiles to lay out")
    columns = columns or math.ceil(math.sqrt(len(tiles)))
    rows = math.ceil(len(tiles) / columns)
    height, width = tiles[0].shape[:2]
    sheet = np.zeros((rows * (height + GAP) - GAP, columns * (width + GAP) - GAP, 3), np.uint8)
    for i, t in enumerate(tiles):
        top, left = (i // columns) * (height + GAP), (i % columns) * (width + GAP)
        sheet[top:top + height, left:left + width] = t
    return sheet


def sample_records(reader: Records) -> list[int]:
    """The positions a sample is drawn from: every record, or an InsightFace face set's faces only."""
    try:
        faces = read_face_set(reader)
    except LayoutError:  # an inconsistent face set: show what is there (mxrec verify says what is wrong)
        faces = None
    return list(range(len(reader))) if faces is None else faces.positions.tolist()


def contact_sheet(rec_path: DatasetSpec, idx_path: str | os.PathLike | None = None, *,
                  keys: Sequence[object] | None = None, count: int = 16, seed: int = 0, tile: int = 160,
                  columns: int | None = None, key_type: KeyType = int, label_names: dict[int, str] | None = None,
                  on_fault: Callable[[object, str], None] | None = None) -> ContactSheet:
    """A contact sheet: records as a grid of tiles, ``"key | label"`` under each (``mxrec preview``).

    The sample is drawn from the samples of the dataset: an InsightFace face
    set's faces (:func:`~mxrec.datasets.face_set.read_face_set`), else every record.

    Parameters
    ----------
    rec_path
        The dataset: a path, URL, shard set or mixture file, or a dataset already opened (read as it is, left
        open).
    idx_path
        Its ``.idx``; default: beside the file.
    keys
        The records to show, by ``.idx`` key (positions when there is no
        ``.idx``); default: ``count`` records sampled with ``seed``.
    count
        How many records to sample.
    seed
        The sample's seed.
    tile
        Tile size in pixels.
    columns
        Tiles per row; default: a near-square grid.
    key_type
        Converts ``.idx`` keys (``int`` or ``str``).
    label_names
        ``{class id: name}`` (a ``.labels`` file): names in the captions.
    on_fault
        Called as ``on_fault(where, reason)`` for each record shown damaged
        (``where``: its key) and for damaged framing stepped over when the file
        is scanned (``where``: ``"byte N"``).

    Returns
    -------
    ContactSheet
        The sheet (``uint8`` BGR image) and the keys shown: ``sheet, keys = contact_sheet(...)``; in Jupyter it
        shows the sheet.

    Raises
    ------
    RecordKeyError
        A key is not in the index.
    """
    with hold_dataset(rec_path, idx_path, key_type, duplicates="last", strict=False) as reader:
        if reader.damage is not None and on_fault is not None:
            on_fault(f"byte {reader.damage.offset}", reader.damage.reason)
        if keys is None:
            samples = sample_records(reader)
            positions = [samples[i] for i in sample_positions(len(samples), count, seed)]
        else:
            positions = [reader.position(k) for k in keys]
        if not positions:
            raise MxrecError(f"{reader.path}: no records to show")
        tiles = []
        try:  # one batch: a remote dataset's records arrive in a few coalesced reads, not one request each
            batch: list = reader.read_batch(positions)
        except ValueError:  # damaged framing under some key: read them one by one to say which
            batch = [None] * len(positions)
        for position, read in zip(positions, batch, strict=True):
            key = reader.keys[position]
            try:
                payload, fault = (reader[position] if read is None else read), None
            except ValueError as exc:  # damaged framing under this key
                payload, fault = None, str(exc)
            image, fault = record_tile(payload, key, tile, fault, label_names)
            tiles.append(image)
            if fault is not None and on_fault is not None:
                on_fault(key, fault)
        return ContactSheet(grid(tiles, columns), [reader.keys[p] for p in positions])


def image_output_format(path: str | os.PathLike) -> str:
    """The image format ``path``'s extension names (none: ``.png``); an error naming the file if OpenCV cannot write it.

    Checked before the sheet is made, so that a wrong name fails at once.
    """
    check_writable(path)
    fmt = os.path.splitext(os.fspath(path))[1].lower() or ".png"
    if not can_encode(fmt):
        raise MxrecError(f"{os.fspath(path)}: OpenCV cannot write {fmt} images; use .png or .jpg "
                         "(or .bmp, .tif, .webp)")
    return fmt


def write_image(path: str | os.PathLike, image: np.ndarray) -> None:
    """Save ``image`` (BGR) in the format its extension names (``.png`` etc.), atomically."""
    data = encode_image(image, image_output_format(path), quality=95)
    with atomic_open(path, "wb") as f:
        f.write(data)
