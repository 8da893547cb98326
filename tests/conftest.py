"""Shared test configuration: tests that need the real LIBSVM data sets.

A test that reads real LIBSVM files says so with ``@pytest.mark.data("a9a", ...)`` (the catalogue
names it needs). Where a named file cannot be found (``$ZOFRAME_DATA``, else the user cache
directory; see ``zoframe data list``) the test is skipped, with a reason that says how to get the
files. A data error that escapes a test without the mark is treated the same way. Set
``ZOFRAME_REQUIRE_DATA=1`` (as ``.ci/run`` does) to make a missing data set a failure instead: with
the data at hand, every data test then runs.
"""

from __future__ import annotations

from collections.abc import Generator
import os

import pytest

from zoframe.errors import DataNotFoundError

REQUIRE = "ZOFRAME_REQUIRE_DATA"


def _required() -> bool:
    return os.environ.get(REQUIRE, "").strip() not in ("", "0", "false", "no")


def _how_to_get(names: list[str]) -> str:
    fetch = f"zoframe data fetch {' '.join(names) if names else 'NAME'}"
    return (
        f"run `{fetch}` (downloads into the user cache directory) or set ZOFRAME_DATA to a directory "
        f"holding the files; `zoframe data list` shows where zoframe looks (set {REQUIRE}=1 to fail instead of skip)"
    )


def _missing(names: list[str]) -> list[str]:
    from zoframe_datasets.paths import data_path

    out = []
    for name in names:
        try:
            data_path(name)
        except DataNotFoundError:
            out.append(name)
    return out


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "data(*names): the test reads these real LIBSVM data sets (catalogue names); skipped with a reason "
        f"when they are missing, a failure when {REQUIRE}=1",
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    names: list[str] = []
    for mark in item.iter_markers("data"):
        names.extend(str(a) for a in mark.args)
    if not names:
        return
    missing = _missing(sorted(set(names)))
    if not missing:
        return
    text = f"needs the LIBSVM data set(s) {', '.join(missing)}, not found: {_how_to_get(missing)}"
    if _required():
        pytest.fail(f"{REQUIRE} is set but this test {text}", pytrace=False)
    pytest.skip(text)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, None, None]:
    """A DataNotFoundError that escapes an unmarked test is a skip with the same reason (not a failure),
    unless the data are required."""
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or not call.excinfo.errisinstance(DataNotFoundError) or _required():
        return
    first = str(call.excinfo.value).splitlines()[0]
    report.outcome = "skipped"
    report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {first}; {_how_to_get([])}")
