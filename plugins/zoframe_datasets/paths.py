"""Where zoframe looks for data files.

Resolution order: an explicit directory argument, else the ``ZOFRAME_DATA`` environment variable,
else the user cache directory (:func:`cache_dir`: the platform's user cache directory from
:mod:`platformdirs` plus ``zoframe/data``; on Linux ``$XDG_CACHE_HOME/zoframe/data``, or
``~/.cache/zoframe/data`` when ``XDG_CACHE_HOME`` is unset). An explicit directory is the only place looked; without one, a file
missing from ``ZOFRAME_DATA`` is still found in the cache directory (where ``zoframe data fetch``
puts files when ``ZOFRAME_DATA`` is unset).
"""

from __future__ import annotations

import os
from pathlib import Path

from zoframe.errors import DataNotFoundError, InvalidInputError
from zoframe_datasets.catalog import DATASETS, lookup

#: Environment variable naming the data directory.
ENV_DATA = "ZOFRAME_DATA"

PathLike = str | os.PathLike[str]


def cache_dir() -> Path:
    """The user cache data directory ``<user cache>/zoframe/data``.

    The user cache directory is the platform's, as :mod:`platformdirs` knows it (extra ``data``):
    ``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux, ``~/Library/Caches`` on macOS,
    ``%LOCALAPPDATA%\\zoframe\\Cache`` on Windows. Without platformdirs the Linux rule is used on
    every platform.
    """
    try:
        import platformdirs
    except ImportError:  # the core install: the XDG rule
        xdg = os.environ.get("XDG_CACHE_HOME", "")
        base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
        return base / "zoframe" / "data"
    return Path(platformdirs.user_cache_dir("zoframe", appauthor=False)) / "data"


def search_dirs(data_dir: PathLike | None = None) -> list[tuple[Path, str]]:
    """The directories looked in, in order, each with where it came from."""
    if data_dir is not None:
        text = os.fspath(data_dir)
        if not text:
            raise InvalidInputError("data_dir is an empty string: pass a directory path or None")
        return [(Path(text).expanduser(), "data_dir argument")]
    out: list[tuple[Path, str]] = []
    env = os.environ.get(ENV_DATA, "")
    if env:
        out.append((Path(env).expanduser(), f"{ENV_DATA} environment variable"))
    out.append((cache_dir(), "user cache directory"))
    return out


def search_report(data_dir: PathLike | None = None) -> list[tuple[str, Path | None, str]]:
    """Every place zoframe can look for data, in order, with whether it is looked in and why not.

    Rows ``(place, directory or None, state)``: the explicit directory (``--dir`` / ``data_dir``),
    ``$ZOFRAME_DATA`` and the user cache directory. ``state`` is ``"looked in"``, ``"looked in,
    does not exist"``, ``"not given"``, ``"not set"`` or ``"not looked in: ..."``.
    """

    def seen(d: Path) -> str:
        return "looked in" if d.is_dir() else "looked in, does not exist"

    rows: list[tuple[str, Path | None, str]] = []
    env = os.environ.get(ENV_DATA, "")
    if data_dir is not None:
        d = search_dirs(data_dir)[0][0]
        rows.append(("explicit directory (--dir / data_dir)", d, seen(d)))
        skip = "not looked in: an explicit directory is the only place looked"
        rows.append((f"${ENV_DATA}", Path(env).expanduser() if env else None, skip if env else "not set"))
        rows.append(("user cache directory", cache_dir(), skip))
        return rows
    rows.append(("explicit directory (--dir / data_dir)", None, "not given"))
    if env:
        d = Path(env).expanduser()
        rows.append((f"${ENV_DATA}", d, seen(d)))
    else:
        rows.append((f"${ENV_DATA}", None, "not set"))
    rows.append(("user cache directory", cache_dir(), seen(cache_dir())))
    return rows


def data_dir(data_dir: PathLike | None = None) -> Path:
    """The data directory zoframe uses (and where ``zoframe data fetch`` writes).

    The explicit argument if given, else ``$ZOFRAME_DATA``, else the user cache directory. The
    directory need not exist yet.
    """
    return search_dirs(data_dir)[0][0]


def data_path(name: str, data_dir: PathLike | None = None) -> Path:
    """The path of dataset ``name`` (a catalogue name such as ``"a9a"`` or a file name).

    Raises :class:`zoframe.errors.DataNotFoundError` naming every directory looked in, where to put
    the file, the official download address and the ``zoframe data fetch`` command.
    """
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"a dataset name must be a non-empty string, got {name!r}")
    info = lookup(name)
    file = info.file if info is not None else name
    dirs = search_dirs(data_dir)
    for d, _ in dirs:
        candidate = d / file
        if candidate.is_file():
            return candidate
    raise DataNotFoundError(missing_message(name, file, dirs))


def missing_message(name: str, file: str, dirs: list[tuple[Path, str]]) -> str:
    """The text of the error raised when a dataset file is missing."""
    info = lookup(name)
    looked = "\n".join(f"  - {d / file} ({origin})" for d, origin in dirs)
    lines = [
        f"dataset {name!r} was not found: no file {file!r} in any data directory. Looked in:",
        looked,
        f"Put the file {file!r} in {dirs[0][0]} (or set {ENV_DATA} to the directory that holds it, "
        "or pass data_dir=... / --dir DIR).",
    ]
    if info is not None:
        how = f"Download it from {info.url}"
        if info.remote_is_compressed:
            how += f" (served compressed as {info.remote!r}: decompress it to {file!r})"
        elif info.remote != info.file:
            how += f" (served as {info.remote!r}: `zoframe data fetch` converts it to {file!r})"
        lines.append(how + f", or run `zoframe data fetch {info.name}`.")
    else:
        lines.append(
            f"{name!r} is not a known dataset name (known: {', '.join(sorted(DATASETS))}); "
            "a file of your own can be loaded by passing its path."
        )
    return "\n".join(lines)
