"""The documentation site builds with ``mkdocs build --strict`` (every warning is an error).

The build covers every page of docs/ and the API reference that mkdocstrings generates from the
docstrings (docs/reference.md), so a broken link, a page left out or a docstring the parser cannot
read fails here.
"""

from __future__ import annotations

from pathlib import Path
import subprocess
import sys

ROOT = Path(__file__).resolve().parents[1]


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"), "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    problems = [line for line in proc.stderr.splitlines() if not line.startswith("INFO")]
    assert proc.returncode == 0, "mkdocs build --strict failed:\n" + "\n".join(problems)
    assert not problems, "\n".join(problems)
    # every page of docs/ is on the site, and the reference holds the documented objects
    pages = {p.relative_to(ROOT / "docs").with_suffix("") for p in (ROOT / "docs").rglob("*.md")}
    for page in pages:
        target = site / "index.html" if page == Path("index") else site / page / "index.html"
        assert target.is_file(), f"docs/{page}.md was not built"
    reference = (site / "reference" / "index.html").read_text(encoding="utf-8")
    for anchor in ("zoframe.driver.minimize", "zoframe.result.Result.load", "zoframe.plot.trace", "zoframe.problems.FiniteSum"):
        assert f'id="{anchor}"' in reference, anchor
