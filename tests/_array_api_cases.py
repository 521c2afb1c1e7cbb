"""scikit-learn's array API dispatch (``array_api_dispatch=True``): torch tensors in, torch
tensors out.

scikit-learn refuses dispatch unless ``SCIPY_ARRAY_API=1`` was set before scipy was
imported, which the main test session does not do (it would switch scipy into its array
API mode for every test). ``tests/test_array_api.py`` therefore runs this module in a child
pytest with the variable set; run it by hand with
``SCIPY_ARRAY_API=1 python -m pytest tests/_array_api_cases.py``.
"""

import os
import pickle
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import requires_cuda
from sklearn import config_context
from sklearn.decomposition import PCA
from sklearn.pipeline import make_pipeline
from sklearn.utils._array_api import get_namespace_and_device, move_estimator_to
from sklearn.utils.estimator_checks import (
    check_array_api_input_and_values,
    estimator_checks_generator,
)

from skxclust import ExplainableKMeans, SpatialTransformerKMeans, explain_pipeline
from skxclust._array_api import host_values, numpy_dtype, to_torch

xps = pytest.importorskip("array_api_strict")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(autouse=True)
def _scipy_array_api():
    # a skip per test, not of the module: the main session imports this module for its
    # doctests (--doctest-modules) and must not report it
    if os.environ.get("SCIPY_ARRAY_API") != "1":
        pytest.skip("needs SCIPY_ARRAY_API=1 before scipy is imported (tests/test_array_api.py "
                    "runs this module so)")
REPO = Path(__file__).resolve().parents[1]
RNG = np.random.default_rng(0)
X = np.concatenate([RNG.random((3, 16))[k] * 4 + 0.3 * RNG.standard_normal((20, 16))
                    for k in range(3)])  # 60 rows, 4 x 4 images, 3 groups
ST = dict(n_steps=3, n_landmarks=4, max_iter=3)
DEVICE1 = xps.Device("device1")


def make(kind: str, **params):
    if kind == "explainable":
        return ExplainableKMeans(n_clusters=3, random_state=0, **params)
    return SpatialTransformerKMeans(n_clusters=3, random_state=0, **ST, **params)


def as_namespace(values: np.ndarray, namespace: str, device: str = "cpu"):
    if namespace == "torch":
        return torch.asarray(values, device=device)
    return xps.asarray(values, device=DEVICE1)


def to_numpy(values) -> np.ndarray:
    return to_torch(values).cpu().numpy()


# -- scikit-learn's own array API checks ------------------------------------------------
def array_api_checks():
    """scikit-learn's array API checks of both estimators (those the tag
    ``array_api_support`` selects), CUDA ones marked to skip without CUDA."""
    for estimator in (ExplainableKMeans(n_clusters=2, n_init=2, max_iter=5),
                      SpatialTransformerKMeans(n_clusters=3, random_state=0, **ST)):
        for est, check in estimator_checks_generator(estimator, legacy=True):
            name = getattr(check, "func", check).__name__
            if not name.startswith("check_array_api"):
                continue
            keywords = getattr(check, "keywords", {})
            marks = [requires_cuda, pytest.mark.cuda] if "cuda" in str(keywords) else []
            label = ",".join(f"{k}={v}" for k, v in keywords.items())
            yield pytest.param(est, check, marks=marks,
                               id=f"{type(est).__name__}-{name}({label})")


@pytest.mark.parametrize("estimator, check", list(array_api_checks()))
def test_sklearn_array_api_checks(estimator, check):
    check(estimator)


VALUE_CASES = [("torch", "cpu"), ("array_api_strict", "device1"),
               pytest.param("torch", "cuda", marks=[requires_cuda, pytest.mark.cuda])]


@pytest.mark.parametrize("kind", ["explainable", "st"])
@pytest.mark.parametrize("namespace, device", VALUE_CASES)
def test_fitted_attributes_and_outputs_equal_the_numpy_ones(kind, namespace, device):
    check_array_api_input_and_values(type(make(kind)).__name__, make(kind),
                                     array_namespace=namespace, device_name=device)


# -- every method, in the input's namespace ----------------------------------------------
def method_calls(kind: str, target):
    calls = {"predict": {}, "transform": {}, "decision_function": {}, "explain": {},
             "explain(target)": {"target": target}}
    extra = ["predict_proba"] if kind == "explainable" else ["align"]
    calls.update({name: {} for name in extra})
    return calls


@pytest.mark.parametrize("kind", ["explainable", "st"])
@pytest.mark.parametrize("namespace", ["torch", "array_api_strict"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_method_answers_in_the_inputs_namespace_device_and_dtype(kind, namespace, dtype):
    Xd = X.astype(dtype)
    reference = make(kind).fit(Xd)
    X_in = as_namespace(Xd, namespace)
    target = np.arange(X.shape[0]) % 3
    with config_context(array_api_dispatch=True):
        est = make(kind).fit(X_in, sample_weight=as_namespace(np.ones(X.shape[0]), namespace))
        for name in ("cluster_centers_", "labels_", "reference_"):
            value = getattr(est, name)
            assert type(value) is type(X_in) and str(value.device) == str(X_in.device), name
        if kind == "explainable":  # its default is the midpoint rule: the mean separately
            np.testing.assert_allclose(
                to_numpy(est.explain(X_in, reference="mean")),
                reference.explain(Xd, reference="mean"), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(to_numpy(est.labels_), reference.labels_)
        for label, kwargs in method_calls(kind, as_namespace(target, namespace)).items():
            method = label.split("(")[0]
            out = getattr(est, method)(X_in, **kwargs)
            expected = getattr(reference, method)(Xd, **{k: target for k in kwargs})
            assert type(out) is type(X_in), label
            assert str(out.device) == str(X_in.device), label
            assert to_numpy(out).dtype == expected.dtype, label
            np.testing.assert_allclose(to_numpy(out), expected, rtol=1e-6,
                                       atol=1e-6 * np.abs(expected).max(), err_msg=label)
        score = est.score(X_in)
    assert isinstance(score, float)
    assert score == pytest.approx(reference.score(Xd), rel=1e-6)


def test_explain_top_k_answers_in_the_inputs_namespace():
    reference = make("explainable").fit(X)
    Xt = torch.from_numpy(X)
    with config_context(array_api_dispatch=True):
        features, relevance = make("explainable").fit(Xt).explain(Xt, top_k=3)
    assert isinstance(features, torch.Tensor) and features.dtype == torch.int64
    expected = reference.explain(X, top_k=3)
    np.testing.assert_array_equal(features.numpy(), expected[0])
    np.testing.assert_allclose(relevance.numpy(), expected[1], rtol=1e-12)


def test_numpy_input_under_dispatch_is_the_numpy_path_bit_for_bit():
    reference = make("explainable").fit(X)
    with config_context(array_api_dispatch=True):
        est = make("explainable").fit(X)
        outputs = [est.predict(X), est.transform(X), est.explain(X)]
    assert isinstance(est.cluster_centers_, np.ndarray)
    np.testing.assert_array_equal(est.cluster_centers_, reference.cluster_centers_)
    for out, expected in zip(outputs, [reference.predict(X), reference.transform(X),
                                       reference.explain(X)]):
        assert isinstance(out, np.ndarray)
        np.testing.assert_array_equal(out, expected)


def test_a_dask_input_under_dispatch_is_the_host_path():
    # array_api_compat counts dask as a namespace; skxclust reads it chunk by chunk on the
    # host, as without dispatch
    da = pytest.importorskip("dask.array")
    Xd = da.from_array(X, chunks=20)
    reference = make("explainable").fit(Xd)
    with config_context(array_api_dispatch=True):
        est = make("explainable").fit(Xd)
        labels = est.predict(Xd)
    assert isinstance(est.cluster_centers_, np.ndarray)
    np.testing.assert_array_equal(est.cluster_centers_, reference.cluster_centers_)
    assert isinstance(labels, da.Array)
    np.testing.assert_array_equal(labels.compute(), reference.predict(X))


# -- pipelines: PCA -> ExplainableKMeans on torch tensors --------------------------------
def test_a_pca_explainable_kmeans_pipeline_keeps_torch_tensors():
    reference = make_pipeline(PCA(4), make("explainable")).fit(X)
    Xt = torch.from_numpy(X)
    with config_context(array_api_dispatch=True):
        pipe = make_pipeline(PCA(4), make("explainable")).fit(Xt)
        labels, Z = pipe.predict(Xt), pipe[:-1].transform(Xt)
        relevance, evidence = pipe[-1].explain(Z), pipe[-1].decision_function(Z)
    assert isinstance(Z, torch.Tensor) and isinstance(labels, torch.Tensor)
    assert isinstance(relevance, torch.Tensor) and isinstance(pipe[-1].cluster_centers_,
                                                              torch.Tensor)
    np.testing.assert_array_equal(labels.numpy(), reference.predict(X))
    np.testing.assert_allclose(relevance.sum(1).numpy(), evidence.max(1).values.numpy(),
                               rtol=1e-8)
    np.testing.assert_allclose(relevance.numpy(), reference[-1].explain(
        reference[:-1].transform(X)), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("fit_on, explain_on", [("torch", "torch"), ("numpy", "torch"),
                                                ("torch", "numpy")])
def test_explain_pipeline_refuses_tensors_and_names_the_way_round(fit_on, explain_on):
    """Refused whether X, the fitted model or both are tensors."""
    inputs = {"numpy": X, "torch": torch.from_numpy(X)}
    with config_context(array_api_dispatch=True):
        pipe = make_pipeline(PCA(4), make("explainable")).fit(inputs[fit_on])
        with pytest.raises(TypeError, match=rf"got X as {explain_on} arrays.* model fitted "
                                            rf"on {fit_on} arrays.*pipeline\[-1\]\.explain"):
            explain_pipeline(pipe, inputs[explain_on])


def test_the_user_guide_example_runs():
    text = (REPO / "doc" / "user_guide" / "array_api.rst").read_text()
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", text)
    assert blocks, "no python block in doc/user_guide/array_api.rst"
    code = "\n".join(line[3:] for line in blocks[0].splitlines())
    namespace: dict = {}
    exec(compile(code, "array_api.rst", "exec"), namespace)  # noqa: S102 - our own doc
    assert isinstance(namespace["labels"], torch.Tensor)


# -- where the computation runs ----------------------------------------------------------
def test_a_torch_input_is_used_without_a_copy():
    Xt = torch.from_numpy(X)
    with config_context(array_api_dispatch=True):
        est = make("explainable").fit(Xt)
        raw, _, space = est._validated_tensor(Xt, "predict")
    assert raw.data_ptr() == Xt.data_ptr() and space.kind == "torch"


@pytest.mark.parametrize("kind", ["explainable", "st"])
def test_a_tensor_that_requires_grad_is_taken_detached_without_a_warning(kind):
    Xt = torch.from_numpy(X).requires_grad_(True)  # e.g. a network's embeddings
    with config_context(array_api_dispatch=True), warnings.catch_warnings():
        warnings.simplefilter("error")
        est = make(kind).fit(Xt)
        labels, relevance = est.predict(Xt), est.explain(Xt)
    assert not est.cluster_centers_.requires_grad and not relevance.requires_grad
    np.testing.assert_array_equal(labels.numpy(), make(kind).fit(X).predict(X))


def test_device_auto_follows_a_torch_input(monkeypatch):
    # "auto" would pick CUDA for numpy input; a torch input is computed where it lives
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    Xt = torch.from_numpy(X)
    with config_context(array_api_dispatch=True):
        est = make("explainable").fit(Xt)
        assert est.predict(Xt).device.type == "cpu"
    assert est.cluster_centers_.device.type == "cpu"


# -- refusals ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["explainable", "st"])
def test_inputs_that_cannot_work_are_refused_with_a_clear_message(kind):
    Xt = torch.from_numpy(X)
    name = type(make(kind)).__name__
    with config_context(array_api_dispatch=True):
        with pytest.raises(TypeError, match=f"{name} does not accept sparse torch tensors"):
            make(kind).fit(Xt.to_sparse())
        with pytest.raises(ValueError, match="computes on the CPU or on CUDA; got a torch "
                                             "tensor on device meta"):
            make(kind).fit(torch.empty(60, 16, device="meta"))
        with pytest.raises(ValueError, match="Complex data not supported: .* torch array"):
            make(kind).fit(Xt.to(torch.complex128))
        numpy_model = make(kind).fit(X)
        with pytest.raises(ValueError, match=rf"{name}\.predict\(\) must use the same "
                                             "namespace.*fitted on numpy arrays, predict got "
                                             "torch arrays on device cpu.*move_estimator_to"):
            numpy_model.predict(Xt)
        torch_model = make(kind).fit(Xt)
        with pytest.raises(ValueError, match=rf"{name}\.partial_fit\(\) must use the same"):
            torch_model.partial_fit(X)
        with pytest.raises(ValueError, match=rf"{name}\.score\(\) must use the same"):
            torch_model.score(xps.asarray(X))


def test_a_model_is_refused_an_input_of_its_namespace_on_another_device():
    with config_context(array_api_dispatch=True):
        est = make("explainable").fit(xps.asarray(X, device=DEVICE1))
        with pytest.raises(ValueError, match=r"fitted on array_api_strict arrays on device "
                                             r".*device1.*, predict got array_api_strict "
                                             r"arrays on device .*CPU_DEVICE"):
            est.predict(xps.asarray(X))


def test_an_array_torch_cannot_read_is_refused_naming_its_type():
    with pytest.raises(TypeError, match="object can be passed neither through DLPack"):
        to_torch(object())


# -- partial_fit, pickling, converting a fitted model -------------------------------------
def test_partial_fit_streams_torch_chunks():
    reference = make("explainable")
    est = make("explainable")
    for rows in (slice(0, 30), slice(30, 60)):
        reference.partial_fit(X[rows])
        with config_context(array_api_dispatch=True):
            est.partial_fit(torch.from_numpy(X[rows]))
    assert isinstance(est.cluster_centers_, torch.Tensor) and est.n_steps_ == 2
    np.testing.assert_allclose(est.cluster_centers_.numpy(), reference.cluster_centers_,
                               rtol=1e-12)


@pytest.mark.parametrize("kind", ["explainable", "st"])
def test_a_pickled_model_and_its_numpy_conversion_predict_alike(kind):
    Xt = torch.from_numpy(X)
    with config_context(array_api_dispatch=True):
        est = make(kind).fit(Xt)
        loaded = pickle.loads(pickle.dumps(est))
        assert isinstance(loaded.cluster_centers_, torch.Tensor)
        expected = est.predict(Xt).numpy()
        np.testing.assert_array_equal(loaded.predict(Xt).numpy(), expected)
        as_numpy = move_estimator_to(loaded, np, "cpu")
    assert isinstance(as_numpy.cluster_centers_, np.ndarray)
    np.testing.assert_array_equal(as_numpy.predict(X), expected)
    # without dispatch, a model fitted on tensors takes numpy input and gives numpy output
    assert isinstance(est.predict(X), np.ndarray)


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["explainable", "st"])
@pytest.mark.parametrize("device", ["auto", "cpu"])
def test_cuda_tensors_stay_on_the_device(kind, device):
    Xc = torch.asarray(X, device="cuda")
    with config_context(array_api_dispatch=True):
        est = make(kind, device=device).fit(Xc)
        outputs = [est.predict(Xc), est.transform(Xc), est.explain(Xc)]
        raw, _, _ = est._validated_tensor(Xc, "predict")
    assert est.cluster_centers_.device.type == "cuda" and est.labels_.device.type == "cuda"
    assert all(out.device.type == "cuda" for out in outputs)
    assert (raw.data_ptr() == Xc.data_ptr()) == (device == "auto")  # computed where it lives
    reference = make(kind, device="cpu").fit(X)
    np.testing.assert_array_equal(outputs[0].cpu().numpy(), reference.predict(X))


@requires_cuda
@pytest.mark.cuda
def test_a_model_fitted_on_cuda_tensors_pickles_to_the_cpu():
    Xc = torch.asarray(X, device="cuda")
    with config_context(array_api_dispatch=True):
        est = make("explainable").fit(Xc)
        loaded = pickle.loads(pickle.dumps(est))
        assert loaded.cluster_centers_.device.type == "cpu"
        labels = loaded.predict(Xc.cpu())
        xp, _, device = get_namespace_and_device(Xc)
        back = move_estimator_to(loaded, xp, device)
        np.testing.assert_array_equal(back.predict(Xc).cpu().numpy(), labels.numpy())
    assert est.cluster_centers_.device.type == "cuda"  # pickling left the model as it was


# -- the helpers: dtypes, tensors, values read on the host -------------------------------
@pytest.mark.parametrize("dtype, expected", [
    (np.dtype(np.float32), np.float32), (torch.float32, np.float32),
    (torch.float64, np.float64), (xps.float32, np.float32), (xps.float64, np.float64)],
    ids=str)
def test_numpy_dtype_reads_numpy_torch_and_array_api_dtypes(dtype, expected):
    assert numpy_dtype(dtype) == np.dtype(expected)


def test_to_torch_detaches_a_tensor_that_requires_grad_without_a_copy():
    t = torch.ones(3, dtype=torch.float64, requires_grad=True)
    out = to_torch(t)
    assert not out.requires_grad and out.data_ptr() == t.data_ptr()


def test_host_values_are_left_as_they_are_without_dispatch():
    t = torch.ones(3)
    assert host_values(t) is t


@pytest.mark.parametrize("namespace", ["torch", "array_api_strict"])
def test_host_values_under_dispatch_are_numpy_copies_and_numpy_stays_as_it_is(namespace):
    values = np.arange(3.0)
    given = as_namespace(values, namespace)
    if namespace == "torch":
        given.requires_grad_(True)  # e.g. sample weights that are model outputs
    with config_context(array_api_dispatch=True):
        assert host_values(values) is values
        out = host_values(given)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, values)
