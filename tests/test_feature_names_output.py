"""get_feature_names_out and set_output for both estimators (Pipeline, ColumnTransformer,
FeatureUnion); explain labelled by the input's feature names; no warning on read-only
input."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.compose import ColumnTransformer
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline, make_union
from sklearn.preprocessing import StandardScaler
from sklearn.utils._testing import create_memmap_backed_data

from skxclust import ExplainableKMeans, SpatialTransformerKMeans

pd = pytest.importorskip("pandas")
pytestmark = pytest.mark.usefixtures("one_torch_thread")

RNG = np.random.default_rng(0)
X = RNG.random((30, 16))
COLUMNS = [f"p{i}" for i in range(16)]
FRAME = pd.DataFrame(X, columns=COLUMNS, index=[f"r{i}" for i in range(30)])

ESTIMATORS = {
    "explainable": lambda k=3: ExplainableKMeans(k, random_state=0, device="cpu"),
    "spatial": lambda k=3: SpatialTransformerKMeans(k, random_state=0, device="cpu", n_steps=2,
                                                    n_landmarks=4, max_iter=2),
}
PREFIX = {"explainable": "explainablekmeans", "spatial": "spatialtransformerkmeans"}


def _frame_library(kind):
    return pytest.importorskip(kind)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
@pytest.mark.parametrize("fit", ["fit", "partial_fit"])
def test_feature_names_out_are_the_lowercase_class_name_and_cluster_index(name, fit):
    est = getattr(ESTIMATORS[name](), fit)(X)
    np.testing.assert_array_equal(est.get_feature_names_out(),
                                  [f"{PREFIX[name]}{i}" for i in range(3)])


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_feature_names_out_of_an_unfitted_estimator_raise_not_fitted(name):
    with pytest.raises(NotFittedError):
        ESTIMATORS[name]().get_feature_names_out()


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
@pytest.mark.parametrize("kind", ["pandas", "polars"])
def test_set_output_gives_dataframes_with_cluster_columns(name, kind):
    lib = _frame_library(kind)
    est = ESTIMATORS[name]().set_output(transform=kind)
    out = est.fit_transform(FRAME)
    assert isinstance(out, lib.DataFrame)
    assert list(out.columns) == [f"{PREFIX[name]}{i}" for i in range(3)]
    np.testing.assert_allclose(np.asarray(out),
                               est.set_output(transform="default").transform(FRAME))
    if kind == "pandas":
        assert list(out.index) == list(FRAME.index)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_pipeline_names_and_pandas_output_like_sklearn_kmeans(name):
    pipe = make_pipeline(StandardScaler(), ESTIMATORS[name]()).set_output(transform="pandas")
    out = pipe.fit(FRAME).transform(FRAME)
    assert list(out.columns) == list(pipe.get_feature_names_out())
    assert list(out.columns) == [f"{PREFIX[name]}{i}" for i in range(3)]


def test_column_transformer_and_feature_union_name_every_cluster_column():
    ct = ColumnTransformer([("km", ESTIMATORS["explainable"](2), COLUMNS[:8]),
                            ("scale", StandardScaler(), COLUMNS[8:10])])
    out = ct.set_output(transform="pandas").fit_transform(FRAME)
    assert list(out.columns) == ["km__explainablekmeans0", "km__explainablekmeans1",
                                 "scale__p8", "scale__p9"]
    union = make_union(ESTIMATORS["explainable"](2), ESTIMATORS["spatial"](2))
    out = union.set_output(transform="pandas").fit_transform(FRAME)
    assert list(out.columns) == [
        "explainablekmeans__explainablekmeans0", "explainablekmeans__explainablekmeans1",
        "spatialtransformerkmeans__spatialtransformerkmeans0",
        "spatialtransformerkmeans__spatialtransformerkmeans1"]


@pytest.mark.parametrize("kind", ["pandas", "polars"])
def test_explain_follows_set_output_with_the_input_feature_names(kind):
    lib = _frame_library(kind)
    est = ESTIMATORS["explainable"]().fit(FRAME)
    plain = est.explain(FRAME)
    assert isinstance(plain, np.ndarray)  # default output: unchanged
    relevance = est.set_output(transform=kind).explain(FRAME)
    assert isinstance(relevance, lib.DataFrame)
    assert list(relevance.columns) == COLUMNS
    np.testing.assert_allclose(np.asarray(relevance), plain)
    if kind == "pandas":
        assert list(relevance.index) == list(FRAME.index)


def test_explain_of_an_array_fitted_model_names_features_x0_x1():
    est = ESTIMATORS["explainable"]().set_output(transform="pandas").fit(X)
    assert list(est.explain(X).columns) == [f"x{i}" for i in range(16)]


def test_explain_top_k_stays_a_pair_of_arrays_under_set_output():
    est = ESTIMATORS["explainable"]().set_output(transform="pandas").fit(FRAME)
    features, values = est.explain(FRAME, top_k=2)
    assert features.shape == values.shape == (30, 2)
    assert est.feature_names_in_[features].shape == (30, 2)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_read_only_centroids_and_input_are_never_handed_to_torch(name, monkeypatch):
    # torch warns "array is not writable" once per process only, so the spy records
    # every numpy array turned into a tensor instead of waiting for the warning
    est = ESTIMATORS[name]().fit(X)
    est.cluster_centers_ = create_memmap_backed_data(est.cluster_centers_)
    Xm = create_memmap_backed_data(X)
    read_only = []
    for fn in ("from_numpy", "as_tensor", "tensor"):
        original = getattr(torch, fn)

        def spy(data, *args, _original=original, **kwargs):
            if isinstance(data, np.ndarray) and not data.flags.writeable:
                read_only.append(data.shape)
            return _original(data, *args, **kwargs)

        monkeypatch.setattr(torch, fn, spy)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for method in ("predict", "transform", "score", "decision_function", "explain"):
            getattr(est, method)(Xm)
        est.partial_fit(Xm)
        est.fit(Xm)
    assert read_only == []


def test_fit_on_a_dataframe_warns_of_no_feature_names():
    # fit ends with a predict pass (labels_ is predict(X)); it must see the names too
    X = pd.DataFrame(np.random.default_rng(0).random((40, 3)), columns=["a", "b", "c"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        km = ExplainableKMeans(3, random_state=0).fit(X)
    np.testing.assert_array_equal(km.labels_, km.predict(X))
