"""dask arrays: blockwise fit equals the in-memory fit; inference returns dask arrays.

Runs on the threaded scheduler and on a real ``LocalCluster`` (two worker processes).
"""

import copy
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import load_digits, make_blobs

from skxclust import ExplainableKMeans, SpatialTransformerKMeans

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

# float64 warp fits: the default float32 ones round with the rows batched together, so a
# blockwise fit equals the in-memory one only to float32 rounding (see the scaling guide)
ST_FAST = dict(n_steps=4, max_iter=4, n_landmarks=4, update_steps=3, warp_dtype="float64")
ROW_CHUNKS = 37  # blocks of unequal size (the last is shorter)
# the continued in-memory fit and the fresh blockwise one end in nearby optima (digits,
# ST_FAST, 4 iterations: 89 % of labels agree, inertia 3 % apart)
AGREEMENT, INERTIA_RTOL = 0.85, 0.1


# tiny problems run faster on one thread (see conftest.one_torch_thread)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


# distributed's default MALLOC_TRIM_THRESHOLD_ can make torch's temporaries slower in the
# workers (see doc/user_guide/scaling.rst); the other settings are the defaults.
WORKER_ENVIRON = {"OMP_NUM_THREADS": 1, "MKL_NUM_THREADS": 1, "OPENBLAS_NUM_THREADS": 1}


def warm_up():
    import skxclust._dask_fit  # noqa: F401


@pytest.fixture(scope="module")
def client():
    """A real two-process cluster on this machine, for the whole module."""
    with dask.config.set({"distributed.nanny.pre-spawn-environ": WORKER_ENVIRON}):
        cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                           host="127.0.0.1", dashboard_address=None)
    with distributed.Client(cluster) as c:
        c.run(warm_up)  # import torch and skxclust in the workers once, up front
        yield c
    cluster.close()


@pytest.fixture(params=["threads", "distributed"])
def scheduler(request):
    """Run the test body on the threaded scheduler or on the LocalCluster."""
    if request.param == "distributed":
        with dask.config.set(scheduler=request.getfixturevalue("client")):
            yield request.param
    else:
        with dask.config.set(scheduler="threads"):
            yield request.param


@pytest.fixture
def threads():
    with dask.config.set(scheduler="threads"):
        yield


def blobs(n=150, n_features=8, seed=0):
    X, _ = make_blobs(n, n_features, centers=4, cluster_std=2.0, random_state=seed)
    return X


def digits(n=120):
    return load_digits().data[:n].astype(np.float64)


def make(name, **params):
    if name == "explainable":
        return ExplainableKMeans(4, random_state=0, **params)
    # ST's split-merge moves run in in-memory fits only, and its in-memory Lloyd passes after
    # the first continue the previous pass's warps where the blockwise passes fit afresh:
    # with no moves and one iteration (a fresh pass, the update, a fresh final assignment)
    # the two fits are the same algorithm, which these tests compare
    return SpatialTransformerKMeans(4, random_state=0, split_merge_moves=0,
                                    **{**ST_FAST, "max_iter": 1, **params})


def data_for(name):
    return blobs() if name == "explainable" else digits()


def assert_same_fit(a, b, rtol=1e-9):
    np.testing.assert_allclose(a.cluster_centers_, b.cluster_centers_, atol=1e-6 * max(
        1.0, float(np.abs(a.cluster_centers_).max())))
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_allclose(a.inertia_, b.inertia_, rtol=rtol)
    assert a.n_iter_ == b.n_iter_
    np.testing.assert_allclose(a.beta_, b.beta_, rtol=1e-6)
    np.testing.assert_allclose(a.reference_, b.reference_, rtol=1e-9)


# -- fit ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["explainable", "spatial"])
def test_fit_equals_the_in_memory_fit_for_the_same_init(name, scheduler):
    X = data_for(name)
    init = X[[0, 40, 80, 110]] + 0.5
    memory = make(name, init=init).fit(X)
    blockwise = make(name, init=init).fit(da.from_array(X, chunks=(ROW_CHUNKS, 3)))
    assert_same_fit(memory, blockwise)
    assert isinstance(blockwise.labels_, np.ndarray)


@pytest.mark.parametrize("init", ["k-means++", "random"])
def test_fit_on_few_rows_seeds_like_the_in_memory_fit(init, threads):
    X = blobs()
    memory = ExplainableKMeans(4, init=init, random_state=3).fit(X)
    blockwise = ExplainableKMeans(4, init=init, random_state=3).fit(
        da.from_array(X, chunks=ROW_CHUNKS))
    assert_same_fit(memory, blockwise)


def test_st_default_init_on_few_rows_equals_the_in_memory_fit(threads):
    # dask fits make no split-merge moves: the in-memory fit equals them without (with the
    # default 2, it did here only because the one move it considered was rejected)
    X = digits(60)
    params = {**ST_FAST, "max_iter": 1}  # one iteration: see make()
    memory = SpatialTransformerKMeans(3, random_state=0, split_merge_moves=0,
                                      **params).fit(X)
    blockwise = SpatialTransformerKMeans(3, random_state=0, split_merge_moves=0,
                                         **params).fit(da.from_array(X, chunks=25))
    assert_same_fit(memory, blockwise)


def test_st_blockwise_fit_fits_afresh_and_agrees_with_the_continued_in_memory_fit(threads):
    # more iterations: the in-memory passes continue the warps, the blockwise ones fit
    # afresh (the same objective from another start); both assign their labels afresh
    X = digits()
    init = X[[0, 40, 80, 110]] + 0.5
    memory = make("spatial", init=init, max_iter=4).fit(X)
    blockwise = make("spatial", init=init, max_iter=4).fit(da.from_array(X, chunks=ROW_CHUNKS))
    np.testing.assert_array_equal(blockwise.labels_, blockwise.predict(X))
    np.testing.assert_array_equal(memory.labels_, memory.predict(X))
    assert np.mean(memory.labels_ == blockwise.labels_) >= AGREEMENT
    assert blockwise.inertia_ == pytest.approx(memory.inertia_, rel=INERTIA_RTOL)


def test_fit_seeds_on_a_sample_of_rows_when_there_are_more(monkeypatch, threads):
    import skxclust._dask_fit as dask_fit

    monkeypatch.setattr(dask_fit, "INIT_SAMPLE", 40)
    X = blobs(400)
    Xd = da.from_array(X, chunks=100)
    a = ExplainableKMeans(4, random_state=0).fit(Xd)
    b = ExplainableKMeans(4, random_state=0).fit(Xd)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    memory = ExplainableKMeans(4, random_state=0).fit(X)
    assert a.inertia_ <= 1.05 * memory.inertia_


def test_fit_on_exactly_init_sample_rows_seeds_like_the_in_memory_fit(monkeypatch, threads):
    import skxclust._dask_fit as dask_fit

    X = blobs()
    monkeypatch.setattr(dask_fit, "INIT_SAMPLE", X.shape[0])  # all rows: no sample drawn
    memory = ExplainableKMeans(4, random_state=3).fit(X)
    blockwise = ExplainableKMeans(4, random_state=3).fit(da.from_array(X, chunks=ROW_CHUNKS))
    assert_same_fit(memory, blockwise)


def test_the_seeding_sample_has_at_least_three_rows_per_cluster(monkeypatch, threads):
    import skxclust._dask_fit as dask_fit

    sizes = []
    sample = dask_fit._init_sample
    monkeypatch.setattr(dask_fit, "INIT_SAMPLE", 5)
    monkeypatch.setattr(dask_fit, "_init_sample",
                        lambda X, generator, n_rows: sizes.append(n_rows) or sample(
                            X, generator, n_rows))
    ExplainableKMeans(4, random_state=0).fit(da.from_array(blobs(), chunks=ROW_CHUNKS))
    assert sizes == [12]


@pytest.mark.parametrize("tol", [0.0, 1e-2])
def test_fit_stops_when_the_in_memory_fit_stops(tol, threads):
    # the tolerance scales with the column variances merged over the blocks; tol=0 stops
    # when no label changes
    X = np.random.default_rng(0).random((200, 2))  # no clusters: Lloyd converges slowly
    init = X[:4].copy()
    memory = ExplainableKMeans(4, init=init, tol=tol, max_iter=100).fit(X)
    chunks = ((60, 0, 50, 90), (2,))
    blockwise = ExplainableKMeans(4, init=init, tol=tol, max_iter=100).fit(
        da.from_array(X, chunks=chunks))
    assert_same_fit(memory, blockwise)
    assert memory.n_iter_ > 2


@pytest.mark.parametrize("order", [[0, 1, 2], [1, 0, 2], [2, 1, 0]])
def test_merged_block_moments_are_those_of_all_the_rows(order):
    # the moments pass (weighted sums for the centring, column variances for tol) of
    # blocks of 10, 0 and 20 rows merged in any order: those of the 30 rows
    from functools import reduce

    from skxclust._dask_fit import _Frame, _merge_moments, _moments_block

    rng = np.random.default_rng(0)
    X, w = rng.normal(size=(30, 3)) + 5.0, rng.uniform(0.5, 2.0, 30)
    frame = _Frame(lambda rows: rows, None, "cpu", np.float64)
    bounds = [(0, 10), (10, 10), (10, 30)]
    merged = reduce(_merge_moments, [_moments_block(X[a:b], w[a:b], frame)
                                     for a, b in (bounds[i] for i in order)])
    assert merged["finite"] and merged["n"] == 30
    mean = X.mean(0)
    np.testing.assert_allclose(merged["mean"].numpy(), mean, rtol=1e-13)
    np.testing.assert_allclose(merged["m2"].numpy(), ((X - mean) ** 2).sum(0), rtol=1e-12)
    np.testing.assert_allclose(merged["wx"].numpy(), w @ X, rtol=1e-13)
    assert merged["wsum"] == pytest.approx(w.sum(), rel=1e-13)
    np.testing.assert_array_equal(merged["lo"].numpy(), X.min(0))
    np.testing.assert_array_equal(merged["hi"].numpy(), X.max(0))


def test_blockwise_tolerance_is_the_in_memory_one(monkeypatch, threads):
    # tol times the mean biased column variance, as scikit-learn's _tolerance
    import skxclust._base as base
    import skxclust._dask_fit as dask_fit

    seen = {}
    for module in (base, dask_fit):
        scaled = module.scaled_tol
        monkeypatch.setattr(module, "scaled_tol", lambda tol, n, var, m=module, f=scaled:
                            seen.setdefault(m.__name__, f(tol, n, var)))
    X = blobs()
    ExplainableKMeans(4, init=X[:4], tol=1e-3).fit(X)
    ExplainableKMeans(4, init=X[:4], tol=1e-3).fit(da.from_array(X, chunks=ROW_CHUNKS))
    expected = 1e-3 * X.var(0).mean()
    assert seen[base.__name__] == pytest.approx(expected, rel=1e-12)
    assert seen[dask_fit.__name__] == pytest.approx(expected, rel=1e-12)


def test_two_empty_clusters_take_the_two_farthest_rows_of_one_block(threads):
    # both outliers lie in the first block: the blockwise list of farthest rows keeps as
    # many rows per block as there are clusters
    X = blobs()
    X[[1, 2]] += np.array([[60.0] * 8, [-60.0] * 8])
    init = X[[0, 40, 80, 110]].copy()
    init[2:] = 1e3  # two clusters empty after the first assignment
    memory = ExplainableKMeans(4, init=init, max_iter=1).fit(X)
    blockwise = ExplainableKMeans(4, init=init, max_iter=1).fit(
        da.from_array(X, chunks=ROW_CHUNKS))
    assert_same_fit(memory, blockwise)
    assert len(np.unique(blockwise.labels_)) == 4


@pytest.mark.parametrize("weights", ["numpy", "dask"])
def test_weighted_fit_equals_the_in_memory_fit(weights, threads):
    X = blobs()
    w = np.random.default_rng(0).uniform(0.0, 3.0, X.shape[0])
    init = X[:4] + 0.5
    memory = ExplainableKMeans(4, init=init).fit(X, sample_weight=w)
    sw = w if weights == "numpy" else da.from_array(w, chunks=50)
    blockwise = ExplainableKMeans(4, init=init).fit(da.from_array(X, chunks=ROW_CHUNKS),
                                                    sample_weight=sw)
    assert_same_fit(memory, blockwise)


@pytest.mark.parametrize("name", ["explainable", "spatial"])
def test_empty_clusters_are_relocated_like_in_memory(name, threads):
    X = data_for(name)
    init = X[[0, 40, 80, 110]].copy()
    init[3] = 1e3  # far from every sample: empty after the first assignment
    memory = make(name, init=init).fit(X)
    blockwise = make(name, init=init).fit(da.from_array(X, chunks=ROW_CHUNKS))
    assert_same_fit(memory, blockwise)
    assert len(np.unique(blockwise.labels_)) == 4


def test_unknown_chunk_sizes_and_integer_data_are_accepted(threads):
    X = np.rint(blobs() * 10).astype(np.int64)
    Xd = da.from_array(X, chunks=50)
    Xd = Xd[Xd[:, 0] > np.iinfo(np.int64).min]  # unknown row chunk sizes
    est = ExplainableKMeans(4, init=X[:4].astype(float)).fit(Xd)
    memory = ExplainableKMeans(4, init=X[:4].astype(float)).fit(X)
    assert est.cluster_centers_.dtype == np.float64
    assert_same_fit(memory, est)


def test_float32_data_are_fitted_in_float32(threads):
    X = blobs().astype(np.float32)
    est = ExplainableKMeans(4, random_state=0).fit(da.from_array(X, chunks=50))
    assert est.cluster_centers_.dtype == np.float32
    assert est.transform(da.from_array(X, chunks=50)).dtype == np.float32


@pytest.mark.parametrize("bad", ["nan", "inf"])
def test_fit_refuses_non_finite_data_and_changes_nothing(bad, threads):
    X = blobs()
    X[77, 2] = np.nan if bad == "nan" else np.inf
    est = ExplainableKMeans(4).fit(blobs())
    before = copy.deepcopy(est.__dict__)
    with pytest.raises(ValueError, match="NaN or infinity"):
        est.fit(da.from_array(X, chunks=ROW_CHUNKS))
    for key, value in before.items():
        np.testing.assert_equal(est.__dict__[key], value)


def test_fit_refuses_too_few_rows(threads):
    with pytest.raises(ValueError, match="n_clusters=4"):
        ExplainableKMeans(4).fit(da.from_array(blobs()[:3], chunks=2))


def test_partial_fit_on_a_dask_array_steps_once_per_block(threads):
    X = blobs()
    blockwise = ExplainableKMeans(4, random_state=0).partial_fit(da.from_array(X, chunks=50))
    direct = ExplainableKMeans(4, random_state=0)
    for rows in (slice(0, 50), slice(50, 100), slice(100, 150)):
        direct.partial_fit(X[rows])
    assert blockwise.n_steps_ == 3
    np.testing.assert_array_equal(blockwise.cluster_centers_, direct.cluster_centers_)
    # an empty row block is no step
    empty_between = da.from_array(X, chunks=((50, 0, 100), (8,)))
    assert ExplainableKMeans(4, random_state=0).partial_fit(empty_between).n_steps_ == 2


# -- inference ---------------------------------------------------------------------------
METHODS = {
    "explainable": ["predict", "transform", "decision_function", "predict_proba", "explain"],
    "spatial": ["predict", "transform", "decision_function", "explain", "align"],
}


@pytest.fixture(scope="module")
def fitted():
    return {name: make(name).fit(data_for(name)) for name in METHODS}


@pytest.mark.parametrize("name, method", [(n, m) for n in METHODS for m in METHODS[n]])
def test_inference_returns_a_dask_array_equal_to_numpy(name, method, fitted, threads):
    est = fitted[name]
    X = data_for(name)[:90]
    out = getattr(est, method)(da.from_array(X, chunks=(ROW_CHUNKS, 5)))
    assert isinstance(out, da.Array)
    assert out.chunks[0] == (37, 37, 16)
    np.testing.assert_allclose(out.compute(), getattr(est, method)(X), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", ["explainable", "spatial"])
def test_inference_on_the_cluster_equals_numpy(name, fitted, client):
    est = fitted[name]
    X = data_for(name)[:90]
    Xd = da.from_array(X, chunks=ROW_CHUNKS)
    with dask.config.set(scheduler=client):
        labels, relevance = dask.compute(est.predict(Xd), est.explain(Xd, target=1))
    np.testing.assert_array_equal(labels, est.predict(X))
    np.testing.assert_allclose(relevance, est.explain(X, target=1), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_explain_splits_a_per_row_target_with_the_blocks(kind, fitted, threads):
    est = fitted["explainable"]
    X = blobs()[:90]
    target = np.arange(90) % 4
    t = target if kind == "numpy" else da.from_array(target, chunks=20)
    out = est.explain(da.from_array(X, chunks=ROW_CHUNKS), target=t)
    np.testing.assert_allclose(out.compute(), est.explain(X, target=target), rtol=1e-6)


def test_score_of_a_dask_array_is_the_numpy_score(fitted, threads):
    est = fitted["explainable"]
    X = blobs()
    w = np.linspace(0.0, 2.0, X.shape[0])
    Xd = da.from_array(X, chunks=ROW_CHUNKS)
    np.testing.assert_allclose(est.score(Xd), est.score(X), rtol=1e-10)
    np.testing.assert_allclose(est.score(Xd, sample_weight=w), est.score(X, sample_weight=w),
                               rtol=1e-10)


def test_score_of_a_block_without_weight_adds_nothing(fitted, threads):
    # a block whose rows all weigh 0 is scored 0 (not refused as "all zero")
    est = fitted["explainable"]
    X = blobs()
    w = np.r_[np.zeros(ROW_CHUNKS), np.ones(X.shape[0] - ROW_CHUNKS)]
    w_column = da.from_array(w[:, None], chunks=(ROW_CHUNKS, 1))  # (n, 1) is taken too
    score = est.score(da.from_array(X, chunks=ROW_CHUNKS), sample_weight=w_column)
    np.testing.assert_allclose(score, est.score(X, sample_weight=w), rtol=1e-10)


def test_lazy_inference_keeps_the_model_it_was_built_with(threads):
    X = blobs()
    est = ExplainableKMeans(4, random_state=0).fit(X)
    expected = est.predict(X)
    lazy = est.predict(da.from_array(X, chunks=ROW_CHUNKS))
    est.fit(X[::-1] * 3.0)  # a refit before the graph runs
    np.testing.assert_array_equal(lazy.compute(), expected)


def test_explain_top_k_of_a_dask_array_is_refused_naming_it(fitted, threads):
    with pytest.raises(ValueError, match="top_k=2 is not supported for a dask array X"):
        fitted["explainable"].explain(da.from_array(blobs(), chunks=ROW_CHUNKS), top_k=2)


def test_boolean_dask_data_fit_as_their_float_values(threads):
    X = blobs() > 0
    init = X[:4].astype(float) + 0.25
    memory = ExplainableKMeans(4, init=init).fit(X.astype(float))
    blockwise = ExplainableKMeans(4, init=init).fit(da.from_array(X, chunks=ROW_CHUNKS))
    np.testing.assert_array_equal(blockwise.labels_, memory.labels_)


def test_a_dask_array_without_rows_is_refused(threads):
    with pytest.raises(ValueError, match=r"Found array with 0 sample\(s\)"):
        ExplainableKMeans(2).fit(da.zeros((0, 3), chunks=(1, 3)))


def test_inference_checks_features_at_once_and_values_at_compute(fitted, threads):
    est = fitted["explainable"]
    X = blobs()
    with pytest.raises(ValueError, match="features"):
        est.predict(da.from_array(X[:, :5], chunks=ROW_CHUNKS))
    X[100, 0] = np.nan
    lazy = est.predict(da.from_array(X, chunks=ROW_CHUNKS))
    with pytest.raises(ValueError, match="NaN"):
        lazy.compute()


def test_inference_of_an_unfitted_estimator_raises_at_once():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        ExplainableKMeans(4).predict(da.from_array(blobs(), chunks=50))


def test_numpy_use_never_imports_dask():
    code = ("import sys, numpy as np\n"
            "from skxclust import ExplainableKMeans\n"
            "km = ExplainableKMeans(2, random_state=0).fit(np.random.rand(20, 3))\n"
            "km.predict(np.random.rand(5, 3)); km.partial_fit(np.random.rand(5, 3))\n"
            "assert not any(m == 'dask' or m.startswith('dask.') for m in sys.modules)\n")
    subprocess.run([sys.executable, "-c", code], check=True)
