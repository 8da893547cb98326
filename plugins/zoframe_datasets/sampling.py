"""Label handling and stratified subsampling for binary classification experiments."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from zoframe.errors import InvalidInputError


def binary_labels(y: ArrayLike) -> NDArray[np.float64]:
    """Map a label vector with exactly two distinct values to -1/+1 (the larger value becomes +1).

    Returns a new float64 array; ``y`` is not modified. Raises
    :class:`zoframe.errors.InvalidInputError` for non-finite labels or a number of distinct labels
    other than two (e.g. 20news_w100 with groups 1..4: build the one-against-rest task first,
    ``np.where(y == g, 1.0, -1.0)``).
    """
    arr = np.asarray(y, dtype=np.float64)
    if arr.ndim != 1:
        raise InvalidInputError(f"labels must be a 1-D array, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InvalidInputError("labels contain NaN or infinity: clean the labels before mapping them to -1/+1")
    values = np.unique(arr)
    if values.size != 2:
        shown = ", ".join(f"{v:g}" for v in values[:10]) + (", ..." if values.size > 10 else "")
        raise InvalidInputError(
            f"binary_labels needs exactly two distinct labels, got {values.size} ({shown}); for a "
            "multi-class set pick one class against the rest first, e.g. np.where(y == c, 1.0, -1.0)"
        )
    return np.where(arr == values[1], 1.0, -1.0)


def stratified_subsample(
    y_pm: ArrayLike,
    n: int,
    pos_fraction: float | None = None,
    *,
    rng: np.random.Generator,
) -> NDArray[np.intp]:
    """Sorted indices of ``n`` distinct samples with a fixed share of positives.

    ``y_pm`` holds -1/+1 labels (see :func:`binary_labels`). Exactly
    ``n_pos = floor(n * pos_fraction + 0.5)`` indices are drawn without replacement from the
    positives and ``n - n_pos`` from the negatives, uniformly within each class, using ``rng``.
    ``pos_fraction=None`` keeps the data's own share of positives. Raises
    :class:`zoframe.errors.InvalidInputError` when a class has too few samples.
    """
    labels = np.asarray(y_pm, dtype=np.float64)
    if labels.ndim != 1:
        raise InvalidInputError(f"labels must be a 1-D array, got shape {labels.shape}")
    if not np.all((labels == 1.0) | (labels == -1.0)):
        raise InvalidInputError("stratified_subsample needs -1/+1 labels: map them first with binary_labels(y)")
    if not isinstance(rng, np.random.Generator):
        raise InvalidInputError(
            f"rng must be a numpy Generator (np.random.default_rng(seed)), got {type(rng).__name__}"
        )
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InvalidInputError(f"n must be a positive integer, got {n!r}")
    pos = np.flatnonzero(labels == 1.0)
    neg = np.flatnonzero(labels == -1.0)
    if pos_fraction is None:
        frac = pos.size / labels.size
    else:
        frac = float(pos_fraction)
        if not 0.0 <= frac <= 1.0:
            raise InvalidInputError(f"pos_fraction must lie in [0, 1], got {pos_fraction!r}")
    n_pos = int(np.floor(n * frac + 0.5))
    n_neg = int(n) - n_pos
    if n_pos > pos.size or n_neg > neg.size:
        raise InvalidInputError(
            f"cannot draw {n_pos} positives and {n_neg} negatives without replacement: the labels "
            f"hold {pos.size} positives and {neg.size} negatives; lower n or change pos_fraction"
        )
    chosen = np.concatenate([rng.choice(pos, size=n_pos, replace=False), rng.choice(neg, size=n_neg, replace=False)])
    return np.sort(chosen)
