"""How every command behaves at the edges: exit codes on damaged input, signals, broken pipes, one-line errors,
one name for one option, plain-text help, string keys, class names."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys

import cv2
import numpy as np
import pytest

from mxrec import RecordWriter
from mxrec.cli import SUBCOMMANDS, build_parser
from mxrec.doctor.preview import contact_sheet
from mxrec.doctor.stats import dataset_stats
from mxrec.format.header import IRHeader, pack
from mxrec.io.lists import write_label_names
from testkit.cli import mxrec_env
from testkit.datasets import clean_jpeg, make_clean_dataset
from testkit.waiting import wait_for


@pytest.fixture
def clean(tmp_path):
    rec = tmp_path / "clean.rec"
    make_clean_dataset(rec, count=12, classes=3)
    return rec


@pytest.fixture
def damaged(tmp_path, golden):
    """Each kind of damaged input, by name: a text file named .rec, a truncated .rec, a garbage .idx."""
    text = tmp_path / "notes.rec"
    text.write_text("this is a text file, not RecordIO\n" * 10)
    truncated = tmp_path / "cut.rec"
    make_clean_dataset(tmp_path / "whole.rec", count=8)
    data = (tmp_path / "whole.rec").read_bytes()
    truncated.write_bytes(data[:len(data) - 100])
    garbage = tmp_path / "garbage.rec"
    make_clean_dataset(garbage, count=8)
    (tmp_path / "garbage.idx").write_bytes(b"\x00\x01 not an index \xff\n")
    return {"text": text, "truncated": truncated, "garbage idx": garbage}


@pytest.mark.parametrize("kind", ["text", "truncated", "garbage idx"])
@pytest.mark.parametrize("command", ["info", "stats"])
def test_info_and_stats_exit_1_on_damaged_input_and_still_print(damaged, kind, command, mxrec_cli):
    args = [command, damaged[kind]] + (["--no-progress"] if command == "stats" else [])
    result = mxrec_cli(*args)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and result.stdout.startswith(
        "file:" if command == "info" else str(damaged[kind]))
    assert ("damage:" in result.stdout) or ("unreadable" in result.stdout)


def test_info_and_stats_exit_0_on_clean_input(clean, mxrec_cli):
    assert mxrec_cli("info", clean).returncode == 0
    assert mxrec_cli("stats", clean, "--no-progress").returncode == 0


def test_stats_json_lists_the_damage(damaged, mxrec_cli):
    result = mxrec_cli("stats", "--json", "--no-progress", damaged["truncated"])
    assert result.returncode == 1 and "at byte" in json.loads(result.stdout)["damage"][0]


def test_extract_of_a_truncated_file_extracts_the_rest_and_exits_1(damaged, tmp_path, mxrec_cli):
    result = mxrec_cli("extract", damaged["truncated"], tmp_path / "out")
    assert result.returncode == 1 and "damage stepped over: " in result.stderr and "at byte" in result.stderr
    assert "wrote 7 files" in result.stdout and (tmp_path / "out" / "cut.lst").exists()


def test_preview_of_damaged_records_draws_them_lists_them_and_exits_1(tmp_path, mxrec_cli):
    with RecordWriter(tmp_path / "d.rec", index=True) as writer:
        writer.write(pack(IRHeader(0, 1.0, 0, 0), clean_jpeg(0)))
        writer.write(pack(IRHeader(0, 1.0, 1, 0), b"not an image"))
        writer.write(b"short")
    result = mxrec_cli("preview", tmp_path / "d.rec", "-o", tmp_path / "sheet.png")
    assert result.returncode == 1 and (tmp_path / "sheet.png").exists()
    assert ": 1: record 1: " in result.stderr and ": 2: " in result.stderr and "shorter than" in result.stderr


def test_one_line_errors_for_output_formats_nothing_can_write(clean, tmp_path, mxrec_cli):
    gif = mxrec_cli("preview", clean, "-o", tmp_path / "out.gif")
    assert gif.returncode == 2 and gif.stderr.count("\n") == 1 and "Traceback" not in gif.stderr
    assert gif.stderr.startswith(f"mxrec preview: error: {tmp_path / 'out.gif'}: OpenCV cannot write .gif images")
    pytest.importorskip("matplotlib")
    txt = mxrec_cli("stats", clean, "-o", tmp_path / "stats.txt", "--no-progress")
    assert txt.returncode == 2 and txt.stderr.count("\n") == 1 and "Traceback" not in txt.stderr
    assert txt.stderr.startswith(f"mxrec stats: error: {tmp_path / 'stats.txt'}: matplotlib cannot write .txt")
    assert txt.stdout == ""  # refused before the long read
    assert not list(tmp_path.glob("out.gif*")) and not list(tmp_path.glob("stats.txt*"))


def test_broken_pipe_is_quiet_like_unix_tools(tmp_path):
    """``mxrec verify --json ... | head -c 100``: no 'error: [Errno 32] Broken pipe', exit 141 as if by SIGPIPE."""
    with RecordWriter(tmp_path / "many.rec") as writer:
        for i in range(3000):
            writer.write(b"x%d" % i)  # no IRHeader: a problem each, a long report
    job = subprocess.Popen([sys.executable, "-m", "mxrec", "verify", "--json", "--kind", "image", "--no-progress",
                            str(tmp_path / "many.rec")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=mxrec_env())
    assert job.stdout.read(100).startswith(b"{")
    job.stdout.close()  # the reader goes away, as head does
    err = job.stderr.read()
    assert job.wait(timeout=120) == 128 + signal.SIGPIPE
    assert err == b""


def test_sigterm_during_extract_says_what_it_left(tmp_path):
    with RecordWriter(tmp_path / "big.rec", index=True) as writer:
        writer.write_batch([pack(IRHeader(0, float(i % 3), i, 0), b"\xff\xd8\xff payload %d" % i)
                            for i in range(40000)])
    out = tmp_path / "out"
    job = subprocess.Popen([sys.executable, "-m", "mxrec", "extract", str(tmp_path / "big.rec"), str(out)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=mxrec_env())
    wait_for((out / "2").exists, "the extraction to begin")
    assert job.poll() is None  # still extracting
    job.send_signal(signal.SIGTERM)
    _, err = job.communicate(timeout=60)
    assert job.returncode == 128 + signal.SIGTERM and "Traceback" not in err
    done = int(re.search(r"extracted (\d+) of 40000 records", err).group(1))
    assert 0 < done < 40000 and f"{out / 'big.lst'} was not written" in err and "terminated (SIGTERM)" in err
    assert not (out / "big.lst").exists() and not list(out.glob("*.partial"))
    assert sum(len(list((out / str(label)).iterdir())) for label in range(3)) in (done, done + 1)


@pytest.mark.parametrize("command", ["info", "stats", "extract"])
def test_string_keys_reach_every_command(golden, tmp_path, command, mxrec_cli):
    strkeys = golden / "idx" / "strkeys.rec"
    args = {"info": [], "stats": ["--no-progress"], "extract": [tmp_path / "out"]}[command]
    with_option = mxrec_cli(command, strkeys, *args, "--str-keys")
    assert with_option.returncode in (0, 1) and "not a valid int" not in with_option.stdout + with_option.stderr
    without = mxrec_cli(command, strkeys, *args)
    assert without.returncode in (1, 2) and "--str-keys" in without.stdout + without.stderr
    if command == "info":
        assert with_option.returncode == 0 and "strkeys.idx: ok (3 entries)" in with_option.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--quality", "0"], "JPEG quality must be 1..100 (default 95), not 0"),
    (["--quality", "500"], "JPEG quality must be 1..100 (default 95), not 500"),
    (["--encoding", ".png", "--quality", "10"], "PNG compression level must be 0..9 (default 9), not 10"),
    (["--shard-size", "0"], "argument --shard-size: a shard limit must be positive, not 0"),
    (["--workers", "0"], "argument -j/--workers/--num-thread: must be at least 1, not 0"),
])
def test_pack_option_values_are_checked_with_a_clear_message(tmp_path, im2rec, args, message, mxrec_cli):
    (tmp_path / "d.lst").write_text("0\t0.000000\tcamera/camera_00000.jpg\n")
    result = mxrec_cli("pack", *args, tmp_path / "d", im2rec / "photos200")
    assert result.returncode == 2 and message in result.stderr and "invalid" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.lst"]


def test_a_missing_output_folder_is_named(tmp_path, golden, photos, mxrec_cli):
    listed = mxrec_cli("list", tmp_path / "nowhere" / "x", photos, "--recursive")
    assert listed.returncode == 2 and listed.stderr.startswith(
        f"mxrec list: error: {tmp_path / 'nowhere'}: no such folder") and ".partial" not in listed.stderr
    indexed = mxrec_cli("index", golden / "idx" / "idx.rec", "-o", tmp_path / "nowhere" / "x.idx")
    assert indexed.returncode == 2 and f"{tmp_path / 'nowhere'}: no such folder" in indexed.stderr
    to_dir = mxrec_cli("index", golden / "idx" / "idx.rec", "-o", tmp_path)
    assert to_dir.returncode == 2 and "is a directory" in to_dir.stderr


def _options(command: str) -> dict[str, list[str]]:
    """``{dest: option strings}`` of a subcommand."""
    sub = next(a for a in build_parser()._subparsers._group_actions[0].choices.items() if a[0] == command)[1]
    return {action.dest: action.option_strings for action in sub._actions if action.option_strings}


def test_one_name_for_one_thing():
    for command in ("pack", "im2rec", "verify", "stats"):
        assert {"-j", "--workers"} <= set(_options(command)["workers"]), command
    assert "--num-thread" in _options("pack")["workers"] and "--num-thread" in _options("im2rec")["workers"]
    for command in ("extract", "preview", "stats"):
        assert _options(command)["labels"] == ["--labels"]  # always a .labels file of class names
    for command in ("verify", "stats"):
        assert _options(command)["label_kind"] == ["--label-kind"]
    for command in ("info", "stats", "extract", "preview", "verify"):
        assert _options(command)["str_keys"] == ["--str-keys"]


MARKUP = re.compile(r"``|:(mod|func|class|attr|data|meth):|\*\*")


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_help_is_plain_text(command, mxrec_cli):
    result = mxrec_cli(command, "--help")
    assert result.returncode == 0 and not MARKUP.search(result.stdout), MARKUP.search(result.stdout)


def test_stats_and_preview_show_class_names_from_the_labels_file(clean, tmp_path, mxrec_cli):
    names = {0: "cat", 1: "dog", 2: "heron"}
    write_label_names(tmp_path / "clean.labels", names)  # beside clean.rec: found without --labels
    text = mxrec_cli("stats", clean, "--no-progress").stdout
    assert re.search(r"label +0 \(cat\): +4 ", text) and "label 2 (heron):" in text
    assert dataset_stats(clean, label_names=names).format_text() == text.rstrip("\n")
    result = mxrec_cli("preview", clean, "-o", tmp_path / "named.png", "-n", "4")
    assert result.returncode == 0
    named = cv2.imread(str(tmp_path / "named.png"))
    assert np.array_equal(named, contact_sheet(clean, count=4, label_names=names)[0])
    assert not np.array_equal(named, contact_sheet(clean, count=4)[0])  # the captions differ
    other = tmp_path / "other.labels"
    write_label_names(other, {0: "zero"})
    assert re.search(r"label +0 \(zero\):", mxrec_cli("stats", clean, "--labels", other, "--no-progress").stdout)


def test_the_old_meaning_of_labels_gets_a_pointer_to_label_kind(clean, mxrec_cli):
    result = mxrec_cli("stats", clean, "--labels", "class", "--no-progress")
    assert result.returncode == 2 and "what the labels are is --label-kind class" in result.stderr
