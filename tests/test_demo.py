"""The README's main job (examples/demo.py) keeps working: run it in quick mode in-process."""

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo.py"


def _load_demo():
    spec = importlib.util.spec_from_file_location("skxclust_demo", DEMO)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quick_demo_prints_table_checks_conservation_and_writes_figure(tmp_path, capsys):
    result = _load_demo().main(["--quick", "--output", str(tmp_path)])
    out = capsys.readouterr().out
    assert "sklearn KMeans" in out and "ExplainableKMeans" in out and "ACC" in out
    names = [row["name"] for row in result["rows"]]
    assert names[0].startswith("sklearn KMeans") and "ExplainableKMeans" in names[1]
    assert all(0.0 <= row["acc"] <= 1.0 for row in result["rows"])
    assert result["rows"][1]["acc"] > 0.6  # digits cluster well; a broken fit would not
    assert result["conservation_error"] < 1e-8
    figure = Path(result["figure"])
    assert figure.parent == tmp_path and figure.stat().st_size > 10_000
    assert str(figure) in out
