"""What users see when Ray is missing or the cluster cannot be reached: one line that says what to do.

These need no running cluster (the unreachable address is a port nothing listens on), so they are fast.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from mxrec.errors import ClusterError
from testkit import SRC
from testkit.ray_cluster import RAY_LOOPBACK_ENV, import_ray


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_python(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    base = dict(os.environ if env is None else env)
    base["PYTHONPATH"] = str(SRC) + os.pathsep + base.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=base,
                          timeout=120)


def test_without_ray_the_engine_names_the_extra_and_local_still_works(im2rec, tmp_path):
    shutil.copy(im2rec / "default" / "sub.lst", tmp_path / "sub.lst")
    code = f"""
        import sys
        sys.modules["ray"] = None  # as if Ray were not installed: import ray raises ImportError
        from mxrec.cli import main
        try:
            import mxrec.ray
        except Exception as exc:
            print("IMPORT", type(exc).__name__, exc)
        print("RAY", main(["pack", "--engine", "ray", "--no-progress", {str(tmp_path / "sub")!r},
                           {str(im2rec / "photos200")!r}]))
        print("LOCAL", main(["pack", "--pass-through", "--no-progress", {str(tmp_path / "sub")!r},
                             {str(im2rec / "photos200")!r}]))
    """
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("IMPORT MissingExtraError the Ray engine needs Ray Data, which is not installed: "
                               "pip install 'mxrec[ray]'")
    assert "RAY 2" in lines
    assert done.stderr.splitlines() == [
        "mxrec pack: error: the Ray engine needs Ray Data, which is not installed: pip install 'mxrec[ray]' "
        "(import of ray halted; None in sys.modules)"]
    assert "LOCAL 0" in lines and (tmp_path / "sub.rec").exists()  # the default engine needs no Ray


def test_unreachable_cluster_is_named_at_once():
    import_ray()
    from mxrec.ray.session import ray_session

    address = f"127.0.0.1:{closed_port()}"
    started = time.monotonic()
    refused = rf"cannot reach the Ray cluster at {address}: Connection refused"
    with pytest.raises(ClusterError, match=refused), ray_session(address):
        pass
    assert time.monotonic() - started < 10  # Ray alone would retry for minutes
    with pytest.raises(ClusterError, match=r"'nowhere': expected HOST:PORT"), ray_session("nowhere"):
        pass


def test_cli_unreachable_address_and_misused_address(im2rec, tmp_path):
    import_ray()
    shutil.copy(im2rec / "default" / "sub.lst", tmp_path / "sub.lst")
    address = f"127.0.0.1:{closed_port()}"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | RAY_LOOPBACK_ENV
    code = f"""
        from mxrec.cli import main
        root = {str(im2rec / "photos200")!r}
        print(main(["pack", "--engine", "ray", "--address", {address!r}, {str(tmp_path / "sub")!r}, root]))
        print(main(["verify", "--engine", "ray", "--address", {address!r}, {str(im2rec / "default" / "sub.rec")!r}]))
        print(main(["pack", "--address", {address!r}, {str(tmp_path / "sub")!r}, root]))
    """
    done = run_python(code, env)
    assert done.stdout.split() == ["2", "2", "2"], done.stderr
    assert done.stderr.splitlines() == [
        f"mxrec pack: error: cannot reach the Ray cluster at {address}: Connection refused (is it running? "
        "`ray start --head` starts one; --address or RAY_ADDRESS names it)",
        f"mxrec verify: error: cannot reach the Ray cluster at {address}: Connection refused (is it running? "
        "`ray start --head` starts one; --address or RAY_ADDRESS names it)",
        f"mxrec pack: error: --address {address} needs --engine ray"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub.lst"]


def test_missing_inputs_and_output_folders_are_named_up_front(tmp_path):
    import_ray()
    from mxrec.errors import OptionError
    from mxrec.ray import RecordSink, RecordSource

    with pytest.raises(FileNotFoundError, match=r"nothing\.rec"):
        RecordSource(tmp_path / "nothing.rec")
    with pytest.raises(FileNotFoundError, match=rf"{tmp_path / 'missing'}: no such folder"):
        RecordSink(tmp_path / "missing" / "out.rec").on_write_start()
    with pytest.raises(OptionError, match=r"s3://b/out\.rec: write_recordio writes to a folder every node sees"):
        RecordSink("s3://b/out.rec")
    assert list(tmp_path.iterdir()) == []
