"""The ``zoframe data`` command: ``list``, ``info``, ``path`` and ``fetch`` of the known datasets."""

from __future__ import annotations

import argparse
import sys

from zoframe._output import logger
from zoframe.errors import DataNotFoundError, UnknownNameError
from zoframe_datasets.catalog import DATASETS, DatasetInfo
from zoframe_datasets.fetch import ENV_URL_BASE, fetch, resolve_url
from zoframe_datasets.libsvm import sha256_file
from zoframe_datasets.paths import ENV_DATA, data_path, search_dirs, search_report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        f"Datasets: found by --dir, else ${ENV_DATA}, else the user cache directory "
        "(~/.cache/zoframe/data or $XDG_CACHE_HOME/zoframe/data)."
    )
    sub = parser.add_subparsers(dest="data_command", required=True, metavar="{list,info,path,fetch}")
    p_list = sub.add_parser("list", help="known datasets, whether present and where")
    p_list.add_argument("--dir", default=None, help="look only in this directory")
    p_info = sub.add_parser("info", help="size, labels, source address, citation and notes of a dataset")
    p_info.add_argument("name")
    p_path = sub.add_parser("path", help="print the path of a dataset file (error if missing)")
    p_path.add_argument("name")
    p_path.add_argument("--dir", default=None, help="look only in this directory")
    p_fetch = sub.add_parser(
        "fetch",
        help="download datasets from their official address into the data directory",
        description=(
            "Download (pooch, extra 'data'), decompress/convert, verify the SHA256 and atomically move into place. The "
            f"address is --url, else ${ENV_URL_BASE}/<remote file>, else the official one."
        ),
    )
    p_fetch.add_argument("names", nargs="+", metavar="NAME")
    p_fetch.add_argument("--dir", default=None, help="destination directory (default: the data directory)")
    p_fetch.add_argument("--url", default=None, help="download from this address instead (one NAME only)")
    p_fetch.add_argument("--sha256", default=None, help="expected SHA256 of the final file (one NAME only)")
    p_fetch.add_argument("--no-verify", action="store_true", help="do not check the SHA256 (it is printed)")
    p_fetch.add_argument("--force", action="store_true", help="replace an existing file")
    p_fetch.add_argument("--timeout", type=float, default=60.0, help="network timeout in seconds (60)")
    p_fetch.add_argument("--retries", type=int, default=2, help="further attempts after a network failure (2)")


def run(args: argparse.Namespace) -> int:
    handlers = {"list": _list, "info": _info, "path": _path, "fetch": _fetch}
    return handlers[args.data_command](args)


def _known(name: str) -> DatasetInfo:
    info = DATASETS.get(name)
    if info is None:
        raise UnknownNameError("dataset", name, list(DATASETS))
    return info


def _status(info: DatasetInfo, directory: str | None) -> tuple[str, str]:
    try:
        path = data_path(info.name, directory)
    except DataNotFoundError:
        return "missing", str(search_dirs(directory)[0][0] / info.file)
    if info.sha256 is None:
        return "present (no known checksum)", str(path)
    ok = sha256_file(path) == info.sha256
    return ("ok" if ok else "CHECKSUM MISMATCH"), str(path)


def _list(args: argparse.Namespace) -> int:
    print("Where datasets are looked for, in order:")
    for place, d, state in search_report(args.dir):
        print(f"  {place + ':':<40} {'-' if d is None else d}  ({state})")
    print(f"Point zoframe at a directory of your own with --dir DIR or `export {ENV_DATA}=DIR`.")
    print()
    print(f"{'name':<15} {'rows x features':<17} {'status':<28} path")
    for info in DATASETS.values():
        status, where = _status(info, args.dir)
        size = f"{info.n_samples or '?'} x {info.n_features}"
        print(f"{info.name:<15} {size:<17} {status:<28} {where}")
    print("\nMissing ones: `zoframe data fetch NAME`; details: `zoframe data info NAME`.")
    return 0


def _info(args: argparse.Namespace) -> int:
    info = _known(args.name)
    status, where = _status(info, None)
    labels = ", ".join(f"{v:g}" for v in info.labels)
    print(f"{info.name}: {info.n_samples or '?'} rows x {info.n_features} features, labels {{{labels}}}")
    print(f"  file:     {info.file} ({status}: {where})")
    print(f"  sha256:   {info.sha256 or '(unknown)'}")
    print(f"  download: {resolve_url(info)}")
    if info.notes:
        print(f"  notes:    {info.notes}")
    print(f"  cite:     {info.citation}")
    return 0


def _path(args: argparse.Namespace) -> int:
    print(data_path(args.name, args.dir))
    return 0


def _fetch(args: argparse.Namespace) -> int:
    names: list[str] = list(args.names)
    if len(names) > 1 and (args.url or args.sha256):
        print("zoframe: error: --url and --sha256 apply to one dataset: fetch one NAME at a time", file=sys.stderr)
        return 2
    for name in names:
        _known(name)  # every name is checked before anything is downloaded
    for name in names:
        info = DATASETS[name]
        logger("data").info("%s: fetching from %s ...", name, resolve_url(info, args.url))
        res = fetch(
            name, url=args.url, sha256=args.sha256, dest=args.dir, force=args.force,
            verify=not args.no_verify, timeout=args.timeout, retries=getattr(args, "retries", 2),
        )
        what = f"downloaded from {res.url} to" if res.downloaded else "already present at"
        check = "checksum verified" if res.verified else "checksum NOT verified"
        print(f"{name}: {what} {res.path} (sha256 {res.sha256}, {check})")
    return 0
