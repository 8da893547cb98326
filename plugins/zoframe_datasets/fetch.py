"""Opt-in download of the known datasets (``zoframe data fetch NAME``).

The file is downloaded with :mod:`urllib` into a temporary file in the destination directory,
decompressed if the remote is compressed (``.bz2``, ``.gz``, ``.xz``), converted if the remote is
in another format (Roweis' ``20news_w100.mat`` -> LIBSVM text), given ``\\n`` line endings (the
checksummed copies have them), verified against the known SHA256, flushed to disk (``fsync``) and
only then moved into place with an atomic rename (the directory entry is synced too). Whatever
fails, nothing partial is left behind; a fetch that was killed (``kill -9``, a power cut) leaves
its temporaries, and the next fetch into that directory removes them (:func:`clean_stale_temporaries`):
they are named ``.<file>.part-<host>-<pid>-<random><suffix>``, and one is stale when its process
on this host is gone or when nobody has written to it for :data:`STALE_SECONDS`.

The address is, in order: the ``url`` argument, ``$ZOFRAME_DATA_URL_BASE/<remote file name>``, the
official address of the catalogue.
"""

from __future__ import annotations

import bz2
from collections.abc import Callable
import contextlib
from dataclasses import dataclass
import gzip
import lzma
import os
from pathlib import Path
import re
import shutil
import socket
import tempfile
import time
from typing import BinaryIO, cast
import urllib.error
import urllib.parse
import urllib.request

import numpy as np
import scipy.sparse as sp

from zoframe.errors import ChecksumError, UnknownNameError, ZoframeError
from zoframe_datasets.catalog import DATASETS, DatasetInfo
from zoframe_datasets.libsvm import sha256_file
from zoframe_datasets.paths import PathLike, data_dir

#: Environment variable giving a base address to download from instead of the official one
#: (a mirror, or a local server in tests): the remote file name is appended to it.
ENV_URL_BASE = "ZOFRAME_DATA_URL_BASE"

_CHUNK = 1 << 16

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


def clean_stale_temporaries(directory: PathLike, *, now: float | None = None) -> list[Path]:
    """Remove the temporaries of fetches that were killed in ``directory``; returns what was removed.

    A temporary (see the module docstring) is stale when its process on this host no longer runs,
    or when it has not been written to for :data:`STALE_SECONDS` (its process may be on another host
    sharing the directory, or its pid reused). Temporaries of running fetches are kept.
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
            idle = now - path.stat().st_mtime
        except OSError:  # its fetch just finished
            continue
        pid = m.group("pid")
        dead = pid is not None and m.group("host") == host and not _alive(int(pid))
        if dead or idle > STALE_SECONDS:
            with contextlib.suppress(OSError):  # gone already, or a read-only directory: best effort
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
) -> FetchResult:
    """Download the known dataset ``name`` into ``dest`` (default: :func:`zoframe_datasets.data_dir`).

    ``sha256`` overrides the catalogue's checksum of the final file; ``verify=False`` skips the
    check (the digest is still returned). An existing file is kept (and verified) unless ``force``.
    Raises :class:`FetchError` on download or decompression failure and
    :class:`zoframe.errors.ChecksumError` on a mismatch; in both cases nothing is written.
    """
    info = DATASETS.get(name)
    if info is None:
        raise UnknownNameError("dataset", name, list(DATASETS))
    if sha256 is not None:
        sha256 = sha256.strip().lower()
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            raise FetchError(f"sha256 must be 64 hexadecimal digits, got {sha256!r}")
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

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FetchError(f"cannot create the data directory {directory}: {exc}; pass --dir DIR") from exc

    temps: list[Path] = []

    def temp(suffix: str) -> Path:
        prefix = f".{info.file}.part-{_host()}-{os.getpid()}-"
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=directory)
        os.close(fd)
        temps.append(Path(tmp))
        return Path(tmp)

    try:
        raw = temp(".download")
        _download(source, raw, timeout, target)
        plain = _decompress(raw, source, temp)
        if info.remote.endswith(".mat"):
            if verify and sha256 is None and info.remote_sha256 is not None:
                got = sha256_file(plain)
                if got != info.remote_sha256:
                    raise ChecksumError(_mismatch(info, source, info.remote_sha256, got, what=info.remote))
            final = temp(".libsvm")
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
        temps.remove(final)
        _fsync_directory(directory)
    finally:
        for t in temps:
            with contextlib.suppress(FileNotFoundError):
                t.unlink()
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


def _download(url: str, out: Path, timeout: float, target: Path) -> None:
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in ("http", "https", "file"):
        raise FetchError(f"cannot download {url!r}: only http, https and file addresses are supported")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp, open(out, "wb") as fh:
            shutil.copyfileobj(resp, fh, _CHUNK)
    except urllib.error.HTTPError as exc:
        raise FetchError(
            f"downloading {url} failed with HTTP {exc.code} {exc.reason}: check the address (--url), "
            f"or download the file by hand and put it at {target}"
        ) from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise FetchError(
            f"downloading {url} failed ({reason}): check the network connection or the address "
            f"(--url), or download the file by hand and put it at {target}"
        ) from None


def _decompress(raw: Path, url: str, temp: Callable[[str], Path]) -> Path:
    path = urllib.parse.urlsplit(url).path
    openers: dict[str, Callable[[Path], BinaryIO]] = {
        ".bz2": lambda p: cast(BinaryIO, bz2.open(p, "rb")),
        ".gz": lambda p: cast(BinaryIO, gzip.open(p, "rb")),
        ".xz": lambda p: cast(BinaryIO, lzma.open(p, "rb")),
    }
    opener = openers.get(Path(path).suffix)
    if opener is None:
        return raw
    out = temp(".plain")
    try:
        with opener(raw) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst, _CHUNK)
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise FetchError(f"the download from {url} is not a valid {Path(path).suffix} archive ({exc}); retry") from None
    return out


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
