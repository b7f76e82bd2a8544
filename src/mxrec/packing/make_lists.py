"""Making image lists: a folder of images, or a CSV of ``path,label`` rows, turned into ``.lst`` files.

This is ``tools/im2rec.py --list``, reproduced line for line:

* **Walking.** Without ``recursive``, the image files directly in the root,
  in sorted name order, all with label 0. With ``recursive``, ``os.walk``
  (following symbolic links) with directory and file names sorted at each
  level; each directory that holds at least one image gets the next label
  (0, 1, ...) when its first image is met. An image is a regular file whose
  extension, lower-cased, is one of ``exts``. Entries are numbered 0, 1, ...
  in walk order; that number is the ``.lst`` index.
* **Shuffling.** Python's ``random`` seeded with ``seed`` (im2rec: always 100)
  and ``shuffle`` on the whole list, so the same folder gives the same
  ``.lst`` as im2rec, byte for byte.
* **Splitting.** The list is cut into ``chunks`` pieces of
  ``ceil(n / chunks)`` entries (the last shorter). Within a chunk of the
  nominal size ``c``: the first ``int(c * test_ratio)`` entries go to
  ``_test``, the next ``int(c * train_ratio)`` to ``_train``, the rest to
  ``_val`` (written only when ``train_ratio + test_ratio < 1``). With
  ``train_ratio == 1`` the chunk is one plain ``.lst``. Files are named
  ``PREFIX[_CHUNK][_test|_val|_train].lst``.

Differences from im2rec, all where it misbehaves: ``exts`` match
case-insensitively on both sides (im2rec lower-cases only the file's
extension, so ``--exts .JPG`` matched nothing); a symbolic link that loops
back to one of its own ancestors is not followed (im2rec walked forever); a
file name that the ``.lst`` format cannot hold (tab, line break, surrounding
spaces) is an error instead of a corrupt list; and the label of each
directory is saved to ``PREFIX.labels`` (im2rec only printed it).

The label file (``PREFIX.labels``, see :mod:`mxrec.format.lst`) names each
label: the directory relative to the root (``.`` for the root itself), or the
class name of a CSV.

CSV input (:func:`read_labelled_csv`): rows of ``path,label[,label...]``
(comma-separated, or tab-separated for ``.tsv`` files or when the first line
holds a tab), paths relative to the image root. An optional first row whose
first cell is ``path``, ``file``, ``filename`` or ``image`` is a header.
When every label is a number the numbers are used as they are; otherwise
every label is a class name, and the names, sorted, get the labels 0, 1, ...
Rows are numbered 0, 1, ... in file order before shuffling.
"""

from __future__ import annotations

import csv
import os
import posixpath
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mxrec.errors import ListFileError, MxrecError, OptionError, UnsafePathError
from mxrec.format.lst import ListEntry, check_list_path, resolve_list_path
from mxrec.io.lists import label_names_path, write_label_names, write_list
from mxrec.storage.files import walk
from mxrec.storage.filesystem import check_writable, join

DEFAULT_EXTS = (".jpeg", ".jpg", ".png")
DEFAULT_SEED = 100  # the seed im2rec always uses
CSV_HEADER_NAMES = frozenset({"path", "file", "filename", "image"})


@dataclass(frozen=True)
class ImageList:
    """Entries (in ``.lst`` index order) and the name of each label."""

    entries: list[ListEntry]
    label_names: dict[int, str]


# -- walking a folder ------------------------------------------------------

def _is_image(name: str, exts: frozenset[str]) -> bool:
    return os.path.splitext(name)[1].lower() in exts


def _checked_path(relpath: str, where: str) -> str:
    problem = check_list_path(relpath)
    if problem is not None:
        raise ListFileError(where, f"{problem}; rename the file to list it")
    return relpath


def walk_images(root: str | os.PathLike, recursive: bool = False,
                exts: Iterable[str] = DEFAULT_EXTS) -> ImageList:
    """The images under ``root`` (a folder or a URL) with im2rec's indices and labels (not shuffled): in
    ``os.walk``'s order with sorted names, a label per folder holding images (``recursive``), else label 0."""
    root = os.fspath(root)
    wanted = frozenset(ext.lower() for ext in exts)
    entries: list[ListEntry] = []
    labels: dict[str, int] = {}
    for rel in walk(root, recursive):
        if _is_image(rel, wanted):
            label = labels.setdefault(posixpath.dirname(rel) or os.curdir, len(labels)) if recursive else 0
            entries.append(ListEntry(len(entries), (float(label),), _checked_path(rel, join(root, rel))))
    return ImageList(entries, {label: folder for folder, label in labels.items()} if recursive else {0: os.curdir})


# -- shuffling and splitting ---------------------------------------------

def shuffled(entries: Sequence[ListEntry], seed: int = DEFAULT_SEED) -> list[ListEntry]:
    """``entries`` in im2rec's shuffled order (``random.seed(seed); random.shuffle``), without global state."""
    out = list(entries)
    random.Random(seed).shuffle(out)
    return out


def split_list(entries: Sequence[ListEntry], chunks: int = 1, train_ratio: float = 1.0,
               test_ratio: float = 0.0) -> list[tuple[str, list[ListEntry]]]:
    """``(file name suffix, entries)`` for each ``.lst`` im2rec writes, in its order.

    The suffix goes after the prefix: ``""``, ``"_train"``, ``"_1_val"``, ...
    """
    if chunks < 1:
        raise OptionError(f"chunks must be at least 1, not {chunks}")
    for name, ratio in (("train ratio", train_ratio), ("test ratio", test_ratio)):
        if not 0.0 <= ratio <= 1.0:
            raise OptionError(f"{name} must be between 0 and 1, not {ratio}")
    size = (len(entries) + chunks - 1) // chunks
    n_train, n_test = int(size * train_ratio), int(size * test_ratio)
    out = []
    for number in range(chunks):
        chunk = list(entries[number * size:(number + 1) * size])
        stem = f"_{number}" if chunks > 1 else ""
        if train_ratio == 1.0:
            out.append((stem, chunk))
            continue
        if test_ratio:
            out.append((f"{stem}_test", chunk[:n_test]))
        if train_ratio + test_ratio < 1.0:
            out.append((f"{stem}_val", chunk[n_test + n_train:]))
        out.append((f"{stem}_train", chunk[n_test:n_test + n_train]))
    return out


def write_lists(prefix: str | os.PathLike, image_list: ImageList, *, chunks: int = 1,
                train_ratio: float = 1.0, test_ratio: float = 0.0, shuffle: bool = True,
                seed: int = DEFAULT_SEED) -> list[str]:
    """Shuffle (optionally), split and write ``PREFIX*.lst`` and ``PREFIX.labels``; return the paths written.

    The label file is written only when ``image_list`` names its labels.
    """
    prefix = os.fspath(prefix)
    entries = shuffled(image_list.entries, seed) if shuffle else image_list.entries
    written = []
    for suffix, part in split_list(entries, chunks, train_ratio, test_ratio):
        path = f"{prefix}{suffix}.lst"
        write_list(path, part)
        written.append(path)
    if image_list.label_names:
        labels_path = label_names_path(prefix)
        write_label_names(labels_path, image_list.label_names)
        written.append(labels_path)
    return written


def why_no_images(root: str | os.PathLike, recursive: bool, exts: Iterable[str]) -> str:
    """Why a walk of ``root`` found no image, for the user: sub-folders without ``recursive``, other extensions."""
    root = os.fspath(root)
    wanted = " ".join(sorted(ext.lower() for ext in exts))
    if not recursive:
        folders = sum(1 for name in os.listdir(root) if os.path.isdir(os.path.join(root, name)))
        if folders:
            return (f"no {wanted} file directly in {root}, but {folders} sub-folder(s): list them with --recursive "
                    "(recursive=True), one label per folder")
    found: Counter = Counter()
    for _, _, files in os.walk(root, followlinks=True) if recursive else [(root, [], os.listdir(root))]:
        found.update(os.path.splitext(name)[1].lower() or "(none)" for name in files)
    if not found:
        return f"no files at all in {root}: is that the image folder?"
    common = ", ".join(f"{ext} ({n})" for ext, n in found.most_common(5))
    return f"no {wanted} file in {root}; the files there have the extensions {common}: choose them with --exts"


def make_lists(prefix: str | os.PathLike, root: str | os.PathLike, *, recursive: bool = False,
               exts: Iterable[str] = DEFAULT_EXTS, chunks: int = 1, train_ratio: float = 1.0,
               test_ratio: float = 0.0, shuffle: bool = True, seed: int = DEFAULT_SEED) -> list[str]:
    """im2rec's list mode (``mxrec list``): walk ``root`` and write the ``.lst`` files and the label file.

    Parameters
    ----------
    prefix
        Where the lists go: ``PREFIX.lst``, or with a split or chunks
        ``PREFIX_train.lst``, ``PREFIX_1_val.lst``, ... (:func:`split_list`);
        ``PREFIX.labels`` names the classes (``label<TAB>folder``).
    root
        The image folder: one class per sub-folder with ``recursive``.
    recursive
        Walk sub-folders, one label per folder (else every image has label 0).
    exts
        The image file extensions taken.
    chunks
        Split the list into this many chunks.
    train_ratio, test_ratio
        Fractions of the images for the train and test lists (the rest: val).
    shuffle
        Shuffle the images (with im2rec's ``random.seed``).
    seed
        The shuffle's seed (im2rec's is 100).

    Returns
    -------
    list of str
        The ``.lst`` files written.

    Raises
    ------
    MxrecError
        No image was found (the message says why, :func:`why_no_images`);
        nothing is written.
    OptionError
        A ratio outside ``0..1`` or ``chunks < 1``.
    """
    split_list([], chunks, train_ratio, test_ratio)  # reject bad options before walking a large tree
    check_writable(prefix)
    exts = list(exts)
    images = walk_images(root, recursive, exts)
    if not images.entries:
        raise MxrecError(why_no_images(root, recursive, exts))
    return write_lists(prefix, images, chunks=chunks, train_ratio=train_ratio, test_ratio=test_ratio,
                       shuffle=shuffle, seed=seed)


# -- CSV input -------------------------------------------------------------

def _csv_delimiter(path: str, first_line: str) -> str:
    return "\t" if path.lower().endswith((".tsv", ".tab")) or "\t" in first_line else ","


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_labelled_csv(csv_path: str | os.PathLike, root: str | os.PathLike) -> ImageList:
    """Entries from a CSV/TSV of ``path,label`` rows; class-name labels become ids 0, 1, ... in sorted order.

    Parameters
    ----------
    csv_path
        The CSV (or TSV) file.
    root
        The folder the rows' paths are relative to.

    Returns
    -------
    ImageList
        The entries and the name of each label.

    Raises
    ------
    ListFileError
        With the line number, for a row without a label, an empty label, a path the ``.lst`` cannot hold, a
        path outside ``root`` or a file that does not exist.
    """
    csv_path, root = os.fspath(csv_path), os.fspath(root)
    with open(csv_path, encoding="utf-8-sig", newline="") as f:
        text = f.read()
    delimiter = _csv_delimiter(csv_path, text.partition("\n")[0])
    rows: list[tuple[int, str, list[str]]] = []
    reader = csv.reader(text.splitlines(), delimiter=delimiter)
    for row in reader:
        number = reader.line_num
        cells = [cell.strip() for cell in row]
        if not any(cells):
            continue
        if not rows and cells[0].lower() in CSV_HEADER_NAMES and not os.path.exists(os.path.join(root, cells[0])):
            continue
        if len(cells) < 2:
            raise ListFileError(csv_path, f"expected 'path{delimiter}label', got {row!r}", line=number)
        path, labels = cells[0], cells[1:]
        if not all(labels):
            raise ListFileError(csv_path, f"empty label for {path!r}", line=number)
        problem = check_list_path(path)
        if problem is not None:
            raise ListFileError(csv_path, problem, line=number)
        try:
            full = resolve_list_path(root, path)
        except UnsafePathError as exc:
            raise ListFileError(csv_path, str(exc), line=number) from None
        if not os.path.isfile(full):
            raise ListFileError(csv_path, f"image file {full!r} does not exist", line=number)
        rows.append((number, path, labels))
    if not rows:
        raise ListFileError(csv_path, "no rows with a path and a label: nothing to list")
    numeric = all(_is_number(label) for _, _, labels in rows for label in labels)
    if numeric:
        label_names: dict[int, str] = {}
        entries = [ListEntry(i, tuple(float(v) for v in labels), path) for i, (_, path, labels) in enumerate(rows)]
    else:
        names = sorted({label for _, _, labels in rows for label in labels})
        ids = {name: i for i, name in enumerate(names)}
        label_names = dict(enumerate(names))
        entries = [ListEntry(i, tuple(float(ids[v]) for v in labels), path)
                   for i, (_, path, labels) in enumerate(rows)]
    return ImageList(entries, label_names)
