"""The protocol of ``benchmarks/bench_timeseries.py`` without aeon or tslearn: z-normalisation,
which split and channel ``load_set`` reads (through stand-ins for the two loaders), the
layouts ``fit_predict`` hands each library, how ``run_set`` scores the TEST labels, the
summary's bounds and what a partial run keeps of the previous JSON."""

import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.metrics import normalized_mutual_info_score

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the benchmarks package lives at the repository root
    sys.path.insert(0, str(ROOT))

from benchmarks import bench_timeseries as bt  # noqa: E402


def _z(X):
    """Each row minus its mean over its samples, over its standard deviation."""
    X = np.asarray(X, dtype=np.float64)
    return (X - X.mean(axis=-1, keepdims=True)) / X.std(axis=-1, keepdims=True)


def test_znormalise_scales_each_row_by_its_own_mean_and_std_and_keeps_flat_rows_finite():
    X = np.array([[1, 2, 3, 4], [10, 10, 10, 10], [0, 0, 0, 8]])
    out = bt.znormalise(X)
    assert out.dtype == np.float64 and bt.znormalise(X.astype(np.float32)).dtype == np.float64
    np.testing.assert_allclose(out[[0, 2]], _z(X[[0, 2]]))
    np.testing.assert_allclose(out.std(axis=1), [1.0, 0.0, 1.0])
    assert np.array_equal(out[1], np.zeros(4))  # a flat row: 0, not NaN
    np.testing.assert_allclose(out[2], np.array([-2, -2, -2, 6]) / np.sqrt(12))


# ---------------------------------------------------------------------------- load_set
RNG = np.random.default_rng(0)
RAW = {split: RNG.normal(size=(n, 1, 7)) * 3 + 5 for split, n in (("train", 4), ("test", 5))}
LABELS = {"train": np.array(["a", "b", "a", "b"]), "test": np.array(["b", "b", "a", "a", "b"])}
MULTI = {split: RNG.normal(size=(n, 6, 5)) * np.arange(1, 7)[:, None] + np.arange(6)[:, None]
         for split, n in (("train", 3), ("test", 2))}
TRACE = (RNG.normal(size=(3, 8, 1)) + 2, np.array([1, 2, 3]), RNG.normal(size=(2, 8, 1)) - 1,
         np.array([3, 1]))


@pytest.fixture
def loaders(monkeypatch):
    """Stand-ins for ``aeon.datasets.load_classification`` and tslearn's
    ``CachedDatasets``; the list of what aeon was asked for."""
    asked = []

    def load_classification(name, split):
        asked.append((name, split))
        data = MULTI if name in bt.MULTIVARIATE else RAW
        return data[split], LABELS[split][:len(data[split])]

    class CachedDatasets:
        def load_dataset(self, name):
            assert name == "Trace"
            return TRACE

    aeon, aeon_datasets = types.ModuleType("aeon"), types.ModuleType("aeon.datasets")
    aeon_datasets.load_classification = load_classification
    tslearn, tslearn_datasets = types.ModuleType("tslearn"), types.ModuleType("tslearn.datasets")
    tslearn_datasets.CachedDatasets = CachedDatasets
    for module in (aeon, aeon_datasets, tslearn, tslearn_datasets):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    return asked


def test_load_set_returns_train_then_test_rows_znormalised_with_their_own_labels(loaders):
    X_train, y_train, X_test, y_test = bt.load_set("GunPoint")
    assert loaders == [("GunPoint", "train"), ("GunPoint", "test")]
    assert X_train.dtype == np.float64 and X_train.shape == (4, 7) and X_test.shape == (5, 7)
    np.testing.assert_allclose(X_train, _z(RAW["train"][:, 0]))
    np.testing.assert_allclose(X_test, _z(RAW["test"][:, 0]))
    assert list(y_train) == list(LABELS["train"]) and list(y_test) == list(LABELS["test"])
    X_train, y_train, X_test, y_test = bt.load_set("Trace")  # tslearn's (n, L, 1)
    np.testing.assert_allclose(X_train, _z(TRACE[0][:, :, 0]))
    np.testing.assert_allclose(X_test, _z(TRACE[2][:, :, 0]))
    assert list(y_train) == [1, 2, 3] and list(y_test) == [3, 1]


def test_load_set_znormalises_each_channel_of_a_multivariate_set_and_lays_them_in_a_row(loaders):
    X_train, y_train, X_test, y_test = bt.load_set("BasicMotions")
    assert X_train.shape == (3, 30) and X_test.shape == (2, 30)
    np.testing.assert_allclose(X_train.reshape(3, 6, 5), _z(MULTI["train"]))
    np.testing.assert_allclose(X_test.reshape(2, 6, 5), _z(MULTI["test"]))
    assert len(y_train) == 3 and list(y_test) == list(LABELS["test"][:2])


# ------------------------------------------------------------------ models and layouts
def test_make_model_seeds_st_and_kmeans_and_gives_st_the_channel_shape():
    st = bt.make_model("st", 3, 4, (2, 1, 5))
    assert (st.n_clusters, st.random_state, st.image_shape) == (3, 4, (2, 1, 5))
    km = bt.make_model("kmeans", 3, 4)
    assert isinstance(km, KMeans) and (km.n_clusters, km.random_state) == (3, 4)


class _Model:
    def fit(self, X):
        self.fit_input = X
        return self

    def predict(self, X):
        self.predict_input = X
        return np.arange(len(X)) % 2


@pytest.mark.parametrize("method, channels, layout", [
    ("st", 2, "rows"), ("kmeans", 1, "rows"), ("dtw", 2, "n L C"), ("kshape", 1, "n L C"),
    ("kasba", 2, "n C L")])
def test_fit_predict_fits_train_predicts_test_in_each_librarys_layout_and_times_the_fit(
        monkeypatch, method, channels, layout):
    made = []

    def make_model(method, n_clusters, seed, image_shape=None):
        made.append((method, n_clusters, seed, image_shape, _Model()))
        return made[-1][-1]

    ticks = iter([10.0, 12.5, 99.0, 99.0])
    monkeypatch.setattr(bt, "make_model", make_model)
    monkeypatch.setattr(bt, "time", types.SimpleNamespace(perf_counter=lambda: next(ticks)))
    X_train = np.arange(3 * 10, dtype=float).reshape(3, 10)
    X_test = -np.arange(4 * 10, dtype=float).reshape(4, 10)
    labels, seconds = bt.fit_predict(method, 3, 7, X_train, X_test, channels)
    *args, model = made[0]
    assert args == [method, 3, 7, None if channels == 1 else (channels, 1, 10 // channels)]
    assert seconds == 2.5 and list(labels) == [0, 1, 0, 1]

    def expected(X):
        series = X.reshape(len(X), channels, -1)  # channel after channel in a row
        return {"rows": X, "n L C": series.transpose(0, 2, 1), "n C L": series}[layout]

    assert np.array_equal(model.fit_input, expected(X_train))
    assert np.array_equal(model.predict_input, expected(X_test))


def test_run_set_scores_each_seed_on_the_test_labels_and_reports_after_each_method(
        monkeypatch):
    y_train, y_test = np.array([0, 0, 1, 1, 2, 2]), np.array([0, 1, 2, 0, 1, 2])
    X_train, X_test = np.zeros((6, 12)), np.ones((6, 12))
    monkeypatch.setattr(bt, "load_set", lambda name: (X_train, y_train, X_test, y_test))
    one_wrong = np.array([0, 1, 2, 0, 1, 1])
    calls = []

    def fit_predict(method, n_clusters, seed, Xa, Xb, channels=1):
        calls.append((method, n_clusters, seed, Xa is X_train, Xb is X_test, channels))
        return (y_test if seed != 1 else one_wrong), 1.23456

    monkeypatch.setattr(bt, "fit_predict", fit_predict)
    seen = []
    entry = bt.run_set("BasicMotions", ["st", "dtw"], 2, 3,
                       done=lambda e: seen.append(list(e["methods"])))
    assert calls == [("st", 3, s, True, True, 6) for s in (0, 1)] + [
        ("dtw", 3, s, True, True, 6) for s in (0, 1, 2)]
    assert seen == [["st"], ["st", "dtw"]]
    assert {k: entry[k] for k in ("n_train", "n_test", "length", "channels", "n_clusters")} == {
        "n_train": 6, "n_test": 6, "length": 2, "channels": 6, "n_clusters": 3}
    st = entry["methods"]["st"]
    assert st["acc"] == [1.0, pytest.approx(5 / 6)]
    assert st["nmi"] == [1.0, pytest.approx(normalized_mutual_info_score(y_test, one_wrong))]
    assert st["fit_seconds"] == [1.2346, 1.2346] and "date_utc" in st
    assert len(entry["methods"]["dtw"]["acc"]) == 3


# ----------------------------------------------------------------------------- summary
def _runs(acc, seconds=(1.0,)):
    acc = list(acc) if isinstance(acc, (list, tuple)) else [acc, acc]
    return {"acc": acc, "nmi": acc, "fit_seconds": list(seconds)}


def test_timeseries_summary_means_over_seeds_and_sets_and_its_bounds():
    sets = {n: {"methods": {"st": _runs([0.5, 0.7], (1.0, 1.0)), "kmeans": _runs(0.6)}}
            for n in bt.SOURCES}
    sets["Trace"]["methods"]["dtw"] = _runs(0.5, (1.0, 1.0, 10.0))
    s = bt.summarise(sets)
    assert s["mean_acc"]["st"]["value"] == pytest.approx(0.6)  # mean of the seeds, not the best
    assert s["speedup_vs_dtw"] == {"Trace": pytest.approx(4.0)}  # mean fit seconds
    assert s["met"]["mean_acc"] is True and s["met"]["speedup_vs_dtw"] is None
    # exactly at the targets: met (ACC 0.58; DTW 10 times slower on both speed sets)
    for n in bt.SOURCES:
        sets[n]["methods"]["st"] = _runs(0.58, (1.0,))
    sets["Trace"]["methods"]["dtw"] = _runs(0.5, (10.0,))
    sets["OSULeaf"]["methods"]["dtw"] = _runs(0.5, (20.0,))
    s = bt.summarise(sets)
    assert s["met"]["mean_acc"] is True and s["met"]["speedup_vs_dtw"] is True
    del sets["UnitTest"]  # not every set measured: the mean is not judged
    assert bt.summarise(sets)["met"]["mean_acc"] is None


def test_timeseries_below_kmeans_means_more_than_the_margin_below():
    margin = bt.TARGETS["below_kmeans_by"]
    sets = {"ArrowHead": {"methods": {"st": _runs(0.75 - margin), "kmeans": _runs(0.75)}},
            "GunPoint": {"methods": {"st": _runs(0.74), "kmeans": _runs(0.75)}},
            "OSULeaf": {"methods": {"st": _runs(0.5), "kmeans": _runs(0.75)}}}
    s = bt.summarise(sets)
    assert s["below_kmeans"] == ["OSULeaf"] and s["met"]["below_kmeans"] is False
    # none below on three sets of seven: not judged (one below would be a miss at once)
    del sets["OSULeaf"]
    assert bt.summarise(sets)["met"]["below_kmeans"] is None
    for n in bt.SOURCES:
        sets[n] = {"methods": {"st": _runs(0.75), "kmeans": _runs(0.75)}}
    assert bt.summarise(sets)["met"]["below_kmeans"] is True


def test_timeseries_mean_is_judged_only_where_st_ran_on_every_set():
    """Every set present, ``st`` missing on one: the mean over the six others is not
    judged (it was, against the target); no published set: no published means, not NaN."""
    sets = {n: {"methods": {"st": _runs(0.9), "kmeans": _runs(0.6)}} for n in bt.SOURCES}
    del sets["ArrowHead"]["methods"]["st"]
    s = bt.summarise(sets)
    assert len(s["mean_acc"]["st"]["sets"]) == len(bt.SOURCES) - 1
    assert s["met"]["mean_acc"] is None
    unpublished = {n: sets[n] for n in bt.SOURCES if n not in bt.PUBLISHED}
    assert unpublished  # UnitTest has no published row
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert bt.summarise(unpublished)["published_mean_acc"] == {}


# ---------------------------------------------------------------------- partial runs
def _result(quick=False):
    new = _runs(0.75)
    return {"quick": quick, "published": {"source": "table", "acc": {"GunPoint": [0.75],
                                                                     "Trace": [0.75]}},
            "sets": {"Trace": {"methods": {"kmeans": new}},
                     "GunPoint": {"methods": {"st": new}}},
            "multivariate": {"BasicMotions": {"methods": {"st": new}}}}


def _previous(quick=False):
    old = _runs(0.25)
    return {"quick": quick, "published": {"acc": {"ArrowHead": [0.25], "GunPoint": [0.25]}},
            "sets": {"GunPoint": {"n_train": 50, "methods": {"kmeans": old, "st": old}},
                     "ArrowHead": {"methods": {"st": old}}},
            "multivariate": {"BasicMotions": {"methods": {"dtw": old, "st": old}}}}


def _accs(part):
    return {n: {m: r["acc"][0] for m, r in e["methods"].items()} for n, e in part.items()}


def test_merged_replaces_what_was_measured_keeps_the_rest_in_source_and_method_order():
    result = _result()
    out = bt.merged(result, _previous(), quick=False)
    assert list(out["sets"]) == ["ArrowHead", "GunPoint", "Trace"]  # SOURCES order
    assert {n: list(m) for n, m in _accs(out["sets"]).items()} == {
        "ArrowHead": ["st"], "GunPoint": ["st", "kmeans"], "Trace": ["kmeans"]}  # METHODS order
    assert _accs(out["sets"]) == {"ArrowHead": {"st": 0.25},
                                  "GunPoint": {"st": 0.75, "kmeans": 0.25},
                                  "Trace": {"kmeans": 0.75}}
    assert out["sets"]["GunPoint"]["n_train"] == 50
    assert _accs(out["multivariate"]) == {"BasicMotions": {"st": 0.75, "dtw": 0.25}}
    assert out["published"]["acc"] == {"ArrowHead": [0.25], "GunPoint": [0.75], "Trace": [0.75]}
    assert out["summary"]["mean_acc"]["st"]["sets"] == ["ArrowHead", "GunPoint"]
    assert list(result["sets"]) == ["Trace", "GunPoint"]  # the run's own result untouched


@pytest.mark.parametrize("quick, previous_quick", [(True, False), (False, True)])
def test_merged_keeps_nothing_of_a_quick_run_or_in_one(quick, previous_quick):
    out = bt.merged(_result(quick), _previous(previous_quick), quick=quick)
    assert _accs(out["sets"]) == {"GunPoint": {"st": 0.75}, "Trace": {"kmeans": 0.75}}
    assert _accs(out["multivariate"]) == {"BasicMotions": {"st": 0.75}}
    assert out["published"]["acc"] == {"GunPoint": [0.75], "Trace": [0.75]}
