"""``mxrec verify --engine ray`` on a real local Ray cluster: the same report as a local verify, fault for fault.

The dataset is ``testkit.datasets.make_faulty_dataset``: one fault of every kind the doctor knows, so an
equal report means every check saw the same facts about every record.
"""

from __future__ import annotations

import json

import pytest

from mxrec.doctor.verify_dataset import verify_dataset
from testkit.datasets import NUM_CLASSES, make_clean_dataset, make_faulty_dataset

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    return make_faulty_dataset(tmp_path_factory.mktemp("faulty"))


@pytest.mark.parametrize("decode", [False, True])
def test_report_equals_the_local_one(mray, faulty, decode):
    options = {"decode": decode, "lst": faulty.lst, "against": faulty.val, "num_classes": NUM_CLASSES}
    local = verify_dataset(faulty.rec, **options)
    done = []
    remote = mray.verify_dataset_ray(faulty.rec, tasks=5, progress=lambda n, total: done.append((n, total)),
                                     **options)
    assert remote.to_dict() == local.to_dict()
    assert not remote.ok and len(remote.checks) == len(local.checks) >= 9
    assert done[-1] == (done[-1][1], done[-1][1]) and len(done) == 5  # one call per task, the last at the total


def test_clean_dataset_and_raw_records(mray, tmp_path, golden):
    make_clean_dataset(tmp_path / "clean.rec", count=40)
    for path in (tmp_path / "clean.rec", golden / "seq" / "seq.rec"):
        assert mray.verify_dataset_ray(path, tasks=3).to_dict() == verify_dataset(path).to_dict()
    assert mray.verify_dataset_ray(tmp_path / "clean.rec", tasks=3).ok


def test_remote_file_report_equals_the_local_one(mray, faulty, s3_server, s3_bucket):
    for path in (faulty.rec, faulty.idx):
        s3_server.put_object(s3_bucket, path.name, path.read_bytes())
    remote = mray.verify_dataset_ray(f"s3://{s3_bucket}/{faulty.rec.name}", tasks=4, decode=True,
                                     storage_options=s3_server.storage_options())
    assert remote.to_dict()["checks"] == verify_dataset(faulty.rec, decode=True).to_dict()["checks"]


def test_cli_json_equals_local(mray, mxrec_cli, faulty):
    outputs = []
    for engine in ("local", "ray"):
        done = mxrec_cli("verify", "--json", "--decode", "--no-progress", "--engine", engine, "--lst", faulty.lst,
                         faulty.rec)
        assert done.returncode == 1, done.stderr  # faults found
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1]
