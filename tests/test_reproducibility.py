"""Reproducibility (same random_state: bitwise-identical models on CPU, also across joblib
workers) and persistence (pickle and joblib round trips, numpy attributes, no CUDA needed
to load)."""

import io
import pickle
import warnings

import joblib
import numpy as np
import pytest
import torch
from joblib import Parallel, delayed
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

from skxclust import ExplainableKMeans, SpatialTransformerKMeans

RNG = np.random.default_rng(0)
X = np.concatenate([RNG.random((3, 16))[k] * 4 + 0.3 * RNG.standard_normal((10, 16))
                    for k in range(3)])  # 30 samples of 4 x 4 images, 3 groups

ESTIMATORS = {
    "explainable": lambda **p: ExplainableKMeans(
        **{"n_clusters": 3, "device": "cpu", **p}),
    "spatial": lambda **p: SpatialTransformerKMeans(
        **{"n_clusters": 3, "n_steps": 3, "n_landmarks": 4, "max_iter": 3, "device": "cpu",
           **p}),
}
BOTH = sorted(ESTIMATORS)
FITTED_ATTRIBUTES = ("cluster_centers_", "labels_", "inertia_", "n_iter_", "beta_",
                     "n_features_in_")
SEARCH_GRIDS = {"explainable": {"n_clusters": [2, 3], "init": ["k-means++", "random"]},
                "spatial": {"n_clusters": [2, 3], "learning_rate": [0.01, 0.1]}}


def assert_identical_models(a, b):
    """Bitwise equality of the fitted attributes of two estimators."""
    for name in FITTED_ATTRIBUTES:
        va, vb = getattr(a, name), getattr(b, name)
        assert type(va) is type(vb), name
        if isinstance(va, np.ndarray):
            assert va.dtype == vb.dtype, name
            assert va.tobytes() == vb.tobytes(), f"{name} differs"
        else:
            assert va == vb, f"{name}: {va!r} != {vb!r}"


def _fit(est, data=X):
    return est.fit(data)


# -- same random_state, same bits ------------------------------------------------------------
@pytest.mark.parametrize("estimator", BOTH)
@pytest.mark.parametrize("init", ["k-means++", "random"])
def test_same_random_state_gives_bitwise_identical_models_with_several_inits(estimator,
                                                                             init):
    a = ESTIMATORS[estimator](init=init, n_init=3, random_state=7).fit(X)
    b = ESTIMATORS[estimator](init=init, n_init=3, random_state=7).fit(X)
    assert_identical_models(a, b)
    refit = a.fit(X)  # fitting the same object again changes nothing
    assert_identical_models(refit, b)


@pytest.mark.parametrize("estimator", BOTH)
def test_random_state_instance_gives_the_same_model_as_its_seed(estimator):
    a = ESTIMATORS[estimator](n_init=2, random_state=np.random.RandomState(11)).fit(X)
    b = ESTIMATORS[estimator](n_init=2, random_state=np.random.RandomState(11)).fit(X)
    assert_identical_models(a, b)


@pytest.mark.parametrize("estimator", BOTH)
def test_a_seeded_fit_leaves_the_global_torch_and_numpy_generators_alone(estimator):
    torch_state, np_state = torch.random.get_rng_state(), np.random.get_state()
    ESTIMATORS[estimator](n_init=2, random_state=3).fit(X)
    assert torch.equal(torch_state, torch.random.get_rng_state())
    assert np.array_equal(np_state[1], np.random.get_state()[1])
    # random_state=None draws its seeds from numpy's global generator (as scikit-learn
    # does), never from torch's
    ESTIMATORS[estimator](n_init=2, random_state=None).fit(X)
    assert torch.equal(torch_state, torch.random.get_rng_state())


@pytest.mark.parametrize("estimator", BOTH)
def test_different_random_states_explore_different_seedings(estimator):
    # guards the tests above against a random_state that is silently ignored
    fits = [ESTIMATORS[estimator](init="random", n_init=1, max_iter=1, random_state=s).fit(X)
            for s in range(6)]
    assert len({f.cluster_centers_.tobytes() for f in fits}) > 1


# -- joblib parallelism ----------------------------------------------------------------------
@pytest.mark.parametrize("estimator", BOTH)
def test_loky_workers_fit_bitwise_the_same_model_as_a_sequential_fit(estimator):
    est = ESTIMATORS[estimator](n_init=2, random_state=5)
    sequential = clone(est).fit(X)
    parallel = Parallel(n_jobs=2, backend="loky")(delayed(_fit)(clone(est)) for _ in range(2))
    for fitted in parallel:
        assert_identical_models(fitted, sequential)
        np.testing.assert_array_equal(fitted.predict(X), sequential.predict(X))


@pytest.mark.parametrize("estimator", BOTH)
def test_grid_search_with_two_jobs_equals_one_job(estimator):
    base = ESTIMATORS[estimator](random_state=0)
    results = []
    for n_jobs in (1, 2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            search = GridSearchCV(base, SEARCH_GRIDS[estimator], cv=2, n_jobs=n_jobs).fit(X)
        results.append(search)
    one, two = results
    assert one.best_params_ == two.best_params_
    for key in ("split0_test_score", "split1_test_score", "mean_test_score",
                "rank_test_score"):
        assert one.cv_results_[key].tobytes() == two.cv_results_[key].tobytes(), key
    assert_identical_models(one.best_estimator_, two.best_estimator_)


# -- persistence -------------------------------------------------------------------------------
class NoTorchUnpickler(pickle.Unpickler):
    """Refuses to load anything from torch: a model that loads needs neither torch nor CUDA."""

    def find_class(self, module, name):
        if module.split(".")[0] == "torch":
            raise pickle.UnpicklingError(f"{module}.{name} in a fitted model")
        return super().find_class(module, name)


@pytest.fixture(scope="module", params=BOTH)
def fitted(request):
    return request.param, ESTIMATORS[request.param](random_state=0).fit(X)


def _outputs(est):
    methods = ["predict", "transform", "decision_function", "explain", "score"]
    methods += ["predict_proba"] if isinstance(est, ExplainableKMeans) else ["align"]
    return {m: getattr(est, m)(X) for m in methods}


def test_fitted_attributes_are_numpy_or_python_scalars(fitted):
    _, est = fitted
    for name, value in vars(est).items():
        if name.endswith("_") and not name.startswith("_"):
            assert isinstance(value, (np.ndarray, int, float, tuple, str)), (name, type(value))
            assert not isinstance(value, torch.Tensor)


def test_a_pickled_model_loads_without_torch_objects(fitted):
    _, est = fitted
    loaded = NoTorchUnpickler(io.BytesIO(pickle.dumps(est))).load()
    assert_identical_models(loaded, est)


@pytest.mark.parametrize("how", ["pickle", "joblib"])
def test_round_trip_keeps_parameters_attributes_and_every_output(fitted, how, tmp_path):
    _, est = fitted
    if how == "pickle":
        loaded = pickle.loads(pickle.dumps(est))
    else:
        joblib.dump(est, tmp_path / "model.joblib")
        loaded = joblib.load(tmp_path / "model.joblib")
    assert loaded.get_params() == est.get_params()
    assert_identical_models(loaded, est)
    want, got = _outputs(est), _outputs(loaded)
    for method in want:
        np.testing.assert_array_equal(got[method], want[method], err_msg=method)


def test_round_trip_of_an_unfitted_estimator_and_refit_gives_the_same_model(fitted):
    _, est = fitted
    loaded = pickle.loads(pickle.dumps(clone(est)))
    assert_identical_models(loaded.fit(X), est)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_model_saved_with_device_cuda_loads_on_a_cpu_machine_and_runs_on_cpu(fitted):
    # What a GPU-fitted model looks like after pickling: numpy attributes, device="cuda".
    _, est = fitted
    gpu_like = pickle.loads(pickle.dumps(clone(est).set_params(device="cuda")))
    vars(gpu_like).update({k: v for k, v in vars(est).items() if k.endswith("_")})
    loaded = pickle.loads(pickle.dumps(gpu_like))  # loading itself needs no CUDA
    with pytest.raises(ValueError, match="CUDA is not available"):
        loaded.predict(X)
    np.testing.assert_array_equal(loaded.set_params(device="cpu").predict(X), est.predict(X))
    np.testing.assert_array_equal(loaded.set_params(device="auto").predict(X), est.predict(X))
