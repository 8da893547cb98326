"""The LIBSVM loader: real datasets, data-directory resolution, malformed files, checksums, caching."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
import shutil
import time

import numpy as np
import pytest
import scipy.sparse as sp

from zoframe.errors import ChecksumError, DataFormatError, DataNotFoundError, InvalidInputError
from zoframe_datasets import (
    DATASETS,
    cache_dir,
    clear_cache,
    data_dir,
    data_path,
    load_libsvm,
    parse_careful,
    sha256_file,
)

REAL = ("a9a", "a9a.t", "w8a", "svmguide3", "mushrooms", "colon-cancer", "20news_w100")
needs_data = pytest.mark.data(*REAL)  # skipped with a reason when missing (tests/conftest.py)


def _real_data_dir() -> Path:
    """The directory that holds the real data sets (where a9a is found), else ZOFRAME_DATA's value."""
    try:
        return data_path("a9a").parent
    except DataNotFoundError:
        return Path(os.environ.get("ZOFRAME_DATA", ""))


SHARED = _real_data_dir()


def _counts(y: np.ndarray) -> dict[float, int]:
    values, counts = np.unique(y, return_counts=True)
    return {float(v): int(c) for v, c in zip(values, counts)}


# ---------------------------------------------------------------- real data (README.md figures)


@needs_data
@pytest.mark.parametrize(
    ("name", "shape", "counts"),
    [
        ("a9a", (32561, 123), {-1.0: 24720, 1.0: 7841}),
        ("a9a.t", (16281, 123), {-1.0: 12435, 1.0: 3846}),
        ("w8a", (49749, 300), {-1.0: 48270, 1.0: 1479}),
        ("svmguide3", (1243, 22), {-1.0: 947, 1.0: 296}),
        ("mushrooms", (8124, 112), {1.0: 3916, 2.0: 4208}),
        ("colon-cancer", (62, 2000), {-1.0: 40, 1.0: 22}),
        ("20news_w100", (16242, 100), None),
    ],
)
def test_known_datasets_load_with_the_documented_sizes(name: str, shape: tuple[int, int], counts: dict[float, int] | None) -> None:
    X, y = load_libsvm(name)
    assert isinstance(X, sp.csr_matrix)
    assert X.dtype == np.float64 and y.dtype == np.float64
    assert X.shape == shape and y.shape == (shape[0],)
    assert X.has_sorted_indices
    if counts is not None:
        assert _counts(y) == counts
    else:
        assert set(_counts(y)) == {1.0, 2.0, 3.0, 4.0}


@needs_data
def test_a9a_and_w8a_parse_from_disk_after_clearing_the_cache() -> None:
    # parse speed is measured by benchmarks/data_loading.py, not asserted here
    for name, shape in (("a9a", (32561, 123)), ("w8a", (49749, 300))):
        first = load_libsvm(name)[0]
        clear_cache()
        again = load_libsvm(name)[0]
        assert again is not first and again.shape == shape
        assert (again != first).nnz == 0


@needs_data
def test_careful_parser_agrees_with_fast_path_on_svmguide3() -> None:
    X, y = load_libsvm("svmguide3")
    X2, y2 = parse_careful(SHARED / "svmguide3", n_features=22)
    assert X.nnz == X2.nnz  # explicit zeros are kept by both
    assert np.array_equal(X.indptr, X2.indptr) and np.array_equal(X.indices, X2.indices)
    assert np.array_equal(X.data, X2.data) and np.array_equal(y, y2)


@needs_data
def test_path_argument_and_n_features_override(tmp_path: Path) -> None:
    X, _ = load_libsvm(SHARED / "a9a.t")  # a known file by path: catalogue n_features = 123
    assert X.shape[1] == 123
    X, _ = load_libsvm(str(SHARED / "a9a.t"), n_features=150)
    assert X.shape[1] == 150
    copy = tmp_path / "mine.libsvm"
    shutil.copyfile(SHARED / "a9a.t", copy)
    X, _ = load_libsvm(copy)  # unknown file: the largest index present
    assert X.shape[1] == 122
    with pytest.raises(DataFormatError, match=r"line \d+: the feature index 1\d\d exceeds n_features=100"):
        load_libsvm(copy, n_features=100)


@needs_data
def test_cache_returns_independent_copies() -> None:
    X1, y1 = load_libsvm("svmguide3")
    X1.data[:] = -7.0
    y1[:] = 99.0
    X2, y2 = load_libsvm("svmguide3")
    assert not np.any(X2.data == -7.0) and not np.any(y2 == 99.0)
    X2.sort_indices()  # in-place scipy operations work on what callers receive
    X2.data[0] = 1.0


def test_cache_sees_a_rewritten_file(tmp_path: Path) -> None:
    f = tmp_path / "d.libsvm"
    f.write_text("1 1:1\n-1 2:1\n")
    X, _ = load_libsvm(f)
    assert X.shape == (2, 2)
    f.write_text("1 1:1\n-1 2:1\n1 3:5\n")
    os.utime(f, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    X, y = load_libsvm(f)
    assert X.shape == (3, 3) and y.tolist() == [1.0, -1.0, 1.0]


# ---------------------------------------------------------------- resolution order


def _place(directory: Path, content: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "toy.libsvm").write_text(content)


def test_resolution_order_argument_env_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("ZOFRAME_DATA", raising=False)
    cache = home / ".cache" / "zoframe" / "data"
    assert cache_dir() == cache and data_dir() == cache
    env, arg = tmp_path / "env", tmp_path / "arg"
    _place(cache, "1 1:1\n")
    _place(env, "1 1:1\n-1 1:2\n")
    _place(arg, "1 1:1\n-1 1:2\n1 1:3\n")
    assert data_path("toy.libsvm") == cache / "toy.libsvm"
    assert load_libsvm("toy.libsvm")[0].shape[0] == 1
    monkeypatch.setenv("ZOFRAME_DATA", str(env))
    assert data_dir() == env
    assert data_path("toy.libsvm") == env / "toy.libsvm"
    assert load_libsvm("toy.libsvm")[0].shape[0] == 2
    assert data_dir(arg) == arg
    assert data_path("toy.libsvm", arg) == arg / "toy.libsvm"
    assert load_libsvm("toy.libsvm", data_dir=arg)[0].shape[0] == 3
    # a file missing from ZOFRAME_DATA is still found in the cache directory ...
    (env / "toy.libsvm").unlink()
    assert data_path("toy.libsvm") == cache / "toy.libsvm"
    # ... but an explicit directory is the only place looked
    (arg / "toy.libsvm").unlink()
    with pytest.raises(DataNotFoundError):
        data_path("toy.libsvm", arg)


def test_xdg_cache_home_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZOFRAME_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert data_dir() == tmp_path / "xdg" / "zoframe" / "data"


def test_missing_file_message_names_every_place_and_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("ZOFRAME_DATA", str(tmp_path / "env"))
    with pytest.raises(DataNotFoundError) as info:
        load_libsvm("colon-cancer")
    msg = str(info.value)
    assert str(tmp_path / "env" / "colon-cancer") in msg
    assert str(tmp_path / "home" / ".cache" / "zoframe" / "data" / "colon-cancer") in msg
    assert "ZOFRAME_DATA" in msg and "user cache directory" in msg
    assert "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary/colon-cancer.bz2" in msg
    assert "decompress" in msg
    assert "zoframe data fetch colon-cancer" in msg
    assert isinstance(info.value, FileNotFoundError)


def test_unknown_name_and_missing_path(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError, match=r"not a known dataset name.*a9a"):
        load_libsvm("no-such-set", data_dir=tmp_path)
    with pytest.raises(DataNotFoundError, match="no LIBSVM file at"):
        load_libsvm(tmp_path / "absent.libsvm")
    with pytest.raises(DataNotFoundError, match=r"'w8a' is the known dataset 'w8a': `zoframe data fetch w8a --dir"):
        load_libsvm(tmp_path / "w8a")
    with pytest.raises(DataNotFoundError, match="is a directory"):
        load_libsvm(tmp_path)
    with pytest.raises(InvalidInputError):
        load_libsvm("")
    with pytest.raises(InvalidInputError, match="n_features"):
        load_libsvm(tmp_path / "absent.libsvm", n_features=0)


# ---------------------------------------------------------------- malformed files


@pytest.mark.parametrize(
    ("content", "line", "what"),
    [
        ("1 1:0.5 3:2\n-1 2:abc\n", 2, r"the value 'abc' of feature 2 is not a number"),
        ("1 1:1\n\n# comment\nx 1:0.5\n", 4, r"the label 'x' is not a number"),
        ("1 1:1\n1 0:1\n", 2, r"the feature index 0 is below 1"),
        ("1 1:1\n-1 2:1\n1 3:1 2:1\n", 3, r"the feature index 2 follows 3"),
        ("1 3:1 3:1\n", 1, r"the feature index 3 follows 3"),
        ("1 1:1 junk\n", 1, r"the token 'junk' is not of the form INDEX:VALUE"),
        ("1 1:1\n-1 1.5:1\n", 2, r"the feature index '1.5' in '1.5:1' is not an integer"),
        ("1 1:1\n-1 2:nan\n", 2, r"the value 'nan' of feature 2 is not finite"),
        ("1 1:1\ninf 2:1\n", 2, r"the label 'inf' is not finite"),
        ("1 1:1\r\n-1 2:1\r\n1:1 3:1\r\n", 3, r"the line starts with '1:1' instead of a label"),
    ],
)
def test_malformed_lines_are_reported_with_file_and_line(tmp_path: Path, content: str, line: int, what: str) -> None:
    f = tmp_path / "bad.libsvm"
    f.write_bytes(content.encode())
    with pytest.raises(DataFormatError, match=rf"bad\.libsvm, line {line}: {what}") as info:
        load_libsvm(f)
    assert str(f) in str(info.value)
    assert isinstance(info.value, ValueError)


def test_undecodable_and_empty_files(tmp_path: Path) -> None:
    f = tmp_path / "bin.libsvm"
    f.write_bytes(b"1 1:1\n\xff\xfe 2:1\n")
    with pytest.raises(DataFormatError, match=r"line 2: .*not text|line 2: the label"):
        load_libsvm(f)
    e = tmp_path / "empty.libsvm"
    e.write_text("# only a comment\n\n")
    with pytest.raises(DataFormatError, match="no data rows"):
        load_libsvm(e)


def test_valid_edge_cases_parse(tmp_path: Path) -> None:
    f = tmp_path / "ok.libsvm"
    f.write_text("# header\n+1 qid:3 1:1e-3 4:2 # trailing\n-1\n\n2 2:-0.5\r\n")
    X, y = load_libsvm(f)
    assert y.tolist() == [1.0, -1.0, 2.0]
    assert X.toarray().tolist() == [[1e-3, 0, 0, 2], [0, 0, 0, 0], [0, -0.5, 0, 0]]
    X2, y2 = parse_careful(f)
    assert np.array_equal(X.toarray(), X2.toarray()) and np.array_equal(y, y2)


# ---------------------------------------------------------------- checksums


@needs_data
def test_checksum_mismatch_is_reported_and_can_be_skipped(tmp_path: Path) -> None:
    info = DATASETS["svmguide3.t"]
    assert sha256_file(SHARED / info.file) == info.sha256
    bad = tmp_path / info.file
    lines = (SHARED / info.file).read_text().splitlines(keepends=True)
    bad.write_text("".join(lines[:-1]))  # truncated: still a valid LIBSVM file
    with pytest.raises(ChecksumError) as err:
        load_libsvm("svmguide3.t", data_dir=tmp_path)
    msg = str(err.value)
    assert info.sha256 in msg and sha256_file(bad) in msg
    assert "zoframe data fetch svmguide3.t --force" in msg and "verify=False" in msg
    X, y = load_libsvm("svmguide3.t", data_dir=tmp_path, verify=False)
    assert X.shape == (40, 22) and y.shape == (40,)


@needs_data
def test_every_catalogued_checksum_matches_the_shared_copy() -> None:
    for info in DATASETS.values():
        if info.sha256 is not None and (SHARED / info.file).is_file():
            assert sha256_file(SHARED / info.file) == info.sha256, info.name


def test_data_list_shows_every_place_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from zoframe_datasets import cli as data_cli

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    monkeypatch.setenv("ZOFRAME_DATA", str(env_dir))
    parser = argparse.ArgumentParser()
    data_cli.add_arguments(parser)

    def listing(*argv: str) -> dict[str, str]:
        assert data_cli.run(parser.parse_args(["list", *argv])) == 0
        out = capsys.readouterr().out
        head = out.split("\n\n")[0].splitlines()[1:4]
        return {line.split(":")[0].strip(): line for line in head}

    rows = listing()
    assert "(not given)" in rows["explicit directory (--dir / data_dir)"]
    assert f"{env_dir}  (looked in)" in rows["$ZOFRAME_DATA"]
    assert f"{tmp_path / 'cache' / 'zoframe' / 'data'}  (looked in, does not exist)" in rows["user cache directory"]
    monkeypatch.delenv("ZOFRAME_DATA")
    assert "(not set)" in listing()["$ZOFRAME_DATA"]
    rows = listing("--dir", str(tmp_path / "mine"))
    assert f"{tmp_path / 'mine'}  (looked in, does not exist)" in rows["explicit directory (--dir / data_dir)"]
    assert "not looked in: an explicit directory is the only place looked" in rows["user cache directory"]
