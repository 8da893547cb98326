"""zoframe_datasets: LIBSVM datasets for zoframe's experiments.

Finds data by explicit argument, else ``$ZOFRAME_DATA``, else the user cache directory; verifies
known files by SHA256; parses them fast into ``scipy.sparse`` matrices; downloads them on request
(``zoframe data fetch NAME``). See docs/data.md.

The public names are imported on first access (module ``__getattr__``), so importing the package
(which loading its hook module :mod:`zoframe_datasets.plugin` does) imports none of its submodules
(scipy.sparse comes with :mod:`zoframe_datasets.libsvm`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zoframe_datasets.catalog import DATASETS, LIBSVM_BINARY_URL, DatasetInfo
    from zoframe_datasets.libsvm import clear_cache, load_libsvm, parse_careful, sha256_file, verify_checksum
    from zoframe_datasets.paths import ENV_DATA, cache_dir, data_dir, data_path, search_dirs
    from zoframe_datasets.sampling import binary_labels, stratified_subsample

#: public name -> the submodule that defines it
_SOURCES: dict[str, str] = {
    **dict.fromkeys(("DATASETS", "LIBSVM_BINARY_URL", "DatasetInfo"), "catalog"),
    **dict.fromkeys(("clear_cache", "load_libsvm", "parse_careful", "sha256_file", "verify_checksum"), "libsvm"),
    **dict.fromkeys(("ENV_DATA", "cache_dir", "data_dir", "data_path", "search_dirs"), "paths"),
    **dict.fromkeys(("binary_labels", "stratified_subsample"), "sampling"),
}


def __getattr__(name: str) -> Any:
    """Import a public name from its submodule on first access, then keep it in the package."""
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{source}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "DATASETS",
    "ENV_DATA",
    "LIBSVM_BINARY_URL",
    "DatasetInfo",
    "binary_labels",
    "cache_dir",
    "clear_cache",
    "data_dir",
    "data_path",
    "load_libsvm",
    "parse_careful",
    "search_dirs",
    "sha256_file",
    "stratified_subsample",
    "verify_checksum",
]
