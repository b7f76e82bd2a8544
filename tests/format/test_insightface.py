"""The InsightFace layout rules and the safe reading of verification-set pickles, as pure functions."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from mxrec.errors import VerificationSetError
from mxrec.format.insightface import FaceLayout, header_layout, key_range, layout_problems, parse_verification_pickle

LAYOUT = FaceLayout(identity_start=8, end=11)  # faces 1..7, identities 8, 9, 10
KEYS = list(range(11))
RANGES = {8: (1, 4), 9: (4, 5), 10: (5, 8)}
FACE_KEYS = np.arange(1, 8)
FACE_LABELS = np.array([0, 0, 0, 1, 2, 2, 2], np.float64)


def test_header_and_identity_records_are_recognised():
    assert header_layout(2, [8.0, 11.0], 0) == LAYOUT and LAYOUT.faces == 7 and LAYOUT.identities == 3
    assert header_layout(2, [8.0, 11.0], 100) is None  # an image: a sample with two labels, not a header
    assert header_layout(0, [8.0], 0) is None and header_layout(3, [8, 11, 1], 0) is None
    assert header_layout(2, [0.0, 11.0], 0) is None  # faces start at key 1
    assert header_layout(2, [8.5, 11.0], 0) is None and header_layout(2, [12.0, 11.0], 0) is None
    assert key_range(2, [4.0, 4.0], 0) == (4, 4) and key_range(2, [float("nan"), 4.0], 0) is None


def test_a_consistent_set_has_no_problems():
    assert layout_problems(LAYOUT, KEYS, RANGES, (FACE_KEYS, FACE_LABELS)) == []


@pytest.mark.parametrize(("keys", "ranges", "labels", "expected"), [
    ([*KEYS, 11], RANGES, None, {0: "says 11 records", 11: "outside the layout"}),
    ([k for k in KEYS if k not in (2, 3)], RANGES, None, {0: "the .idx lists 9", "keys 2..3": "no face record"}),
    ([k for k in KEYS if k != 9], {8: (1, 4), 10: (5, 8)}, None, {0: "lists 10", 9: "no identity record",
                                                                   10: "faces 4..4 belong to no identity"}),
    (KEYS, {8: (1, 4), 9: (3, 5), 10: (5, 8)}, None, {9: "faces 3..3 belong to two identities"}),
    (KEYS, {8: (1, 4), 9: (4, 5), 10: (5, 7)}, None, {10: "faces 7..7 belong to no identity"}),
    (KEYS, {8: (1, 4), 9: (4, 4), 10: (4, 8)}, None, {9: "holds no face"}),
    (KEYS, {8: (1, 4), 9: (4, 5), 10: (5, 9)}, None, {10: "reaches past the faces"}),
    (KEYS, {8: (1, 4), 9: None, 10: (5, 8)}, None, {9: "not an identity record", 10: "belong to no identity"}),
    (KEYS, RANGES, [0, 0, 1, 1, 2, 2, 7], {3: "label 1, but the face lies in the range of identity record 8",
                                             7: "label 7, but the face lies in the range of identity record 10"}),
])
def test_each_violation_is_reported_under_its_key(keys, ranges, labels, expected):
    face_labels = None if labels is None else (FACE_KEYS, np.array(labels, np.float64))
    found = dict(layout_problems(LAYOUT, keys, ranges, face_labels))
    assert set(found) == set(expected), found
    for where, fragment in expected.items():
        assert fragment in found[where], (where, found[where])


# -- verification sets -------------------------------------------------------------------------------------

IMAGES = [b"\xff\xd8\xff\xe0 jpeg one", b"\xff\xd8\xff\xe0 jpeg two", b"\x89PNG three", b"\x89PNG four"]


@pytest.mark.parametrize("protocol", range(2, pickle.HIGHEST_PROTOCOL + 1))
def test_verification_pickles_in_every_form_found_in_the_wild(protocol):
    arrays = [np.frombuffer(b, np.uint8).copy() for b in IMAGES]  # what cv2.imencode returns
    for images, issame in ((IMAGES, [True, False]), (arrays, np.array([True, False])),
                           ([bytearray(IMAGES[0]), *IMAGES[1:]], [np.bool_(True), np.bool_(False)])):
        got, same = parse_verification_pickle(pickle.dumps((images, issame), protocol=protocol))
        assert got == IMAGES and same.dtype == np.bool_ and same.tolist() == [True, False]


class Hostile:
    """Unpickling this would run a command, if anything but the restricted unpickler read it."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.mark.parametrize("payload", [
    lambda m: ([Hostile(m), b"x"], [True]),
    lambda m: ([b"x", b"y"], [Hostile(m)]),
    lambda m: ([np.zeros(2, np.float64), b"y"], [True]),
    lambda m: ([np.array([Hostile(m)], dtype=object), b"y"], [True]),
])
def test_a_hostile_verification_set_is_refused_before_anything_runs(tmp_path, payload):
    marker = tmp_path / "ran"
    for protocol in (2, pickle.HIGHEST_PROTOCOL):
        with pytest.raises(VerificationSetError, match="lfw.bin: not a verification set pickle.*not allowed"):
            parse_verification_pickle(pickle.dumps(payload(str(marker)), protocol=protocol), "lfw.bin")
    assert not marker.exists()


@pytest.mark.parametrize(("obj", "fragment"), [
    (([b"a", b"b", b"c"], [True]), "3 images for 1 pairs"),
    (([b"a", 7], [True]), "image 1 is a int"),
    (([b"a", b"b"], [1]), "issame must be a list of bools"),
    ({"images": []}, "expected a pair (images, issame)"),
])
def test_malformed_verification_sets_name_the_fault(obj, fragment):
    with pytest.raises(VerificationSetError) as caught:
        parse_verification_pickle(pickle.dumps(obj), "cfp_fp.bin")
    assert str(caught.value).startswith("cfp_fp.bin: ") and fragment in str(caught.value)
    with pytest.raises(VerificationSetError, match="not a verification set pickle"):
        parse_verification_pickle(b"GIF89a not a pickle", "x.bin")
