"""Start-up time of the command line: ``zoframe --help`` and ``zoframe list`` as fresh processes.

Each command runs ``--repeats`` times as a subprocess (interleaved, so a busy machine slows all of
them alike); the JSON gives the median and best wall-clock seconds. Two reference processes run in
the same rounds:

``import``
    ``python -c "import zoframe"``: the floor every command pays (numpy, scipy and the core);
``eager``
    a registry that loads every solver, estimator and problem class (what listing cost when the
    registry imported every plugin module);
``lazy``
    the same registry listing every table without loading a class (what ``zoframe list`` does).

``--importtime`` adds the ten slowest top-level imports of ``zoframe --help``
(``python -X importtime``, cumulative microseconds). Prints ONE final line of JSON::

    python benchmarks/cli_startup.py --repeats 7
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

CLI = "import sys; from zoframe.cli import main; sys.exit(main())"
EAGER = (
    "from zoframe.registry import Registry\n"
    "r = Registry()\n"
    "[p.spec.cls for p in r.solvers().values()]\n"
    "[p.spec.cls for p in r.estimators().values()]\n"
    "[p.spec.factory for p in r.problems().values()]\n"
)
LAZY = (
    "from zoframe.registry import Registry\n"
    "r = Registry()\n"
    "r.solvers(); r.estimators(); r.problems(); r.commands(); r.reproductions()\n"
)


def _command(args: list[str]) -> list[str]:
    """The installed ``zoframe`` script next to this interpreter, else the same entry point via -c."""
    script = Path(sys.executable).with_name("zoframe")
    if script.exists():
        return [str(script), *args]
    found = shutil.which("zoframe")
    return [found, *args] if found else [sys.executable, "-c", CLI, *args]


def _time(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def _slowest_imports(env: dict[str, str], top: int = 10) -> list[tuple[str, int]]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", CLI, "--help"], env=env,
                          capture_output=True, text=True, check=True)
    rows = []
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S.*)$", line)
        if m and not m.group(2).startswith(" "):
            rows.append((m.group(2).strip(), int(m.group(1))))
    return sorted(rows, key=lambda r: -r[1])[:top]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--importtime", action="store_true", help="add the slowest imports of zoframe --help")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    cases = {
        "help": _command(["--help"]),
        "list": _command(["list"]),
        "import": [sys.executable, "-c", "import zoframe"],
        "eager": [sys.executable, "-c", EAGER],
        "lazy": [sys.executable, "-c", LAZY],
    }
    for cmd in cases.values():  # warm the file cache and the bytecode
        _time(cmd, env)
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(args.repeats):
        for name, cmd in cases.items():
            times[name].append(_time(cmd, env))
    out: dict[str, object] = {
        "benchmark": "cli_startup",
        "repeats": args.repeats,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_avg_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }
    for name, ts in times.items():
        out[name] = {"median_s": round(statistics.median(ts), 4), "best_s": round(min(ts), 4)}
    out["eager_over_lazy"] = round(statistics.median(times["eager"]) / statistics.median(times["lazy"]), 3)
    if args.importtime:
        out["slowest_imports_of_help_us"] = _slowest_imports(env)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
