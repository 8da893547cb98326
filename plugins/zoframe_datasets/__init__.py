"""zoframe_datasets: LIBSVM datasets for zoframe's experiments.

Finds data by explicit argument, else ``$ZOFRAME_DATA``, else the user cache directory; verifies
known files by SHA256; parses them fast into ``scipy.sparse`` matrices; downloads them on request
(``zoframe data fetch NAME``). See docs/data.md.
"""

from __future__ import annotations

from zoframe_datasets.catalog import DATASETS, LIBSVM_BINARY_URL, DatasetInfo
from zoframe_datasets.libsvm import clear_cache, load_libsvm, parse_careful, sha256_file, verify_checksum
from zoframe_datasets.paths import ENV_DATA, cache_dir, data_dir, data_path, search_dirs
from zoframe_datasets.sampling import binary_labels, stratified_subsample

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
