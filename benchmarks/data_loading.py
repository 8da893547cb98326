"""Parse time of the largest bundled LIBSVM files (a9a, w8a) with the fast loader.

Each file is parsed ``--repeats`` times from disk (the in-memory cache is cleared before each
parse); the JSON gives the median and best seconds per file. Needs the files in ``$ZOFRAME_DATA``
(or ``--data-dir``). Prints ONE final line of JSON::

    python benchmarks/data_loading.py --repeats 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from zoframe_datasets import clear_cache, load_libsvm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="a9a,w8a")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    load_libsvm("svmguide3", data_dir=args.data_dir)  # import and warm the parser: import time is not measured
    out: dict[str, object] = {"benchmark": "data_loading", "repeats": args.repeats}
    for name in args.datasets.split(","):
        times = []
        for _ in range(args.repeats):
            clear_cache()
            t0 = time.perf_counter()
            X, _y = load_libsvm(name, data_dir=args.data_dir)
            times.append(time.perf_counter() - t0)
        out[name] = {"shape": list(X.shape), "nnz": int(X.nnz), "median_s": statistics.median(times), "best_s": min(times)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
