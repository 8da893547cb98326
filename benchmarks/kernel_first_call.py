"""What the compiled kernel (``zoframe[fast]``) costs on first use: compiling, or loading it from the cache.

Each measurement is a fresh Python process (``--runs`` of each, median reported) that builds the
pairwise breast-cancer problem (m = 18,868: the sparse form of p, where the kernel is used) and then
times, with ``time.perf_counter``:

* ``first_steps_s``: ``init`` and the first 3 steps of ``adszog`` and ``dszog`` (``steps="paper"`` and
  ``"auto"``), which reach every compiled function: numba's import, and the compilation (``cold``, an
  empty cache directory) or the loading of the cached machine code (``warm``, the cache the cold run
  wrote), plus the steps' own work;
* ``first_steps_cpu_s``: the same in CPU time of the process (``time.process_time``: less sensitive to
  other jobs on the machine than the wall-clock time);
* ``next_steps_s``: the same 3 steps once more in the same process (no first-call cost left);

for ``ZOFRAME_KERNEL=numba`` cold and warm, and ``ZOFRAME_KERNEL=numpy`` (the reference, no numba).
The first-call cost of the kernel (``first_call_cost_cold_s``, ``..._warm_s``, and ``..._cpu_s``) is
``first_steps_s`` (``first_steps_cpu_s``) minus that of the numpy path. The cache lives
in ``NUMBA_CACHE_DIR`` (a temporary directory here; by default numba writes next to the package, in
``__pycache__``).

Prints one final line of JSON.

    python benchmarks/kernel_first_call.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any

CHILD = r"""
import json, time
t0 = time.perf_counter()
import numpy as np
from zoframe.oracle import CountingOracle
from zoframe_constrained.problems import pairwise
from zoframe_constrained.solvers import ADSZOG, DSZOG
t_import = time.perf_counter() - t0
prob = pairwise("breast-cancer", seed=0)

def steps(n):
    for cls in (ADSZOG, DSZOG):
        for mode in ("paper", "auto"):
            solver = cls(steps=mode, p_form="sparse")
            oracle = CountingOracle(prob)
            rng = np.random.default_rng(0)
            state = solver.init(oracle, np.asarray(prob.x0, dtype=np.float64), rng)
            for _ in range(n):
                state = solver.step(oracle, state, rng)

t1, c1 = time.perf_counter(), time.process_time(); steps(3)
first, first_cpu = time.perf_counter() - t1, time.process_time() - c1
t2 = time.perf_counter(); steps(3); again = time.perf_counter() - t2
import sys
print(json.dumps({"import_s": t_import, "first_steps_s": first, "first_steps_cpu_s": first_cpu, "next_steps_s": again,
                  "numba_imported": "numba" in sys.modules}))
"""


def child(kernel: str, cache: str) -> dict[str, Any]:
    env = dict(os.environ, ZOFRAME_KERNEL=kernel, NUMBA_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True, timeout=600)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    rows: dict[str, list[dict[str, Any]]] = {"numpy": [], "numba_cold": [], "numba_warm": []}
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as cache:
            rows["numpy"].append(child("numpy", cache))
            rows["numba_cold"].append(child("numba", cache))  # an empty cache: compiles, writes the cache
            rows["numba_warm"].append(child("numba", cache))  # loads what the cold run wrote
    out: dict[str, Any] = {"runs": args.runs, "python": sys.version.split()[0]}
    for name, runs in rows.items():
        out[name] = {
            key: round(statistics.median(float(r[key]) for r in runs), 3)
            for key in ("import_s", "first_steps_s", "first_steps_cpu_s", "next_steps_s")
        } | {"numba_imported": all(bool(r["numba_imported"]) for r in runs)}
    for name in ("numba_cold", "numba_warm"):
        for key in ("first_steps_s", "first_steps_cpu_s"):
            cost = out[name][key] - out["numpy"][key]
            out[f"first_call_cost_{name[6:]}{key[11:]}"] = round(cost, 3)
    try:
        import numba
        import numpy

        out["numba"], out["numpy_version"] = numba.__version__, numpy.__version__
    except ImportError:
        out["numba"] = None
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
