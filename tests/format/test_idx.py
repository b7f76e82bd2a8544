"""The .idx text: compact integer keys (IntKeys), the vectorised parse and its fall-back to the line parser."""

from __future__ import annotations

import numpy as np
import pytest

from mxrec.errors import DuplicateKeyError, IndexFileError
from mxrec.format.idx import IntIndexBuilder, IntKeys, IntLines, parse_index, parse_int_lines


def test_int_keys_read_like_a_list_of_ints():
    for keys, expected in ((IntKeys(range(3, 8)), [3, 4, 5, 6, 7]),
                           (IntKeys(np.array([10, 3, 7, 1000000, 0])), [10, 3, 7, 1000000, 0])):
        assert keys == expected and expected == keys and keys != expected[:-1]
        assert list(keys) == expected and len(keys) == len(expected)
        assert keys[1] == expected[1] and type(keys[1]) is int and keys[-1] == expected[-1]
        assert keys[1:3] == expected[1:3] and isinstance(keys[1:3], list)
        assert expected[2] in keys and np.int64(expected[2]) in keys and 123456 not in keys and "x" not in keys
        assert repr(keys) == repr(expected) and sorted(keys) == sorted(expected)
        np.testing.assert_array_equal(np.asarray(keys), expected)
        with pytest.raises(IndexError):
            keys[len(expected)]
    assert IntKeys.from_array(np.arange(5, 9)).consecutive_from == 5
    assert IntKeys.from_array(np.array([5, 6, 8])).consecutive_from is None


def test_builder_keeps_consecutive_keys_as_a_range_until_they_are_not():
    builder = IntIndexBuilder(2)  # an estimate that falls short: the arrays grow
    builder.add(IntLines.of(np.array([[0, 0], [1, 12], [2, 24]])))
    builder.add(IntLines.of(np.array([[3, 36]])))
    index = builder.build()
    assert index.offsets.tolist() == [0, 12, 24, 36]
    assert index.keys.consecutive_from == 0 and index.increasing
    builder = IntIndexBuilder(100)  # an estimate above the count: cut to size
    builder.add(IntLines.of(np.array([[0, 0], [1, 12], [2, 24]])))
    builder.add(IntLines.of(np.array([[9, 36], [4, 48]])))  # the break comes in a later chunk
    index = builder.build()
    assert index.keys == [0, 1, 2, 9, 4] and index.offsets.tolist() == [0, 12, 24, 36, 48]
    assert index.keys.consecutive_from is None and not index.increasing


def test_vectorised_parse_takes_only_plain_lines():
    lines = parse_int_lines(b"0\t0\n7\t12\n")
    assert lines.pairs.tolist() == [[0, 0], [7, 12]] and (lines.first, lines.last) == (0, 7)
    assert lines.increasing and not lines.consecutive
    for odd in (b"5\t6\t7\n8\n", b"-1\t0\n", b"1 \t0\n", b"1\t0\r\n", b"\n", b"a\t0\n", b"\t5\n"):
        assert parse_int_lines(odd) is None, odd


def test_extra_fields_on_one_line_and_none_on_the_next_is_an_error_not_a_shifted_parse():
    # Regression: the field counts added up (4 numbers, 2 lines, 2 tabs), and the old vectorised parse read
    # keys [5, 7]; MXNet reads line 1 as key 5 (ignoring the third field) and fails on line 2.
    with pytest.raises(IndexFileError, match="line 2: expected 'key<TAB>offset'"):
        parse_index(b"5\t6\t7\n8\n")


def test_line_parser_results_are_compact_too():
    index = parse_index("3\t0\r\n1\t12\r\n\r\n", int)  # CRs and a blank line: the line parser
    assert isinstance(index.keys, IntKeys) and index.keys == [3, 1] and not index.increasing
    big = parse_index(f"{2**64 - 1}\t0\n", int)  # beyond int64: Python ints in a list
    assert big.keys == [2**64 - 1] and isinstance(big.keys, list)
    assert parse_index(b"x\t0\ny\t4\n", str).keys == ["x", "y"]


def test_duplicates_found_in_compact_keys():
    index = parse_index(b"4\t0\n2\t8\n4\t16\n")
    assert index.has_duplicates() and index.duplicates() == [4] and index.mapping() == {4: 16, 2: 8}
    with pytest.raises(DuplicateKeyError, match="key 4 appears again at entry 3"):
        parse_index(b"4\t0\n2\t8\n4\t16\n", allow_duplicates=False)
