"""Time each composite solver needs to reach a fixed objective gap on the fused-lasso problems.

Huang, Gao, Chen & Huang (IJCAI 2019), Figure 1: the six solvers of ``zoframe_admm`` run under the same
time budget (``max_time``, the solver's own wall-clock time) on the graph-guided fused-lasso problem of each dataset. The gap is ``F - F_ref`` with
``F_ref`` from a separate white-box reference solver (``zoframe_admm.reproduce.reference_objective``:
linearized ADMM with exact gradients, cached), not from the compared runs. Prints ONE final line of JSON::

    python benchmarks/admm_time_to_gap.py --datasets 20news a9a w8a --seconds 20 --gap 1e-4
"""

from __future__ import annotations

import argparse
import dataclasses
import json


def main() -> None:
    from zoframe_admm.problems import FusedLasso
    from zoframe_admm.reproduce import reference_objective, run_fused, time_to_gap, winner

    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["20news", "a9a", "w8a"])
    ap.add_argument("--seconds", type=float, default=20.0, help="seconds of solver time per solver and dataset")
    ap.add_argument("--n-samples", type=int, default=None, help="subsample each dataset before the split")
    ap.add_argument("--gap", type=float, nargs="+", default=[1e-3, 1e-4, 1e-5])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    out: dict[str, object] = {"seconds_per_run": args.seconds, "n_samples": args.n_samples, "datasets": {}}
    for ds in args.datasets:
        prob = FusedLasso(ds, n_samples=args.n_samples, seed=args.seed)
        key = f"fused-lasso|{ds}|{args.n_samples}|{args.seed}|{prob.tau1}|{prob.tau2}|{prob.sigma}|{prob.group}"
        ref = reference_objective(prob, cache_key=key)
        traces = run_fused(ds, seconds=args.seconds, n_samples=args.n_samples, seed=args.seed, progress=False)
        entry: dict[str, object] = {"f_ref": ref.f_ref, "reference": dataclasses.asdict(ref)}
        for gap in args.gap:
            times = time_to_gap(traces, gap, ref.f_ref)
            entry[f"{gap:g}"] = {"seconds": times, "winner": winner(times)}
        entry["final_gap"] = {k: float(t["fun"][-1]) - ref.f_ref for k, t in traces.items()}
        entry["final_test_loss"] = {k: float(t["test_loss"][-1]) for k, t in traces.items()}
        out["datasets"][ds] = entry  # type: ignore[index]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
