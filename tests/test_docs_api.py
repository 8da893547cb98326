"""The signature of ``zoframe.minimize`` shown in docs/api.md is the real one, and every argument is
described in the page's table."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
import re

import zoframe

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "api.md"


def _section(text: str, title: str) -> str:
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def _shown_signature(section: str) -> ast.arguments:
    m = re.search(r"```python\n(zoframe\.minimize\(.*?\) -> \w+)\n```", section, re.S)
    assert m is not None, "docs/api.md: no ```python block with the zoframe.minimize(...) signature"
    source = "def " + m.group(1).removeprefix("zoframe.") + ": ..."
    fn = ast.parse(source).body[0]
    assert isinstance(fn, ast.FunctionDef)
    return fn.args


def test_minimize_signature_in_the_docs_is_the_real_one() -> None:
    shown = _shown_signature(_section(API.read_text(encoding="utf-8"), "minimize"))
    real = inspect.signature(zoframe.minimize).parameters
    positional = [a.arg for a in shown.posonlyargs + shown.args]
    keyword = [a.arg for a in shown.kwonlyargs]
    var_kw = shown.kwarg.arg if shown.kwarg is not None else None
    real_positional = [n for n, p in real.items() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    real_keyword = [n for n, p in real.items() if p.kind is p.KEYWORD_ONLY]
    real_var_kw = next((n for n, p in real.items() if p.kind is p.VAR_KEYWORD), None)
    assert positional == real_positional, (positional, real_positional)
    assert keyword == real_keyword, f"docs: {keyword}\nreal: {real_keyword}"
    assert var_kw == real_var_kw
    defaults = dict(zip(positional[len(positional) - len(shown.defaults):], shown.defaults, strict=True))
    defaults.update({a.arg: d for a, d in zip(shown.kwonlyargs, shown.kw_defaults, strict=True) if d is not None})
    for name, node in defaults.items():
        assert ast.literal_eval(node) == real[name].default, (name, ast.unparse(node), real[name].default)
    required = [n for n, p in real.items() if p.default is p.empty and p.kind is not p.VAR_KEYWORD]
    assert [n for n in positional + keyword if n not in defaults] == required


def test_every_minimize_argument_is_described() -> None:
    section = _section(API.read_text(encoding="utf-8"), "minimize")
    table = "\n".join(line for line in section.splitlines() if line.startswith("| `"))
    described = set(re.findall(r"`\**(\w+)`", " ".join(line.split("|")[1] for line in table.splitlines())))
    missing = [n for n in inspect.signature(zoframe.minimize).parameters if n not in described]
    assert not missing, f"docs/api.md's minimize table does not describe {missing}"


def test_the_plugin_page_and_the_shipped_example_agree() -> None:
    """Every component the page's hook module names by "module:attr" is named so by the example's plugin.py."""
    page = (ROOT / "docs" / "writing-a-plugin.md").read_text(encoding="utf-8")
    example = ROOT / "docs" / "examples" / "zoframe-example-plugin" / "zoframe_example"
    plugin = (example / "plugin.py").read_text(encoding="utf-8")
    refs = set(re.findall(r'"(zoframe_example\.\w+:\w+)"', page))
    assert len(refs) >= 3, refs  # estimator, solver, problem
    for ref in refs:
        module, attr = ref.split(":")
        assert f'"{ref}"' in plugin, f"docs/writing-a-plugin.md names {ref}; the example's plugin.py does not"
        source = (example / (module.split(".", 1)[1] + ".py")).read_text(encoding="utf-8")
        assert re.search(rf"^(class|def) {attr}\b", source, re.M), f"{ref}: no {attr} in the example"
    names = set(re.findall(r'name="([\w-]+)"', plugin))
    assert {"antithetic", "tiny-signsgd", "planted-ls"} <= names
    assert "import numpy" not in plugin and "from zoframe_example." not in plugin  # the hook module stays light
