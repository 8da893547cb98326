"""Opt-in download of the known datasets (``zoframe data fetch NAME``).

The download is :mod:`pooch`'s (extra ``data``): streamed into a temporary file, the remote file's
SHA256 checked where the catalogue knows it, retried ``retries`` times on a network failure
(``requests`` underneath, so proxies and certificates follow the usual environment variables). A
``file://`` address is copied instead. zoframe then does what is specific to its catalogue: it
decompresses a compressed remote (``.bz2``, ``.gz``, ``.xz``, with pooch's :class:`~pooch.Decompress`),
converts a remote in another format (Roweis' ``20news_w100.mat`` -> LIBSVM text), gives the file
``\n`` line endings (the checksummed copies have them), checks the SHA256 of that final file, flushes
it to disk (``fsync``) and only then moves it into place with an atomic rename (the directory entry is
synced too).

All of this happens in a staging directory inside the destination, named
``.<file>.part-<host>-<pid>-<random>.download``, removed whatever fails, so nothing partial is left
behind. A fetch that was killed (``kill -9``, a power cut) leaves its staging directory, and the next
fetch into that directory removes it (:func:`clean_stale_temporaries`): one is stale when its process
on this host is gone or when nobody has written to it for :data:`STALE_SECONDS`.

The address is, in order: the ``url`` argument, ``$ZOFRAME_DATA_URL_BASE/<remote file name>``, the
official address of the catalogue.
"""

from __future__ import annotations

from collections.abc import Iterator
import contextlib
from dataclasses import dataclass
import logging
import os
from pathlib import Path
import re
import secrets
import shutil
import socket
import time
from typing import Any
import urllib.parse
import urllib.request

import numpy as np
import scipy.sparse as sp

from zoframe._optional import require
from zoframe.errors import ChecksumError, UnknownNameError, ZoframeError
from zoframe_datasets.catalog import DATASETS, DatasetInfo
from zoframe_datasets.libsvm import sha256_file
from zoframe_datasets.paths import PathLike, data_dir

#: Environment variable giving a base address to download from instead of the official one
#: (a mirror, or a local server in tests): the remote file name is appended to it.
ENV_URL_BASE = "ZOFRAME_DATA_URL_BASE"

#: a temporary nobody has written to for this long is stale whatever its name says (seconds)
STALE_SECONDS = 3600.0

_TEMP_SUFFIXES = (".download", ".plain", ".libsvm")
# .<file>.part-<host>-<pid>-<random><suffix>, and the names of older versions: .<file>.<random><suffix>
_TEMP_RE = re.compile(r"^\.(?P<file>.+?)\.(?:part-(?P<host>[A-Za-z0-9_]*)-(?P<pid>\d+)-)?[A-Za-z0-9_]+(?:\.download|\.plain|\.libsvm)$")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname())[:40]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    except OSError:
        return False
    return True


def _last_write(path: Path) -> float:
    """The newest modification time of ``path`` and, for a staging directory, of what it holds."""
    newest = path.stat().st_mtime
    if path.is_dir():
        for entry in path.iterdir():
            with contextlib.suppress(OSError):
                newest = max(newest, entry.stat().st_mtime)
    return newest


def clean_stale_temporaries(directory: PathLike, *, now: float | None = None) -> list[Path]:
    """Remove the temporaries of fetches that were killed in ``directory``; returns what was removed.

    A temporary (a staging directory, or a file of an older version; see the module docstring) is
    stale when its process on this host no longer runs, or when nothing in it has been written to for
    :data:`STALE_SECONDS` (its process may be on another host sharing the directory, or its pid
    reused). Temporaries of running fetches are kept.
    """
    folder = Path(directory)
    if not folder.is_dir():
        return []
    now = time.time() if now is None else now
    host = _host()
    removed = []
    try:
        entries = list(folder.iterdir())
    except OSError:  # unreadable: nothing we could clean
        return []
    for path in entries:
        m = _TEMP_RE.match(path.name)
        if m is None or not path.name.endswith(_TEMP_SUFFIXES):
            continue
        try:
            idle = now - _last_write(path)
        except OSError:  # its fetch just finished
            continue
        pid = m.group("pid")
        dead = pid is not None and m.group("host") == host and not _alive(int(pid))
        if dead or idle > STALE_SECONDS:
            with contextlib.suppress(OSError):  # gone already, or a read-only directory: best effort
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
                removed.append(path)
    return removed


def _fsync(path: Path) -> None:
    with open(path, "rb+") as fh:
        os.fsync(fh.fileno())


def _fsync_directory(directory: Path) -> None:
    """Make a rename durable (POSIX); a no-op where directories cannot be opened (Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class FetchError(ZoframeError, OSError):
    """A download failed (network, HTTP status, corrupt archive, unwritable directory)."""


@dataclass(frozen=True)
class FetchResult:
    """What :func:`fetch` did: the file's path, its SHA256, where it came from, whether it was downloaded."""

    path: Path
    sha256: str
    url: str
    downloaded: bool
    verified: bool


def resolve_url(info: DatasetInfo, url: str | None = None) -> str:
    """The address to download ``info`` from: ``url``, else ``$ZOFRAME_DATA_URL_BASE``, else the official one."""
    if url:
        return url
    base = os.environ.get(ENV_URL_BASE, "")
    if base:
        return base.rstrip("/") + "/" + urllib.parse.quote(info.remote)
    return info.url


def fetch(
    name: str,
    *,
    url: str | None = None,
    sha256: str | None = None,
    dest: PathLike | None = None,
    force: bool = False,
    verify: bool = True,
    timeout: float = 60.0,
    retries: int = 2,
) -> FetchResult:
    """Download the known dataset ``name`` into ``dest`` (default: :func:`zoframe_datasets.data_dir`).

    ``sha256`` overrides the catalogue's checksum of the final file; ``verify=False`` skips the
    check (the digest is still returned). An existing file is kept (and verified) unless ``force``.
    ``retries``: further attempts after a network failure (pooch waits 1 s, 2 s, ... between them).
    Raises :class:`FetchError` on download or decompression failure and
    :class:`zoframe.errors.ChecksumError` on a mismatch; in both cases nothing is written. Needs
    :mod:`pooch` (extra ``data``) for ``http``/``https`` addresses.
    """
    info = DATASETS.get(name)
    if info is None:
        raise UnknownNameError("dataset", name, list(DATASETS))
    if sha256 is not None:
        sha256 = sha256.strip().lower()
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            raise FetchError(f"sha256 must be 64 hexadecimal digits, got {sha256!r}")
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
        raise FetchError(f"retries must be an integer >= 0, got {retries!r}")
    expected = (sha256 or info.sha256) if verify else None
    source = resolve_url(info, url)
    directory = data_dir(dest)
    target = directory / info.file
    clean_stale_temporaries(directory)

    if target.exists() and not force:
        digest = sha256_file(target)
        if expected is not None and digest != expected:
            raise ChecksumError(
                f"{target} already exists but its SHA256 is {digest}, not the expected {expected}: "
                f"run `zoframe data fetch {name} --force` to replace it"
            )
        return FetchResult(target, digest, source, downloaded=False, verified=expected is not None)

    scheme = urllib.parse.urlsplit(source).scheme
    if scheme not in ("http", "https", "file"):
        raise FetchError(f"cannot download {source!r}: only http, https and file addresses are supported")
    pooch = _pooch() if scheme != "file" else None  # a missing extra is said before anything is created
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FetchError(f"cannot create the data directory {directory}: {exc}; pass --dir DIR") from exc

    staging = directory / f".{info.file}.part-{_host()}-{os.getpid()}-{secrets.token_hex(4)}.download"
    try:
        staging.mkdir()
        # the remote file's own checksum, where the catalogue knows it: pooch checks it on download
        remote_hash = None
        if verify and sha256 is None and info.remote_sha256 is not None and not info.remote_is_compressed:
            remote_hash = f"sha256:{info.remote_sha256}"
        remote = Path(urllib.parse.unquote(urllib.parse.urlsplit(source).path)).name or info.remote
        raw = _download(pooch, source, staging, remote, remote_hash, timeout, retries, target, info)
        plain = _decompress(pooch, raw, source)
        if info.remote.endswith(".mat"):
            if remote_hash is None and verify and sha256 is None and info.remote_sha256 is not None:
                got = sha256_file(plain)
                if got != info.remote_sha256:
                    raise ChecksumError(_mismatch(info, source, info.remote_sha256, got, what=info.remote))
            final = staging / (info.file + ".libsvm")
            _mat_to_libsvm(plain, final)
        else:
            final = plain
            _normalise_newlines(final)
        digest = sha256_file(final)
        if expected is not None and digest != expected:
            raise ChecksumError(_mismatch(info, source, expected, digest, what=info.file))
        os.chmod(final, 0o644)
        _fsync(final)  # the bytes are on disk before the name points at them
        os.replace(final, target)
        _fsync_directory(directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return FetchResult(target, digest, source, downloaded=True, verified=expected is not None)


def _mismatch(info: DatasetInfo, source: str, expected: str, got: str, *, what: str) -> str:
    msg = (
        f"the download of {info.name!r} from {source} does not match the known SHA256 of {what}: "
        f"expected {expected}, got {got}. Nothing was written. The download may be corrupted or "
        "the remote file may have changed; retry, or if you trust this copy pass --sha256 " + got
    )
    if info.notes:
        msg += f" (note on this dataset: {info.notes})"
    return msg


def _pooch() -> Any:
    return require("pooch", extra="data", feature="downloading datasets (zoframe data fetch)")


@contextlib.contextmanager
def _pooch_notices(pooch: Any) -> Iterator[None]:
    """Pooch's own messages (it prints them on stderr by default) go to zoframe's logger instead."""
    plog = pooch.get_logger()
    handlers, level, propagate = list(plog.handlers), plog.level, plog.propagate
    target = logging.getLogger("zoframe.data")

    class Forward(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            target.debug("pooch: %s", record.getMessage())

    for h in handlers:
        plog.removeHandler(h)
    forward = Forward()
    plog.addHandler(forward)
    plog.propagate = False
    try:
        yield
    finally:
        plog.removeHandler(forward)
        for h in handlers:
            plog.addHandler(h)
        plog.setLevel(level)
        plog.propagate = propagate


def _download(
    pooch: Any, url: str, staging: Path, fname: str, known_hash: str | None, timeout: float, retries: int,
    target: Path, info: DatasetInfo,
) -> Path:
    """``url`` downloaded to ``staging/fname`` (pooch; a ``file://`` address is copied); its path."""
    out = staging / fname
    if pooch is None:  # file://: nothing to download
        src = Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
        try:
            shutil.copyfile(src, out)
        except OSError as exc:
            raise FetchError(f"cannot read {url} ({exc}): check the address (--url)") from None
        if known_hash is not None and sha256_file(out) != known_hash.removeprefix("sha256:"):
            raise ChecksumError(_mismatch(info, url, known_hash.removeprefix("sha256:"), sha256_file(out), what=fname))
        return out
    import requests

    store = pooch.create(path=staging, base_url="", registry={fname: known_hash}, urls={fname: url},
                         retry_if_failed=retries)
    try:
        with _pooch_notices(pooch):
            return Path(store.fetch(fname, downloader=pooch.HTTPDownloader(timeout=timeout, progressbar=False)))
    except requests.exceptions.HTTPError as exc:
        resp = exc.response
        code = "" if resp is None else f" {resp.status_code} {resp.reason}"
        raise FetchError(
            f"downloading {url} failed with HTTP{code}: check the address (--url), "
            f"or download the file by hand and put it at {target}"
        ) from None
    except requests.exceptions.RequestException as exc:
        raise FetchError(
            f"downloading {url} failed after {retries + 1} attempt(s) ({type(exc).__name__}: {exc}): check the "
            f"network connection or the address (--url), or download the file by hand and put it at {target}"
        ) from None
    except ValueError as exc:  # pooch: the download does not match the remote file's known hash
        if known_hash is None or "hash" not in str(exc).lower():
            raise
        got = sha256_file(out) if out.exists() else "(the download was removed)"
        raise ChecksumError(_mismatch(info, url, known_hash.removeprefix("sha256:"), got, what=fname)) from None


def _decompress(pooch: Any, raw: Path, url: str) -> Path:
    """``raw`` decompressed next to itself when the address names a ``.bz2`` / ``.gz`` / ``.xz`` file."""
    suffix = Path(urllib.parse.urlsplit(url).path).suffix
    if suffix not in (".bz2", ".gz", ".xz"):
        return raw
    decompress = (pooch or _pooch()).Decompress(method="auto", name=raw.name + ".plain")
    try:
        with _pooch_notices(pooch or _pooch()):
            return Path(decompress(str(raw), "download", None))
    except (OSError, EOFError, ValueError) as exc:
        raise FetchError(f"the download from {url} is not a valid {suffix} archive ({exc}); retry") from None


def _normalise_newlines(path: Path) -> None:
    data = path.read_bytes()
    if b"\r" in data:
        path.write_bytes(data.replace(b"\r\n", b"\n").replace(b"\r", b"\n"))


def _mat_to_libsvm(mat: Path, out: Path) -> None:
    """Rewrite Roweis' ``20news_w100.mat`` as LIBSVM text: label = newsgroup, feature j = word j present."""
    import scipy.io

    try:
        m = scipy.io.loadmat(str(mat))
        docs = sp.csr_matrix(m["documents"].T)
        groups = np.asarray(m["newsgroups"]).ravel().astype(np.int64)
    except (ValueError, KeyError, OSError, TypeError) as exc:
        raise FetchError(f"the downloaded file is not the expected MATLAB file ({exc}); retry") from None
    docs.sort_indices()
    with open(out, "w", encoding="ascii", newline="\n") as fh:
        for i in range(docs.shape[0]):
            cols = docs.indices[docs.indptr[i] : docs.indptr[i + 1]]
            line = " ".join([str(groups[i])] + [f"{c + 1}:1" for c in cols]) + "\n"
            fh.write(line)
