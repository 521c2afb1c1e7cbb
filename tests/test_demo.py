"""The README's main job (examples/demo.py) keeps working: run it in quick mode in-process."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo.py"


def _load_demo():
    spec = importlib.util.spec_from_file_location("skxclust_demo", DEMO)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quick_demo_prints_fair_table_checks_conservation_and_writes_figure(tmp_path, capsys):
    result = _load_demo().main(["--quick", "--output", str(tmp_path)])
    out = capsys.readouterr().out
    names = [row["name"] for row in result["rows"]]
    assert names[0].startswith("sklearn KMeans") and "ExplainableKMeans" in names[1]
    assert "SpatialTransformerKMeans" in names[2]
    assert "float32" in out and "after a warm-up fit" in out and "median" in out
    assert "ACC: " in out and "NMI, ARI: " in out  # the line saying what each column means
    assert all(0.0 <= row["acc"] <= 1.0 for row in result["rows"])
    assert all(row["fit_s_min"] <= row["fit_s"] <= row["fit_s_max"] for row in result["rows"])
    assert result["rows"][1]["acc"] > 0.6  # digits cluster well; a broken fit would not
    assert result["conservation_relative"] < 1e-6
    assert sorted(result["match"].tolist()) == list(range(10))  # a one-to-one matching
    assert len(result["examples"]) == 10  # a digit for every cluster
    figure = Path(result["figure"])
    assert figure.parent == tmp_path and figure.stat().st_size > 10_000
    assert str(figure) in out


def test_matching_pairs_each_centroid_with_its_nearest_partner():
    demo = _load_demo()
    reference = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    other = reference[[2, 0, 1]] + 0.1
    assert demo.match_centroids(reference, other).tolist() == [1, 2, 0]
