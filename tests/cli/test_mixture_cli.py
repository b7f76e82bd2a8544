"""A mixture file through the command line (issue 23 §2): ``info`` shows what each source gives an epoch, ``verify``,
``stats``, ``preview`` and ``probe`` take it as a dataset, and every bad mixture is one line naming the source."""

from __future__ import annotations

import json
import re

import pytest

from testkit.cli import run_cli
from testkit.datasets import make_clean_dataset, make_photo_set


@pytest.fixture
def mixture(tmp_path):
    make_clean_dataset(tmp_path / "a.rec", 40)  # labels key % 4
    make_photo_set(tmp_path / "b.rec", 10, 40, 30)  # labels key % 5
    spec = tmp_path / "train.mix.json"
    spec.write_text(json.dumps({"sources": [{"path": "a.rec", "weight": 0.3}, {"path": "b.rec", "weight": 0.7}],
                                "samples_per_epoch": 40, "label_offsets": "auto"}))
    return spec


def test_info_shows_each_source_records_weight_share_passes_and_offset(mixture):
    result = run_cli("info", mixture, check=True)
    lines = result.stdout.splitlines()
    assert lines[0] == f"mixture {mixture}: 2 sources, 40 samples per epoch, seed 0"
    assert re.search(r"a\.rec\s+40\s+0\.3\s+12\s+0\.3× — full cycle every 4 epochs\s+0$", result.stdout, re.M)
    assert re.search(r"b\.rec\s+10\s+0\.7\s+28\s+2\.8× repeated\s+4$", result.stdout, re.M)
    assert "--- source 1: " in result.stdout and "records:           10" in result.stdout  # each source's own
    data = json.loads(run_cli("info", mixture, "--json", check=True).stdout)
    assert [(s["records"], s["share"], s["label_offset"]) for s in data["sources"]] == [(40, 12, 0), (10, 28, 4)]
    assert data["sources"][1]["info"]["records"] == 10


def test_verify_stats_preview_and_probe_take_a_mixture_file(mixture, tmp_path):
    verify = run_cli("verify", mixture)
    assert verify.returncode == 0, verify.stderr
    assert "--- source 0: " in verify.stdout and verify.stdout.rstrip().endswith("total: 2 source(s), 0 failed: OK")
    assert "[  ok] mixture: 2 sources, 40 samples per epoch (shares 12, 28), label offsets [0, 4]" in verify.stdout
    stats = json.loads(run_cli("stats", mixture, "--json", check=True).stdout)
    assert stats["records"] == 50 and sorted(map(int, stats["class_counts"])) == list(range(9))  # offsets applied
    sheet = tmp_path / "sheet.png"
    assert run_cli("preview", mixture, "-o", sheet, "-n", "4", check=True).stdout.startswith(f"{sheet}: 4 record")
    probe = run_cli("probe", mixture, "data_shape=3,16,16", "batch_size=8", "resize=16", "--batches", "2",
                      "--warmup", "0", "--json")
    assert probe.returncode in (0, 1), probe.stderr  # (a failed check exits 1; the run itself happened)
    out = json.loads(probe.stdout)
    assert out["path"] == str(mixture) and out["params"]["batch_size"] == 8


def test_a_damaged_source_fails_verify_and_info_names_it(mixture, tmp_path):
    data = bytearray((tmp_path / "b.rec").read_bytes())
    data[len(data) // 2:len(data) // 2 + 8] = b"\xff" * 8
    (tmp_path / "b.rec").write_bytes(bytes(data))
    verify = run_cli("verify", mixture)  # each source checked as the file names it, without mixing first
    assert verify.returncode == 1 and "total: 2 source(s), 1 failed: FAILED" in verify.stdout
    assert "a.rec: OK" in verify.stdout and "b.rec: FAILED" in verify.stdout
    info = run_cli("info", mixture)  # mixing reads the labels (auto offsets): the damaged source is named
    assert info.returncode == 2 and "Traceback" not in info.stderr
    assert re.search(r"b\.rec: bytes \d+\.\.\d+: fail their CRC-32C checksum .*damaged data in record \d+ ",
                     info.stderr.splitlines()[-1])  # (the damaged record's own checksum, found as its label is read)


MIXING = [  # the file is read, the sources are sound, the mixture it asks for cannot be made
    ('{"sources": [{"path": "a.rec", "weight": 1}, {"path": "b.rec", "weight": -2}]}', "b.rec: weight -2"),
    ('{"sources": [{"path": "a.rec", "weight": 1}, {"path": "b.rec", "weight": NaN}]}', "b.rec: weight nan"),
    ('{"sources": [{"path": "a.rec", "weight": 0}, {"path": "b.rec", "weight": 0}]}', "the weights are all zero"),
    ('{"sources": ["a.rec", "b.rec"], "label_offsets": [0, 1]}', "classes overlap"),
    ('{"sources": ["a.rec", "b.rec"], "label_offsets": [0]}', "2 sources got 1 label offsets"),
]
FILE = [  # the file itself cannot be used
    ('{"sources": [{"path": "a.rec"}, {"path": "gone.rec"}]}', "gone.rec: cannot be"),
    ('{"sources": ["a.rec", "train.mix.json"]}', "train.mix.json: a mixture inside a mixture is not supported"),
    ('{"sources": [', "not a mixture file: not JSON"),
    ('{"sources": []}', "a mixture file needs \"sources\""),
]


@pytest.mark.parametrize(("text", "message"), MIXING + FILE)
def test_info_of_each_bad_mixture_is_one_line_naming_the_file_and_source(mixture, tmp_path, text, message):
    bad = tmp_path / "bad.mix.json"
    bad.write_text(text)
    result = run_cli("info", bad)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(f"mxrec info: error: {bad}: ") and message in error, error


@pytest.mark.parametrize(("text", "message"), MIXING)
def test_verify_checks_the_sources_then_fails_the_mixing(mixture, tmp_path, text, message):
    bad = tmp_path / "bad.mix.json"
    bad.write_text(text)
    result = run_cli("verify", bad)
    assert result.returncode == 1, result.stderr
    assert "a.rec: OK" in result.stdout and "b.rec: OK" in result.stdout  # the sources are sound
    failed = [line for line in result.stdout.splitlines()
              if line.lstrip().startswith("[FAIL] mixture: cannot be mixed")]
    assert len(failed) == 1 and message in failed[0], result.stdout


@pytest.mark.parametrize(("text", "message"), FILE)
def test_verify_of_an_unusable_mixture_file_is_one_line_naming_it(mixture, tmp_path, text, message):
    bad = tmp_path / "bad.mix.json"
    bad.write_text(text)
    result = run_cli("verify", bad)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(f"mxrec verify: error: {bad}: ") and message in error, error


def test_verify_html_and_repair_of_a_mixture_are_refused_before_the_checks(mixture, tmp_path):
    result = run_cli("verify", mixture, "--html", tmp_path / "page.html")
    assert result.returncode == 2 and "--html and --repair take one dataset" in result.stderr
    assert not (tmp_path / "page.html").exists()
