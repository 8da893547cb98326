"""Fixed-seed Results stay identical: one solver of each family against a stored reference.

The reference (tests/data/golden/) was produced by ``python tests/data/golden/make_golden.py``
together with the fingerprint of its environment (numpy, BLAS library and kernel, processor).
Under the same fingerprint every field must match bit for bit; elsewhere floats must agree within
``make_golden.RTOL`` of their scale (and everything else exactly). A difference means the run loop,
the oracle or a solver changed a computed number.
"""

from __future__ import annotations

import dataclasses

from helpers import load_golden
import numpy as np
import pytest

golden = load_golden("zoframe_golden_cases")
STORED_FINGERPRINT, DOCS, ARRAYS = golden.load()
HERE_FINGERPRINT = golden.fingerprint()
EXACT = HERE_FINGERPRINT == STORED_FINGERPRINT
MODE = (
    "bit for bit (this environment has the reference's fingerprint)"
    if EXACT
    else f"within rtol={golden.RTOL} of each value's scale, since this environment {HERE_FINGERPRINT} "
    f"differs from the reference's {STORED_FINGERPRINT}"
)


@pytest.mark.parametrize("case", sorted(golden.CASES))
def test_minimize_reproduces_the_stored_result(case: str) -> None:
    res = golden.run_case(case)
    diffs = golden.differences(res, DOCS[case], ARRAYS[case], exact=EXACT)
    assert diffs == [], f"{case} compared {MODE}: " + "; ".join(diffs)


def test_the_stored_reference_covers_every_case() -> None:
    assert sorted(DOCS) == sorted(golden.CASES)
    assert set(STORED_FINGERPRINT) == {"numpy", "blas", "blas_core", "machine"}


def _fresh(case: str) -> tuple[object, dict[str, object], dict[str, np.ndarray]]:
    res = golden.run_case(case)
    doc, arrays = golden.encode(res)
    return res, doc, arrays


def test_the_exact_comparison_sees_a_one_ulp_change() -> None:
    res, doc, arrays = _fresh("zo-sgd/quadratic")
    assert golden.differences(res, doc, arrays, exact=True) == []
    x = res.x.copy()  # type: ignore[attr-defined]
    x[0] = np.nextafter(x[0], np.inf)
    diffs = golden.differences(dataclasses.replace(res, x=x), doc, arrays, exact=True)  # type: ignore[type-var]
    assert len(diffs) == 1 and diffs[0].startswith("array x:")


def test_the_tolerant_comparison_sees_a_change_beyond_its_tolerance() -> None:
    res, doc, arrays = _fresh("zo-sgd/quadratic")
    x = res.x.copy()  # type: ignore[attr-defined]
    scale = float(np.max(np.abs(x)))
    x[0] += 0.5 * golden.RTOL * scale  # within the tolerance
    assert golden.differences(dataclasses.replace(res, x=x), doc, arrays, exact=False) == []  # type: ignore[type-var]
    x[0] += 10 * golden.RTOL * scale  # beyond it
    diffs = golden.differences(dataclasses.replace(res, x=x), doc, arrays, exact=False)  # type: ignore[type-var]
    assert len(diffs) == 1 and diffs[0].startswith("array x:")
    fun = res.fun * (1 + 10 * golden.RTOL)  # type: ignore[attr-defined]
    diffs = golden.differences(dataclasses.replace(res, fun=fun), doc, arrays, exact=False)  # type: ignore[type-var]
    assert [d.split(":")[0] for d in diffs] == ["fun"]
    nit = res.nit + 1  # type: ignore[attr-defined]
    diffs = golden.differences(dataclasses.replace(res, nit=nit), doc, arrays, exact=False)  # type: ignore[type-var]
    assert [d.split(":")[0] for d in diffs] == ["nit"]
