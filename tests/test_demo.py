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
    lines = out.splitlines()
    for row in result["rows"]:  # the table prints what main returns
        line = next(x for x in lines if x.startswith(f"| {row['name']} "))
        cells = [c.strip() for c in line.split("|")[2:-1]]
        assert cells == [f"{row['acc']:.3f}", f"{row['nmi']:.3f}", f"{row['ari']:.3f}",
                         f"{row['fit_s']:.3f} ({row['fit_s_min']:.3f}-{row['fit_s_max']:.3f})"]
    assert result["rows"][1]["acc"] > 0.6  # digits cluster well; a broken fit would not
    # ACC of labels_ on the 400 digits, measured: KMeans 0.783, ExplainableKMeans 0.828,
    # ST K-means 0.935 (0.783 without warps, n_steps=0)
    assert result["rows"][2]["acc"] >= 0.85
    assert result["rows"][2]["acc"] > max(row["acc"] for row in result["rows"][:2])
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


def test_fit_time_is_the_median_of_the_timed_fits_after_an_untimed_warm_up(monkeypatch):
    demo = _load_demo()
    fitted = []

    class Fake:
        def fit(self, X):
            fitted.append(X)
            return self

    # perf_counter pairs of the three timed fits: durations 4, 1 and 2 seconds (mean 2.33)
    clock = iter([0.0, 4.0, 10.0, 11.0, 20.0, 22.0])
    monkeypatch.setattr(demo.time, "perf_counter", lambda: next(clock))
    estimator, times = demo._timed_fits(Fake, "X", 3, "warm-up")
    assert fitted == ["warm-up", "X", "X", "X"] and times == [4.0, 1.0, 2.0]
    row = demo._row("fake", type("Fitted", (), {"labels_": np.array([0, 1])})(), times,
                    np.array([1, 0]))
    assert (row["fit_s"], row["fit_s_min"], row["fit_s_max"]) == (2.0, 1.0, 4.0)
    assert row["acc"] == 1.0 and row["ari"] == 1.0
