"""Checkpoints never choose code to import, and a save is one unit (old pair or new pair, never a mix)."""

from __future__ import annotations

from dataclasses import dataclass
import json
import os
from pathlib import Path
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import zoframe
from zoframe import checkpoint as ckpt
from zoframe.errors import CheckpointError
from zoframe.testing.problems import SmokeFiniteSum
from zoframe_basic.solvers import SGDState


@dataclass(frozen=True)
class LocalState:
    """A state class of a module that no plugin registers (this test module)."""

    x: np.ndarray
    k: int


def _save(path: Path, value: float) -> None:
    ckpt.save(path, SGDState(x=np.full(3, value)), np.random.default_rng(0), {"solver": "zo-sgd", "nit": int(value)},
              {"trace.fun": np.arange(int(value) + 1, dtype=float)})


def _loaded_value(path: Path) -> float:
    state, _, meta, extra = ckpt.load(path)
    value = float(state.x[0])
    # every part of the pair belongs to the same save
    assert np.array_equal(state.x, np.full(3, value)) and meta["nit"] == int(value)
    assert extra["trace.fun"].shape == (int(value) + 1,)
    return value


def _rewrite_state_class(path: Path, state_class: str) -> None:
    js = path.with_suffix(".json")
    doc = json.loads(js.read_text())
    doc["state_class"] = state_class
    js.write_text(json.dumps(doc))


# ------------------------------------------------------------------ code is never chosen by the file
def test_a_checkpoint_naming_an_arbitrary_module_imports_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _save(tmp_path / "ck", 1.0)
    _rewrite_state_class(tmp_path / "ck", "this:s")
    sys.modules.pop("this", None)
    with pytest.raises(CheckpointError, match=r"state class this:s.*not the module of a registered solver.*never chooses code"):
        ckpt.load(tmp_path / "ck")
    assert "this" not in sys.modules
    assert "Zen of Python" not in capsys.readouterr().out


def test_an_importable_dataclass_module_with_side_effects_is_not_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "imported.txt"
    (tmp_path / "ckpt_side_effect.py").write_text(
        "from dataclasses import dataclass\n"
        f"open({str(marker)!r}, 'w').write('imported')\n"
        "@dataclass(frozen=True)\nclass S:\n    x: object = None\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    _save(tmp_path / "ck", 1.0)
    _rewrite_state_class(tmp_path / "ck", "ckpt_side_effect:S")
    with pytest.raises(CheckpointError, match="ckpt_side_effect:S"):
        ckpt.load(tmp_path / "ck")
    assert not marker.exists() and "ckpt_side_effect" not in sys.modules


def test_only_classes_defined_in_the_allowed_module_are_found(tmp_path: Path) -> None:
    _save(tmp_path / "ck", 1.0)
    # np is imported by zoframe_basic.solvers, but it is not a class defined there
    _rewrite_state_class(tmp_path / "ck", "zoframe_basic.solvers:np.lib.NumpyVersion")
    with pytest.raises(CheckpointError, match="does not define"):
        ckpt.load(tmp_path / "ck")


def test_unregistered_state_classes_need_an_explicit_allow_list(tmp_path: Path) -> None:
    ckpt.save(tmp_path / "ck", LocalState(x=np.ones(2), k=3), np.random.default_rng(1), {})
    with pytest.raises(CheckpointError, match="not the module of a registered solver"):
        ckpt.load(tmp_path / "ck")
    state, _, _, _ = ckpt.load(tmp_path / "ck", state_classes=[LocalState])
    assert state.k == 3 and np.array_equal(state.x, np.ones(2))
    with pytest.raises(CheckpointError, match="not among the allowed state classes"):
        ckpt.load(tmp_path / "ck", state_classes=[SGDState])


def test_resume_through_minimize_still_works(tmp_path: Path) -> None:
    kw: dict[str, Any] = {"eta": 0.1, "record_every": 0}
    straight = zoframe.minimize(SmokeFiniteSum(), "zo-sgd", steps="paper", rng=4, max_iter=12, **kw)
    zoframe.minimize(SmokeFiniteSum(), "zo-sgd", steps="paper", rng=4, max_iter=6, checkpoint=tmp_path / "r", **kw)
    resumed = zoframe.minimize(SmokeFiniteSum(), "zo-sgd", steps="paper", max_iter=12, resume=tmp_path / "r", **kw)
    assert np.array_equal(straight.x, resumed.x) and straight.nfev == resumed.nfev


# ------------------------------------------------------------------ one save is one unit
class Crash(RuntimeError):
    pass


def _crash_on_replace(monkeypatch: pytest.MonkeyPatch, after: int) -> None:
    """Let ``after`` calls of os.replace in zoframe.checkpoint through, then 'crash'."""
    real = os.replace
    calls = {"n": 0}

    def replace(src: Any, dst: Any) -> None:
        if calls["n"] >= after:
            raise Crash(f"simulated crash before renaming {src}")
        calls["n"] += 1
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)  # the module calls os.replace


def test_crash_before_the_renames_leaves_the_old_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _save(tmp_path / "ck", 1.0)
    with monkeypatch.context() as m:
        _crash_on_replace(m, after=0)
        with pytest.raises(Crash):
            _save(tmp_path / "ck", 2.0)
    assert _loaded_value(tmp_path / "ck") == 1.0
    _save(tmp_path / "ck", 3.0)  # the next save removes the stale temporaries
    assert _loaded_value(tmp_path / "ck") == 3.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.json", "ck.npz"]


def test_crash_between_the_renames_leaves_the_new_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _save(tmp_path / "ck", 1.0)
    with monkeypatch.context() as m:
        _crash_on_replace(m, after=1)  # the .npz is renamed, the .json is not
        with pytest.raises(Crash):
            _save(tmp_path / "ck", 2.0)
    assert _loaded_value(tmp_path / "ck") == 2.0  # never the new arrays with the old JSON
    # a second interrupted save: the first one is committed before anything is overwritten
    with monkeypatch.context() as m:
        _crash_on_replace(m, after=0)
        with pytest.raises(Crash):
            _save(tmp_path / "ck", 5.0)
    assert _loaded_value(tmp_path / "ck") == 2.0
    _save(tmp_path / "ck", 3.0)
    assert _loaded_value(tmp_path / "ck") == 3.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.json", "ck.npz"]


def test_crash_while_writing_the_arrays_leaves_the_old_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _save(tmp_path / "ck", 1.0)

    def broken_savez(fh: Any, **arrays: Any) -> None:
        fh.write(b"PK\x03\x04 half a zip")
        raise Crash("disk full")

    with monkeypatch.context() as m:
        m.setattr(np, "savez", broken_savez)
        with pytest.raises(Crash):
            _save(tmp_path / "ck", 2.0)
    assert _loaded_value(tmp_path / "ck") == 1.0


def test_a_mixed_pair_is_refused(tmp_path: Path) -> None:
    _save(tmp_path / "a", 1.0)
    _save(tmp_path / "b", 2.0)
    (tmp_path / "a.npz").write_bytes((tmp_path / "b.npz").read_bytes())
    with pytest.raises(CheckpointError, match=r"does not match.*two different saves"):
        ckpt.load(tmp_path / "a")


def test_stale_temporaries_of_earlier_versions_are_removed(tmp_path: Path) -> None:
    for name in ("ck.npz.tmp.npz", "ck.json.tmp", "ck.npz.new", "ck.json.new"):
        (tmp_path / name).write_bytes(b"partial")
    _save(tmp_path / "ck", 1.0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.json", "ck.npz"]
    assert _loaded_value(tmp_path / "ck") == 1.0


def test_format_1_checkpoints_still_load(tmp_path: Path) -> None:
    _save(tmp_path / "ck", 4.0)
    js = tmp_path / "ck.json"
    doc = json.loads(js.read_text())
    doc["format"] = 1
    del doc["npz_sha256"]
    js.write_text(json.dumps(doc))
    assert _loaded_value(tmp_path / "ck") == 4.0


_KILLED_BETWEEN_RENAMES = """
import os, sys
import numpy as np
from zoframe import checkpoint as ckpt
from zoframe_basic.solvers import SGDState

path = sys.argv[1]
ckpt.save(path, SGDState(x=np.full(3, 1.0)), np.random.default_rng(0), {"solver": "zo-sgd", "nit": 1},
          {"trace.fun": np.arange(2, dtype=float)})
real = os.replace

def replace(src, dst):
    real(src, dst)
    os._exit(9)  # the process dies right after the first rename: no cleanup, no finally

os.replace = replace
ckpt.save(path, SGDState(x=np.full(3, 2.0)), np.random.default_rng(0), {"solver": "zo-sgd", "nit": 2},
          {"trace.fun": np.arange(3, dtype=float)})
"""


def test_a_process_killed_between_the_renames_leaves_a_loadable_new_pair(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", _KILLED_BETWEEN_RENAMES, str(tmp_path / "ck")], timeout=120)
    assert proc.returncode == 9
    assert (tmp_path / "ck.json.new").exists()  # the commit record of the interrupted save
    assert _loaded_value(tmp_path / "ck") == 2.0
    _save(tmp_path / "ck", 3.0)
    assert _loaded_value(tmp_path / "ck") == 3.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.json", "ck.npz"]
