"""Problems of one's own, for the commands that take ``module:attr`` or ``path/to/file.py:attr``.

From a clone of zoframe::

    zoframe solve docs/examples/my_problems.py:shifted_sphere --problem-arg dim=5 --solver cobyla --max-calls 2000
    zoframe rate zo-sgd docs/examples/my_problems.py:shifted_sphere --seeds 3 --budget 300 -p eta=0.05
    zoframe bench docs/examples/my_problems.py:collection --solvers cobyla,nelder-mead --budget 500
"""

from __future__ import annotations

import numpy as np

import zoframe


def _sphere(X: np.ndarray) -> np.ndarray:
    return ((X - 1.0) ** 2).sum(axis=1)  # type: ignore[no-any-return]


def _box(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return X[:, idx] - 0.5  # x_j <= 0.5


def shifted_sphere(dim: int = 5) -> zoframe.FiniteSum:
    """min ||x - 1||^2 (a factory: ``--problem-arg dim=...``)."""
    return zoframe.FiniteSum(_sphere, x0=np.zeros(dim))


def capped_sphere(dim: int = 5) -> zoframe.Constrained:
    """min ||x - 1||^2 subject to x_j <= 0.5 (optimum x = 0.5, f = dim / 4)."""
    return zoframe.Constrained(_sphere, _box, m=dim, x0=np.zeros(dim))


#: a ready problem object (takes no --problem-arg)
sphere_3 = shifted_sphere(3)

#: a collection for ``zoframe bench``: one instance per entry
collection = {"sphere-5": shifted_sphere(5), "capped-5": capped_sphere(5)}
