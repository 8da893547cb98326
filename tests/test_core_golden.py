"""Fixed-seed Results stay bit-identical: one solver of each family against a stored reference.

The reference (tests/data/golden/) was produced by ``python tests/data/golden/make_golden.py``; a
difference means the run loop, the oracle or a solver changed a computed number.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
import sys
from types import ModuleType

import pytest

GOLDEN_DIR = Path(__file__).resolve().parent / "data" / "golden"


def _golden() -> ModuleType:
    spec = importlib.util.spec_from_file_location("zoframe_golden_cases", GOLDEN_DIR / "make_golden.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


golden = _golden()
DOCS, ARRAYS = golden.load()


@pytest.mark.parametrize("case", sorted(golden.CASES))
def test_minimize_reproduces_the_stored_result_bit_for_bit(case: str) -> None:
    res = golden.run_case(case)
    assert golden.differences(res, DOCS[case], ARRAYS[case]) == []


def test_the_comparison_sees_a_one_ulp_change() -> None:
    import dataclasses

    import numpy as np

    case = "zo-sgd/quadratic"
    res = golden.run_case(case)
    x = res.x.copy()
    x[0] = np.nextafter(x[0], np.inf)
    diffs = golden.differences(dataclasses.replace(res, x=x), DOCS[case], ARRAYS[case])
    assert len(diffs) == 1 and diffs[0].startswith("array x:")
