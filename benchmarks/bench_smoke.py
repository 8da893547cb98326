"""Wall time of ``zoframe bench smoke --solvers zo-sgd,cobyla,nelder-mead --seeds 2 --budget 2000``.

Target: under 2 minutes on 2 cores, with the profiles written. The command runs in a fresh process
(``python -m zoframe.cli``) in a temporary directory with a fresh store (``--workers 2`` by default;
``--workers 1`` for a serial run). Prints one JSON line: the wall time, the number of runs, the files
written and the numpy / scipy versions.

    python benchmarks/bench_smoke.py [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        cmd = [sys.executable, "-m", "zoframe.cli", "bench", "smoke", "--solvers", "zo-sgd,cobyla,nelder-mead",
               "--seeds", "2", "--budget", "2000", "--out", str(out), "--quiet"]
        if args.workers > 1:
            cmd += ["--workers", str(args.workers)]
        env = {**os.environ, "MPLBACKEND": "Agg"}
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        written = sorted(p.name for p in out.glob("*")) if out.exists() else []
        summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    runs = sum(int(s["runs"]) for s in summary.get("solvers", {}).values())
    print(json.dumps({
        "benchmark": "bench_smoke", "command": " ".join(cmd[2:]).replace(str(out), "OUT"), "exit_code": proc.returncode,
        "wall_seconds": round(wall, 2), "target_seconds": 120, "runs": runs, "files": written,
        "profiles_written": {"performance_profiles.png", "data_profiles.png", "ecdf.png"} <= set(written),
        "cpu_count": os.cpu_count(), "numpy": np.__version__, "scipy": scipy.__version__,
        "stderr_tail": proc.stderr[-300:] if proc.returncode else "",
    }))


if __name__ == "__main__":
    main()
