"""The builders check the user callable's signature against the calling convention when built."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

import zoframe

X0 = np.zeros(3)


def _two(X: Any, idx: Any) -> Any:
    return X[:, :1] + 0.0 * idx[None, :]


class Vectorised:
    def __call__(self, X: Any, idx: Any) -> Any:
        return _two(X, idx)


@pytest.mark.parametrize(
    ("build", "expected", "shown"),
    [
        # the README's mistake: the indexed form with the default n = 1
        (lambda: zoframe.FiniteSum(lambda X, idx: X.sum(1), x0=X0), "fun(X) -> (k,)", "(X, idx)"),
        (lambda: zoframe.FiniteSum(lambda X: X.sum(1), n=4, x0=X0), "fun(X, idx) -> (k, b)", "(X)"),
        (lambda: zoframe.FiniteSum(lambda x: x.sum(), n=4, x0=X0, vectorized=False), "fun(x, i) -> float", "(x)"),
        (lambda: zoframe.Constrained(lambda X: X.sum(1), lambda X: X, m=3, x0=X0),
         "constraints_fun(X, idx) -> (k, b)", "(X)"),
        (lambda: zoframe.Constrained(lambda X, idx: X.sum(1), _two, m=3, x0=X0), "objective(X) -> (k,)", "(X, idx)"),
        (lambda: zoframe.Minimax(lambda X, Y, idx: X.sum(1), X0, X0), "fun(X, Y) -> (k,)", "(X, Y, idx)"),
        (lambda: zoframe.Composite(lambda X, idx: X.sum(1), X0, np.eye(3), [np.eye(3)], np.zeros(3),
                                   [zoframe.penalties.L1(1.0)]), "fun(X) -> (k,)", "(X, idx)"),
        (lambda: zoframe.FiniteSum(Vectorised(), x0=X0), "fun(X) -> (k,)", "(X, idx)"),
    ],
)
def test_a_callable_of_the_wrong_form_is_refused_when_built(build: Any, expected: str, shown: str) -> None:
    with pytest.raises(zoframe.InvalidInputError) as info:
        build()
    msg = str(info.value)
    assert f"called as {expected}" in msg
    assert f"signature is {shown}:" in msg
    if "n = 1:" in msg:  # the fix for the README's mistake is named
        assert "pass n=<number of components> for a finite sum" in msg


def test_the_signature_is_shown_as_written_without_annotations() -> None:
    def f(X: Any, *, scale: float = 2.0) -> Any:
        return X.sum(1) * scale

    with pytest.raises(zoframe.InvalidInputError) as info:
        zoframe.FiniteSum(f, n=3, x0=X0)
    assert "its signature is (X, *, scale=2.0):" in str(info.value)


@pytest.mark.parametrize(
    "build",
    [
        lambda: zoframe.FiniteSum(lambda X: X.sum(1), x0=X0),
        lambda: zoframe.FiniteSum(_two, n=2, x0=X0),
        lambda: zoframe.FiniteSum(Vectorised(), n=2, x0=X0),
        lambda: zoframe.FiniteSum(functools.partial(lambda X, idx, s: _two(X, idx) * s, s=2.0), n=2, x0=X0),
        lambda: zoframe.FiniteSum(lambda *args: args[0].sum(1), n=2, x0=X0),
        lambda: zoframe.FiniteSum(lambda X, idx=None: X.sum(1), x0=X0),
        lambda: zoframe.FiniteSum(np.linalg.norm, x0=X0),  # norm(x, ord=None, ...) accepts one argument
        lambda: zoframe.FiniteSum(np.sin, x0=X0),          # a ufunc: no signature to read, accepted as is
        lambda: zoframe.Minimax(lambda X, Y: X.sum(1) - Y.sum(1), X0, X0),
        lambda: zoframe.Constrained(lambda x: float(x.sum()), lambda x, j: float(x[j]), m=3, x0=X0, vectorized=False),
    ],
)
def test_the_documented_forms_are_accepted(build: Any) -> None:
    build()


def test_a_non_callable_is_refused() -> None:
    with pytest.raises(zoframe.InvalidInputError, match="fun must be callable"):
        zoframe.FiniteSum(np.ones(3), x0=X0)  # type: ignore[arg-type]


def test_the_checked_form_is_the_form_zoframe_calls() -> None:
    seen: list[int] = []

    def f(X: Any, idx: Any) -> Any:
        seen.append(len(idx))
        return _two(X, idx)

    prob = zoframe.FiniteSum(f, n=5, x0=X0)
    res = zoframe.minimize(prob, "zo-sgd", steps="paper", rng=0, max_iter=3, batch=2, q=2)
    assert res.nit == 3 and seen and set(seen) <= {2, 5}
