"""The kept libraries under ``zoframe data``: pooch downloads (retries, the remote checksum, its notices),
platformdirs for the cache directory, and what happens when either is not installed.

Everything is served from 127.0.0.1 or read from ``file://`` addresses; nothing leaves the machine.
"""

from __future__ import annotations

from collections.abc import Iterator
import hashlib
import http.server
import logging
import os
from pathlib import Path
import sys
import threading
import time
from typing import Any

import pytest

from zoframe._optional import MissingDependencyError
from zoframe.errors import ChecksumError
from zoframe_datasets.fetch import STALE_SECONDS, FetchError, clean_stale_temporaries, fetch
from zoframe_datasets.paths import cache_dir, search_report

pooch = pytest.importorskip("pooch", reason="pooch is part of the extra 'data' (pip install -e '.[data]')")

TOY = b"1 1:0.5 3:2\n-1 2:1\n1 1:-1 2:0.25 3:4\n"
TOY_SHA = hashlib.sha256(TOY).hexdigest()


class Flaky:
    """Serves ``body`` on 127.0.0.1 after answering the first ``failures`` requests with HTTP 503."""

    def __init__(self, body: bytes, failures: int) -> None:
        self.hits = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.hits += 1
                if outer.hits <= failures:
                    self.send_error(503, "busy")
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.thread.join(timeout=5)
        self.httpd.server_close()


@pytest.fixture
def flaky() -> Iterator[Any]:
    made: list[Flaky] = []

    def make(body: bytes, failures: int) -> Flaky:
        made.append(Flaky(body, failures))
        return made[-1]

    yield make
    for srv in made:
        srv.close()


def test_pooch_retries_a_failed_download(flaky: Any, tmp_path: Path) -> None:
    srv = flaky(TOY, failures=1)
    res = fetch("svmguide3.t", url=f"{srv.base}/svmguide3.t", sha256=TOY_SHA, dest=tmp_path / "a", retries=1)
    assert res.downloaded and res.verified and srv.hits == 2
    srv = flaky(TOY, failures=1)
    with pytest.raises(FetchError, match="HTTP 503"):
        fetch("svmguide3.t", url=f"{srv.base}/svmguide3.t", sha256=TOY_SHA, dest=tmp_path / "b", retries=0)
    assert srv.hits == 1 and list((tmp_path / "b").iterdir()) == []


def test_the_remote_checksum_is_checked_by_pooch(flaky: Any, tmp_path: Path) -> None:
    """20news_w100's remote .mat has a known SHA256: a different file is refused before any conversion."""
    srv = flaky(b"not the MATLAB file", failures=0)
    dest = tmp_path / "dest"
    with pytest.raises(ChecksumError, match=r"does not match the known SHA256 of 20news_w100\.mat"):
        fetch("20news_w100", url=f"{srv.base}/20news_w100.mat", dest=dest, retries=0)
    assert list(dest.iterdir()) == []


def test_pooch_notices_go_to_the_zoframe_logger(
    flaky: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    srv = flaky(TOY, failures=0)
    with caplog.at_level(logging.DEBUG, logger="zoframe"):
        fetch("svmguide3.t", url=f"{srv.base}/svmguide3.t", sha256=TOY_SHA, dest=tmp_path)
    assert capfd.readouterr().err == ""  # pooch prints on stderr by default: not inside zoframe
    assert any(r.name == "zoframe.data" and "pooch: Downloading" in r.getMessage() for r in caplog.records)
    assert pooch.get_logger().handlers and not any(
        type(h).__name__ == "Forward" for h in pooch.get_logger().handlers
    )  # pooch's own handler is back afterwards


def test_a_local_file_address_needs_no_download(tmp_path: Path) -> None:
    src = tmp_path / "svmguide3.t"
    src.write_bytes(TOY.replace(b"\n", b"\r\n"))
    res = fetch("svmguide3.t", url=src.as_uri(), sha256=TOY_SHA, dest=tmp_path / "d")
    assert res.verified and (tmp_path / "d" / "svmguide3.t").read_bytes() == TOY


def test_without_pooch_the_error_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pooch", None)  # as if not installed
    with pytest.raises(MissingDependencyError, match=r"zoframe\[data\]"):
        fetch("svmguide3.t", url="http://127.0.0.1:9/svmguide3.t", dest=tmp_path / "d")
    assert not (tmp_path / "d").exists()  # said before anything is created
    src = tmp_path / "svmguide3.t"
    src.write_bytes(TOY)
    assert fetch("svmguide3.t", url=src.as_uri(), sha256=TOY_SHA, dest=tmp_path / "e").verified


def test_stale_staging_directories_are_removed(tmp_path: Path) -> None:
    from zoframe_datasets.fetch import _host

    dead = tmp_path / f".a9a.part-{_host()}-999999999-abcd1234.download"
    live = tmp_path / f".a9a.part-{_host()}-{os.getpid()}-abcd1235.download"
    for d in (dead, live):
        d.mkdir()
        (d / "a9a").write_bytes(b"partial")
    old = time.time() - STALE_SECONDS - 60
    idle = tmp_path / ".w8a.part-otherhost-1-abcd1236.download"
    idle.mkdir()
    (idle / "w8a").write_bytes(b"x")
    os.utime(idle / "w8a", (old, old))
    os.utime(idle, (old, old))
    busy = tmp_path / ".w8a.part-otherhost-1-abcd1237.download"
    busy.mkdir()
    (busy / "w8a").write_bytes(b"x")  # written just now, though the directory itself is old
    os.utime(busy, (old, old))
    removed = {p.name for p in clean_stale_temporaries(tmp_path)}
    assert removed == {dead.name, idle.name}
    assert live.is_dir() and busy.is_dir()


def test_cache_directory_from_platformdirs_and_without_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    platformdirs = pytest.importorskip("platformdirs", reason="platformdirs is part of the extra 'data'")
    monkeypatch.delenv("ZOFRAME_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == Path(platformdirs.user_cache_dir("zoframe", appauthor=False)) / "data"
    if sys.platform.startswith("linux"):
        assert cache_dir() == tmp_path / "xdg" / "zoframe" / "data"
    monkeypatch.setitem(sys.modules, "platformdirs", None)
    assert cache_dir() == tmp_path / "xdg" / "zoframe" / "data"  # the XDG rule without platformdirs
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == tmp_path / "home" / ".cache" / "zoframe" / "data"
    places = [row[0] for row in search_report()]
    assert places == ["explicit directory (--dir / data_dir)", "$ZOFRAME_DATA", "user cache directory"]
