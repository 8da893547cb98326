"""Batches on a dask.distributed LocalCluster (loopback) give results identical to in-process."""

from __future__ import annotations

import numpy as np
import pytest

import zoframe

distributed = pytest.importorskip("distributed", reason="the zoframe[distributed] extra is not installed")


def ls_components(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng(0)
    A = rng.standard_normal((40, X.shape[1]))
    b = A @ np.ones(X.shape[1])
    r = X @ A[idx].T - b[idx]
    return r * r


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_dask_local_cluster_matches_in_process() -> None:
    prob = zoframe.FiniteSum(ls_components, n=40, x0=np.zeros(4))
    kw = {"rng": 11, "max_iter": 15, "eta": 0.02, "q": 8, "batch": 10, "record_every": 5}
    ref = zoframe.minimize(prob, "zo-sgd", **kw)
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:
        res = zoframe.minimize(prob, "zo-sgd", executor=client.get_executor(), chunks=3, **kw)
    assert np.array_equal(res.x, ref.x) and res.nfev == ref.nfev
    assert np.array_equal(res.trace["fun"], ref.trace["fun"])
