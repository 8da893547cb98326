"""Downloading datasets: ``fetch`` and ``zoframe data`` against a local HTTP server on 127.0.0.1.

No test touches the real internet: every address points at a server started here, on loopback, that
serves files from a temporary directory and stops at the end of the test (or after 60 s at most).
"""

from __future__ import annotations

import argparse
import bz2
from collections.abc import Iterator
import hashlib
import http.server
import os
from pathlib import Path
import shutil
import threading
from typing import Any
import warnings

from helpers import need_data_file
import numpy as np
import pytest

from zoframe.errors import ChecksumError, UnknownNameError
from zoframe_datasets import DATASETS, load_libsvm
from zoframe_datasets import cli as data_cli
from zoframe_datasets.fetch import ENV_URL_BASE, FetchError, fetch, resolve_url
from zoframe_datasets.plugin import zoframe_commands

SHARED = Path(os.environ.get("ZOFRAME_DATA", ""))

TOY = b"1 1:0.5 3:2\n-1 2:1\n1 1:-1 2:0.25 3:4\n"
TOY_SHA = hashlib.sha256(TOY).hexdigest()


class Server:
    """A static file server on 127.0.0.1 that counts the requests it answers."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.hits = 0
        outer = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=str(root), **kwargs)

            def do_GET(self) -> None:
                outer.hits += 1
                super().do_GET()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.timer = threading.Timer(60.0, self.httpd.shutdown)  # bounded even if teardown never runs
        self.timer.daemon = True

    def __enter__(self) -> Server:
        self.thread.start()
        self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.timer.cancel()
        self.httpd.shutdown()
        self.thread.join(timeout=5)
        self.httpd.server_close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    root = tmp_path / "served"
    root.mkdir()
    with Server(root) as srv:
        yield srv


def _entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def test_fetch_plain_file_verified_and_atomic(server: Server, tmp_path: Path) -> None:
    (server.root / "svmguide3.t").write_bytes(TOY)
    dest = tmp_path / "dest"
    res = fetch("svmguide3.t", url=f"{server.base}/svmguide3.t", sha256=TOY_SHA, dest=dest)
    assert res.path == dest / "svmguide3.t" and res.downloaded and res.verified and res.sha256 == TOY_SHA
    assert res.path.read_bytes() == TOY
    assert _entries(dest) == ["svmguide3.t"]  # no temporary file left behind
    X, y = load_libsvm("svmguide3.t", data_dir=dest, verify=False)
    assert X.shape == (3, 22) and y.tolist() == [1.0, -1.0, 1.0]


def test_fetch_bz2_is_decompressed_before_verifying(server: Server, tmp_path: Path) -> None:
    (server.root / "colon-cancer.bz2").write_bytes(bz2.compress(TOY))
    dest = tmp_path / "dest"
    res = fetch("colon-cancer", url=f"{server.base}/colon-cancer.bz2", sha256=TOY_SHA, dest=dest)
    assert res.path.read_bytes() == TOY
    assert _entries(dest) == ["colon-cancer"]


def test_fetch_normalises_crlf_line_endings(server: Server, tmp_path: Path) -> None:
    (server.root / "mushrooms").write_bytes(TOY.replace(b"\n", b"\r\n"))
    res = fetch("mushrooms", url=f"{server.base}/mushrooms", sha256=TOY_SHA, dest=tmp_path / "d")
    assert res.path.read_bytes() == TOY


def test_checksum_mismatch_leaves_nothing(server: Server, tmp_path: Path) -> None:
    (server.root / "colon-cancer.bz2").write_bytes(bz2.compress(TOY))
    dest = tmp_path / "dest"
    wrong = "0" * 64
    with pytest.raises(ChecksumError) as info:
        fetch("colon-cancer", url=f"{server.base}/colon-cancer.bz2", sha256=wrong, dest=dest)
    msg = str(info.value)
    assert wrong in msg and TOY_SHA in msg and "Nothing was written" in msg and "--sha256" in msg
    assert _entries(dest) == []
    # the catalogue's own checksum is used when none is given
    with pytest.raises(ChecksumError, match=DATASETS["colon-cancer"].sha256 or "unreachable"):
        fetch("colon-cancer", url=f"{server.base}/colon-cancer.bz2", dest=dest)
    assert _entries(dest) == []
    # verify=False accepts it and reports the digest
    res = fetch("colon-cancer", url=f"{server.base}/colon-cancer.bz2", dest=dest, verify=False)
    assert res.sha256 == TOY_SHA and not res.verified


def test_http_error_and_corrupt_archive_leave_nothing(server: Server, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    with pytest.raises(FetchError, match=r"HTTP 404.*download the file by hand and put it at .*dest/a9a"):
        fetch("a9a", url=f"{server.base}/absent", dest=dest)
    assert _entries(dest) == []
    (server.root / "colon-cancer.bz2").write_bytes(b"this is not bzip2 data")
    with pytest.raises(FetchError, match=r"not a valid \.bz2 archive"):
        fetch("colon-cancer", url=f"{server.base}/colon-cancer.bz2", sha256=TOY_SHA, dest=dest)
    assert _entries(dest) == []


def test_connection_refused_is_a_clear_error(tmp_path: Path) -> None:
    srv = Server(tmp_path)  # bound but never serving: take its port, then close it
    port = srv.httpd.server_address[1]
    srv.httpd.server_close()
    with pytest.raises(FetchError, match="check the network connection"):
        fetch("a9a", url=f"http://127.0.0.1:{port}/a9a", dest=tmp_path / "dest", timeout=5)
    assert _entries(tmp_path / "dest") == []
    with pytest.raises(FetchError, match="only http, https and file"):
        fetch("a9a", url="ftp://example.invalid/a9a", dest=tmp_path / "dest")


def test_existing_file_is_kept_unless_forced(server: Server, tmp_path: Path) -> None:
    (server.root / "svmguide3.t").write_bytes(TOY)
    dest = tmp_path / "dest"
    url = f"{server.base}/svmguide3.t"
    fetch("svmguide3.t", url=url, sha256=TOY_SHA, dest=dest)
    assert server.hits == 1
    res = fetch("svmguide3.t", url=url, sha256=TOY_SHA, dest=dest)
    assert not res.downloaded and server.hits == 1
    res = fetch("svmguide3.t", url=url, sha256=TOY_SHA, dest=dest, force=True)
    assert res.downloaded and server.hits == 2
    (dest / "svmguide3.t").write_bytes(b"1 1:1\n")  # a different file in the way
    with pytest.raises(ChecksumError, match="--force"):
        fetch("svmguide3.t", url=url, sha256=TOY_SHA, dest=dest)
    assert server.hits == 2
    fetch("svmguide3.t", url=url, sha256=TOY_SHA, dest=dest, force=True)
    assert (dest / "svmguide3.t").read_bytes() == TOY


def test_bad_arguments_fail_before_any_download(server: Server, tmp_path: Path) -> None:
    with pytest.raises(UnknownNameError, match="Did you mean 'a9a'"):
        fetch("a9b", url=f"{server.base}/a9a", dest=tmp_path)
    with pytest.raises(FetchError, match="64 hexadecimal digits"):
        fetch("a9a", url=f"{server.base}/a9a", sha256="abc", dest=tmp_path)
    assert server.hits == 0


def test_url_resolution_order(monkeypatch: pytest.MonkeyPatch) -> None:
    info = DATASETS["colon-cancer"]
    monkeypatch.delenv(ENV_URL_BASE, raising=False)
    assert resolve_url(info) == "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary/colon-cancer.bz2"
    monkeypatch.setenv(ENV_URL_BASE, "http://mirror.example/data/")
    assert resolve_url(info) == "http://mirror.example/data/colon-cancer.bz2"
    assert resolve_url(info, "http://other/x.bz2") == "http://other/x.bz2"
    assert DATASETS["20news_w100"].url == "https://cs.nyu.edu/~roweis/data/20news_w100.mat"


def test_20news_mat_is_converted_byte_identically(server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_data_file(SHARED / "20news_w100.mat", "the raw 20 Newsgroups file served by its official address")
    need_data_file(SHARED / "svmguide3", "the svmguide3 data set")
    shutil.copyfile(SHARED / "20news_w100.mat", server.root / "20news_w100.mat")
    shutil.copyfile(SHARED / "svmguide3", server.root / "svmguide3")
    monkeypatch.setenv(ENV_URL_BASE, server.base)
    dest = tmp_path / "dest"
    res = fetch("20news_w100", dest=dest)  # the catalogue's checksums of the .mat and of the rewrite
    assert res.verified and res.sha256 == DATASETS["20news_w100"].sha256
    assert _entries(dest) == ["20news_w100.libsvm"]
    X, y = load_libsvm("20news_w100", data_dir=dest)
    assert X.shape == (16242, 100) and set(np.unique(y)) == {1.0, 2.0, 3.0, 4.0}
    res = fetch("svmguide3", dest=dest)
    assert res.verified and (dest / "svmguide3").read_bytes() == (SHARED / "svmguide3").read_bytes()


# ---------------------------------------------------------------- the `zoframe data` command


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="zoframe data")
    data_cli.add_arguments(parser)
    return data_cli.run(parser.parse_args(argv))


def test_cli_fetch_uses_the_url_base_variable(server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (server.root / "colon-cancer.bz2").write_bytes(bz2.compress(TOY))
    monkeypatch.setenv(ENV_URL_BASE, server.base)
    dest = tmp_path / "dest"
    assert _run(["fetch", "colon-cancer", "--dir", str(dest), "--sha256", TOY_SHA]) == 0
    out = capsys.readouterr().out
    assert f"{server.base}/colon-cancer.bz2" in out and "checksum verified" in out and TOY_SHA in out
    assert (dest / "colon-cancer").read_bytes() == TOY
    assert _run(["fetch", "colon-cancer", "--dir", str(dest), "--sha256", TOY_SHA]) == 0
    assert "already present" in capsys.readouterr().out
    assert _run(["path", "colon-cancer", "--dir", str(dest)]) == 0
    assert capsys.readouterr().out.strip() == str(dest / "colon-cancer")
    assert _run(["fetch", "a9a", "w8a", "--sha256", TOY_SHA]) == 2
    assert "one NAME at a time" in capsys.readouterr().err


def test_cli_list_and_info(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a9a").write_bytes(TOY)  # present but not the real file
    (tmp_path / "w8a").write_bytes(b"")
    assert _run(["list", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line and line.split()[0] in DATASETS}
    assert set(rows) == set(DATASETS)
    assert "CHECKSUM MISMATCH" in rows["a9a"] and "missing" in rows["svmguide3"]
    assert str(tmp_path / "svmguide3") in rows["svmguide3"]
    assert _run(["info", "mushrooms"]) == 0
    out = capsys.readouterr().out
    assert "8124 rows x 112 features" in out and "{1, 2}" in out and "Schlimmer" in out
    with pytest.raises(UnknownNameError):
        _run(["info", "mushroom"])


def test_data_command_is_registered() -> None:
    (spec,) = zoframe_commands()
    assert spec.name == "data" and spec.run is data_cli.run
    from zoframe.cli import main
    from zoframe.registry import PluginLoadWarning

    with warnings.catch_warnings():
        # another plugin failing to load is not this package's concern here
        warnings.simplefilter("ignore", PluginLoadWarning)
        assert main(["data", "path", "no-such-dataset"]) == 2


# ---------------------------------------------------------------- killed fetches and stale temporaries


def _stalling_handler(release: threading.Event) -> type[http.server.BaseHTTPRequestHandler]:
    class Stalling(http.server.BaseHTTPRequestHandler):
        """Sends the headers of a 4 MiB file and its first 256 KiB, then stalls until released."""

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(1 << 22))
            self.end_headers()
            self.wfile.write(b"1 1:1\n" * ((1 << 18) // 6))
            self.wfile.flush()
            release.wait(timeout=30)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Stalling


def _has_bytes(staging: Path) -> bool:
    """Whether a file in the staging directory has bytes (files come and go while the download runs)."""
    for f in list(staging.iterdir()):
        try:
            if f.stat().st_size > 0:
                return True
        except FileNotFoundError:  # renamed or removed between the listing and the stat
            continue
    return False


def test_a_killed_fetch_leaves_a_temporary_that_the_next_fetch_removes(server: Server, tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    release = threading.Event()
    stall = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _stalling_handler(release))
    stall.daemon_threads = True
    thread = threading.Thread(target=stall.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    dest = tmp_path / "dest"
    dest.mkdir()
    url = f"http://127.0.0.1:{stall.server_address[1]}/svmguide3.t"
    code = f"from zoframe_datasets.fetch import fetch; fetch('svmguide3.t', url={url!r}, dest={str(dest)!r}, verify=False)"
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 60
        temps: list[Path] = []
        while time.monotonic() < deadline:  # wait until the download is under way in its staging directory
            temps = [p for p in dest.iterdir() if p.name.endswith(".download") and p.is_dir() and _has_bytes(p)]
            if temps or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert temps, "the download never started"
        os.kill(proc.pid, signal.SIGKILL)  # as `kill -9`: no finally clause runs
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        release.set()
        stall.shutdown()
        stall.server_close()
    (stale,) = temps
    assert stale.exists() and ".part-" in stale.name and f"-{proc.pid}-" in stale.name
    (server.root / "svmguide3.t").write_bytes(TOY)
    res = fetch("svmguide3.t", url=f"{server.base}/svmguide3.t", sha256=TOY_SHA, dest=dest)
    assert res.downloaded and _entries(dest) == ["svmguide3.t"]  # the stale temporary is gone


def test_stale_temporaries_are_told_apart_from_running_fetches(tmp_path: Path) -> None:
    import time

    from zoframe_datasets.fetch import STALE_SECONDS, _host, clean_stale_temporaries

    host = _host()
    old = time.time() - STALE_SECONDS - 60
    names = {
        f".a9a.part-{host}-{os.getpid()}-abc123.download": ("recent", False),  # a running fetch (this process)
        f".a9a.part-{host}-{os.getpid()}-abc124.plain": ("old", True),  # running but idle for over an hour
        f".a9a.part-{host}-999999999-abc125.download": ("recent", True),  # its process is gone
        ".a9a.part-otherhost-999999999-abc126.download": ("recent", False),  # another host: by age only
        ".a9a.part-otherhost-999999999-abc127.libsvm": ("old", True),
        ".w8a.k2j3h4g5.download": ("old", True),  # the name an older version used, idle
        ".w8a.k2j3h4g6.download": ("recent", False),
        "a9a": ("old", False),  # data files and other hidden files are never touched
        ".a9a.download.txt": ("old", False),
        ".hidden": ("old", False),
    }
    for name, (age, _) in names.items():
        path = tmp_path / name
        path.write_bytes(b"x")
        if age == "old":
            os.utime(path, (old, old))
    removed = {p.name for p in clean_stale_temporaries(tmp_path)}
    assert removed == {name for name, (_, stale) in names.items() if stale}
    assert set(_entries(tmp_path)) == {name for name, (_, stale) in names.items() if not stale}


def test_the_final_file_is_synced_before_the_rename(server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync")
        real_fsync(fd)

    def replace(a: Any, b: Any) -> None:
        events.append("replace")
        real_replace(a, b)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    (server.root / "svmguide3.t").write_bytes(TOY)
    fetch("svmguide3.t", url=f"{server.base}/svmguide3.t", sha256=TOY_SHA, dest=tmp_path / "d")
    assert events[:2] == ["fsync", "replace"] and events.count("fsync") == 2  # the file, then the directory
