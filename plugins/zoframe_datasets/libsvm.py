"""Loading LIBSVM sparse text files (``LABEL INDEX:VALUE ...``, 1-based ascending indices).

The fast path is scikit-learn's ``load_svmlight_file``; when it rejects a file (or the file holds
non-finite numbers) a careful line-by-line parse locates the problem and raises
:class:`zoframe.errors.DataFormatError` naming the file, the 1-based line number and what is wrong.
Known datasets are verified against their SHA256 (opt out with ``verify=False``). Parsed arrays are
cached in memory, keyed by the resolved path, its modification time and size; every call returns
fresh copies, so no caller can corrupt the cache.
"""

from __future__ import annotations

import bz2
import functools
import gzip
import hashlib
import lzma
import math
import os
from pathlib import Path
from typing import BinaryIO, cast

import numpy as np
from numpy.typing import NDArray
import scipy.sparse as sp

from zoframe.errors import ChecksumError, DataFormatError, DataNotFoundError, InvalidInputError
from zoframe_datasets.catalog import DatasetInfo, lookup
from zoframe_datasets.paths import PathLike, data_path

FloatArray = NDArray[np.float64]

_FORMAT_HINT = (
    "each line must read `LABEL INDEX:VALUE INDEX:VALUE ...` with a numeric label, integer indices "
    "starting at 1 in strictly ascending order and finite numeric values; fix or remove the line"
)


def sha256_file(path: PathLike) -> str:
    """The hex SHA256 of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@functools.lru_cache(maxsize=64)
def _sha256_cached(path: str, mtime_ns: int, size: int) -> str:
    return sha256_file(path)


def verify_checksum(path: PathLike, expected: str, *, name: str | None = None) -> None:
    """Raise :class:`zoframe.errors.ChecksumError` unless the file's SHA256 equals ``expected``."""
    p = Path(path)
    st = p.stat()
    got = _sha256_cached(str(p.resolve()), st.st_mtime_ns, st.st_size)
    if got != expected.lower():
        label = f"dataset {name!r}" if name else "the file"
        todo = f"run `zoframe data fetch {name} --force`" if name else "replace it with a fresh copy"
        raise ChecksumError(
            f"{label} at {p} does not match its known SHA256: expected {expected}, got {got}. The file "
            f"is corrupted, truncated or a different version: {todo}, or load it anyway with verify=False"
        )


def _resolve(source: PathLike, data_dir: PathLike | None) -> tuple[Path, DatasetInfo | None]:
    """The file to read and its catalogue entry (if it is a known dataset)."""
    if isinstance(source, os.PathLike) or not isinstance(source, str):
        text = os.fspath(source)
        is_path = True
    else:
        text = source
        if not text:
            raise InvalidInputError("load_libsvm needs a dataset name or a file path, got an empty string")
        is_path = lookup(text) is None and (os.sep in text or "/" in text or Path(text).is_file())
    if not is_path:
        return data_path(text, data_dir), lookup(text)
    p = Path(text).expanduser()
    if not p.is_file():
        known = lookup(p.name)
        hint = (
            f"; {p.name!r} is the known dataset {known.name!r}: `zoframe data fetch {known.name} --dir {p.parent}` "
            f"downloads it there"
            if known is not None and not p.is_dir()
            else ""
        )
        raise DataNotFoundError(
            f"no LIBSVM file at {p}{' (it is a directory)' if p.is_dir() else ''}: check the path, "
            f"or pass a known dataset name (see `zoframe data list`){hint}"
        )
    return p, lookup(p.name)


def load_libsvm(
    source: PathLike,
    *,
    data_dir: PathLike | None = None,
    n_features: int | None = None,
    verify: bool = True,
) -> tuple[sp.csr_matrix, FloatArray]:
    """Load a LIBSVM file: ``X`` (``csr_matrix`` float64, ``(n, n_features)``) and labels ``y`` (float64, ``(n,)``).

    ``source`` is a catalogue name (``"a9a"``, see :data:`zoframe_datasets.DATASETS`), a file name
    looked up in the data directories, or a path. ``n_features`` defaults to the catalogue's value
    for known datasets (a9a.t's largest index is 122 but it has 123 features), else the largest
    index present. ``verify`` checks the SHA256 of known datasets, including a file given by a path
    whose name is a catalogue file name (a file of your own called ``a9a`` needs ``verify=False``).
    """
    if n_features is not None and (isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)) or n_features < 1):
        raise InvalidInputError(f"n_features must be a positive integer or None, got {n_features!r}")
    path, info = _resolve(source, data_dir)
    if verify and info is not None and info.sha256 is not None:
        verify_checksum(path, info.sha256, name=info.name)
    nf = int(n_features) if n_features is not None else (info.n_features if info is not None else None)
    st = path.stat()
    X, y = _load_cached(str(path.resolve()), st.st_mtime_ns, st.st_size, nf)
    return X.copy(), y.copy()


def clear_cache() -> None:
    """Forget every parsed file and checksum held in memory."""
    _load_cached.cache_clear()
    _sha256_cached.cache_clear()


@functools.lru_cache(maxsize=16)
def _load_cached(path: str, mtime_ns: int, size: int, n_features: int | None) -> tuple[sp.csr_matrix, FloatArray]:
    X, y = _parse_fast(path, n_features)
    # the cached arrays are never handed out (callers get copies); read-only guards our own code
    for arr in (X.data, X.indices, X.indptr, y):
        arr.flags.writeable = False
    return X, y


def _parse_fast(path: str, n_features: int | None) -> tuple[sp.csr_matrix, FloatArray]:
    from zoframe._optional import require

    load_svmlight_file = require("sklearn.datasets", feature="loading LIBSVM files").load_svmlight_file

    try:
        Xs, ys = load_svmlight_file(path, n_features=n_features, dtype=np.float64, zero_based=False)
    except (ValueError, UnicodeDecodeError, OSError, EOFError, OverflowError) as exc:
        parse_careful(path, n_features)  # raises DataFormatError with the line number
        raise DataFormatError(
            f"{path}: the LIBSVM parser rejected the file ({exc}) but the line-by-line check found no "
            f"malformed line; {_FORMAT_HINT}"
        ) from exc
    X = sp.csr_matrix(Xs, dtype=np.float64)
    y = np.asarray(ys, dtype=np.float64)
    if X.shape[0] == 0:
        raise DataFormatError(f"{path}: the file holds no data rows; {_FORMAT_HINT}")
    if not (np.all(np.isfinite(X.data)) and np.all(np.isfinite(y))):
        parse_careful(path, n_features)  # raises on the first non-finite number
    if not X.has_sorted_indices:
        X.sort_indices()
    return X, y


def _open_binary(path: str) -> BinaryIO:
    suffix = Path(path).suffix
    if suffix == ".bz2":
        return cast(BinaryIO, bz2.open(path, "rb"))
    if suffix == ".gz":
        return cast(BinaryIO, gzip.open(path, "rb"))
    if suffix == ".xz":
        return cast(BinaryIO, lzma.open(path, "rb"))
    return open(path, "rb")


#: the largest feature index a sparse matrix with 32-bit column indices holds
_MAX_INDEX = int(np.iinfo(np.int32).max)


def parse_careful(path: PathLike, n_features: int | None = None) -> tuple[sp.csr_matrix, FloatArray]:
    """Parse a LIBSVM file line by line, raising :class:`DataFormatError` at the first bad line.

    Slower than :func:`load_libsvm`'s fast path (pure Python) but exact about what is wrong and
    where: the error names the file, the 1-based line number and the offending token. Blank lines
    and ``#`` comments are skipped; a ``qid:N`` token right after the label is accepted and ignored.
    """
    fname = os.fspath(path)
    labels: list[float] = []
    indptr: list[int] = [0]
    indices: list[int] = []
    values: list[float] = []
    max_index = 0

    def fail(lineno: int, what: str) -> DataFormatError:
        return DataFormatError(f"{fname}, line {lineno}: {what}; {_FORMAT_HINT}")

    with _open_binary(fname) as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise fail(lineno, "the line is not text (bytes that are not UTF-8)") from None
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            tokens = line.split()
            head = tokens[0]
            if ":" in head:
                raise fail(lineno, f"the line starts with {head!r} instead of a label")
            try:
                label = float(head)
            except ValueError:
                raise fail(lineno, f"the label {head!r} is not a number") from None
            if not math.isfinite(label):
                raise fail(lineno, f"the label {head!r} is not finite")
            rest = tokens[1:]
            if rest and rest[0].startswith("qid:"):
                qid = rest[0][4:]
                if not qid.lstrip("-").isdigit():
                    raise fail(lineno, f"the query id {rest[0]!r} is not an integer")
                rest = rest[1:]
            prev = 0
            for tok in rest:
                idx_s, sep, val_s = tok.partition(":")
                if not sep:
                    raise fail(lineno, f"the token {tok!r} is not of the form INDEX:VALUE")
                try:
                    idx = int(idx_s)
                except ValueError:
                    raise fail(lineno, f"the feature index {idx_s!r} in {tok!r} is not an integer") from None
                if idx < 1:
                    raise fail(lineno, f"the feature index {idx} is below 1 (LIBSVM indices start at 1)")
                if idx > _MAX_INDEX:
                    raise fail(lineno, f"the feature index {idx_s} in {tok!r} is too large (at most {_MAX_INDEX})")
                if idx <= prev:
                    raise fail(lineno, f"the feature index {idx} follows {prev}: indices must be strictly ascending")
                if n_features is not None and idx > n_features:
                    raise fail(lineno, f"the feature index {idx} exceeds n_features={n_features}")
                try:
                    val = float(val_s)
                except ValueError:
                    raise fail(lineno, f"the value {val_s!r} of feature {idx} is not a number") from None
                if not math.isfinite(val):
                    raise fail(lineno, f"the value {val_s!r} of feature {idx} is not finite")
                prev = idx
                indices.append(idx - 1)
                values.append(val)
            max_index = max(max_index, prev)
            labels.append(label)
            indptr.append(len(indices))
    if not labels:
        raise DataFormatError(f"{fname}: the file holds no data rows; {_FORMAT_HINT}")
    ncols = n_features if n_features is not None else max_index
    X = sp.csr_matrix(
        (np.asarray(values, dtype=np.float64), np.asarray(indices, dtype=np.int32), np.asarray(indptr, dtype=np.int64)),
        shape=(len(labels), ncols),
    )
    return X, np.asarray(labels, dtype=np.float64)
