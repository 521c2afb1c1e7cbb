"""ExplainableKMeans inside scikit-learn tooling, and on CUDA when present."""

import pickle

import numpy as np
import pytest
import torch
from conftest import requires_cuda
from sklearn.base import clone
from sklearn.datasets import make_blobs
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skxclust import ExplainableKMeans

X, _ = make_blobs(n_samples=200, n_features=5, centers=4, random_state=1)


def test_grid_search_in_a_pipeline_uses_negative_distortion_by_default():
    pipe = make_pipeline(StandardScaler(), ExplainableKMeans(random_state=0, device="cpu"))
    search = GridSearchCV(pipe, {"explainablekmeans__n_clusters": [2, 4, 6]}, cv=3).fit(X)
    # more clusters always lower the held-out distortion: the largest K scores best
    assert search.best_params_["explainablekmeans__n_clusters"] == 6
    assert np.all(np.diff(search.cv_results_["mean_test_score"]) > 0)


def test_clone_keeps_parameters_and_drops_fitted_state():
    km = ExplainableKMeans(n_clusters=3, beta=0.2, temperature=4.0).fit(X)
    copy = clone(km)
    assert copy.get_params() == km.get_params()
    assert not hasattr(copy, "cluster_centers_")


@requires_cuda
@pytest.mark.cuda
def test_cuda_fit_matches_cpu_and_pickles_to_numpy():
    cpu = ExplainableKMeans(n_clusters=4, random_state=0, device="cpu").fit(X)
    gpu = ExplainableKMeans(n_clusters=4, random_state=0, device="cuda").fit(X)
    np.testing.assert_array_equal(gpu.labels_, cpu.labels_)
    np.testing.assert_allclose(gpu.cluster_centers_, cpu.cluster_centers_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gpu.explain(X), cpu.explain(X), rtol=1e-6, atol=1e-6)
    loaded = pickle.loads(pickle.dumps(gpu))
    fitted = {name: value for name, value in vars(loaded).items()
              if name.endswith("_") and not name.startswith("_")}
    assert "cluster_centers_" in fitted and "labels_" in fitted
    for name, value in fitted.items():  # host values only: numpy arrays and Python scalars
        assert not isinstance(value, torch.Tensor), name
    assert isinstance(fitted["cluster_centers_"], np.ndarray)
    np.testing.assert_array_equal(loaded.cluster_centers_, gpu.cluster_centers_)
    np.testing.assert_array_equal(loaded.predict(X), gpu.predict(X))
