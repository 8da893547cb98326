"""zoframe_datasets: LIBSVM datasets for zoframe's experiments.

Finds data by explicit argument, else ``$ZOFRAME_DATA``, else the user cache directory; verifies
known files by SHA256; parses them fast into ``scipy.sparse`` matrices; downloads them on request
(``zoframe data fetch NAME``). See docs/data.md.

The public names are imported on first access (module ``__getattr__``), so importing the package
(which loading its hook module :mod:`zoframe_datasets.plugin` does) imports none of its submodules
(scipy.sparse comes with :mod:`zoframe_datasets.libsvm`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zoframe._lazy import lazy_exports

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


__getattr__, __dir__ = lazy_exports(__name__, _SOURCES)


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
