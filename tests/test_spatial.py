"""SpatialTransformerKMeans: invariance, Lloyd behaviour, scikit-learn contract, bad input."""

import copy
import pickle

import numpy as np
import pytest
import torch
from _warp_reference import pair_energy, pair_log_volume
from sklearn.base import clone
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits
from sklearn.metrics import adjusted_rand_score
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import MaxAbsScaler

import skxclust._warp_geometry as warp_geometry
from skxclust import SpatialTransformerKMeans
from skxclust._lloyd import lloyd
from skxclust._merge_init import ward_merge
from skxclust.nn.warps import make_warp_model, warp_images

FAST = dict(n_steps=3, max_iter=5, n_landmarks=4)
SIDE = 10


# tiny problems run faster on one thread (see conftest.one_torch_thread)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def template_images(side=SIDE):
    """Three thin shapes on a side x side canvas: a bar, a ring and an L, flattened."""
    yy, xx = np.mgrid[0:side, 0:side] / (side - 1) * 2 - 1
    bar = np.exp(-(xx**2) / 0.06) * (np.abs(yy) < 0.6)
    ring = np.exp(-((np.sqrt(xx**2 + yy**2) - 0.5) ** 2) / 0.06)
    ell = (np.exp(-((xx + 0.4) ** 2) / 0.06) * (np.abs(yy) < 0.6)
           + np.exp(-((yy - 0.5) ** 2) / 0.06) * (xx > -0.45) * (xx < 0.5))
    return np.stack([bar, ring, ell]).reshape(3, -1)


def deformed_dataset(n_per_class=8, side=SIDE, seed=0, amplitude=0.12):
    """Templates moved by random smooth TPS warps (shifts of about one pixel or two)."""
    rng = np.random.default_rng(seed)
    model = make_warp_model((side, side), 9, "tps", torch.float64)
    templates = torch.as_tensor(template_images(side))
    X, y = [], []
    for k in range(3):
        shift = rng.uniform(-amplitude, amplitude, size=(n_per_class, 1, 1, 2))
        wiggle = rng.normal(0, amplitude / 3, size=(n_per_class, 1, 9, 2))
        params = torch.as_tensor(shift + wiggle).permute(1, 0, 2, 3)  # (1, n, 9, 2)
        X.append(warp_images(templates[k : k + 1], model, params)[0].numpy())
        y += [k] * n_per_class
    return np.concatenate(X), np.array(y)


@pytest.fixture(scope="module")
def shapes():
    return deformed_dataset()


@pytest.fixture(scope="module")
def fitted(shapes):
    X, _ = shapes
    return SpatialTransformerKMeans(3, n_landmarks=9, n_steps=20, learning_rate=0.03,
                                    max_iter=5, random_state=0).fit(X)


# -- invariance and quality --------------------------------------------------------------
def test_deformed_shapes_are_clustered_by_shape(shapes, fitted):
    _, y = shapes
    assert adjusted_rand_score(y, fitted.labels_) == 1.0


@pytest.mark.parametrize("kind", ["affine", "tps"])
def test_a_deformed_centroid_is_assigned_back_with_a_small_distance(fitted, kind):
    centers = fitted.cluster_centers_
    model = make_warp_model((SIDE, SIDE), 9, kind, torch.float64)
    rng = np.random.default_rng(1)
    if kind == "affine":  # rotate ~6 degrees, shift ~1 pixel
        theta = np.array([[0.0, 0.1], [-0.1, 0.0], [0.15, -0.1]])[None, None]
    else:
        theta = rng.normal(0, 0.05, size=(1, 1, 9, 2)) + 0.1
    params = torch.as_tensor(theta).expand(3, 1, -1, -1)
    moved = warp_images(torch.as_tensor(centers), model, params)[:, 0].numpy()
    assert np.array_equal(fitted.predict(moved), np.arange(3))
    warped_d = fitted.transform(moved)[np.arange(3), np.arange(3)]
    euclid_d = np.linalg.norm(moved - centers, axis=1)
    assert np.all(warped_d < 0.3 * euclid_d)


def test_zero_steps_is_euclidean_kmeans_from_the_same_init():
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(c, 1.0, size=(30, 16)) for c in (-2, 0, 3)])
    init = X[[0, 30, 60]]
    # no warp and no appearance transformation: plain k-means
    st = SpatialTransformerKMeans(3, n_steps=0, init=init, n_init=1, appearance="none").fit(X)
    km = KMeans(3, init=init, n_init=1, algorithm="lloyd").fit(X)
    assert np.array_equal(st.labels_, km.labels_)
    np.testing.assert_allclose(st.cluster_centers_, km.cluster_centers_, rtol=1e-10)
    assert st.inertia_ == pytest.approx(km.inertia_, rel=1e-10)
    np.testing.assert_allclose(st.transform(X), km.transform(X), rtol=1e-8)


def test_one_dimensional_signals_cluster_by_shape_not_position():
    rng = np.random.default_rng(0)
    t = np.linspace(-1, 1, 40)  # 40 is not a square: 1 x 40 signals
    X, y = [], []
    for i in range(24):  # one wide bump or two narrow ones, shifted by up to 4 samples
        c = rng.uniform(-0.2, 0.2)
        if i % 2:
            X.append(np.exp(-((t - c) ** 2) / 0.05))
        else:
            X.append(np.exp(-((t - c - 0.3) ** 2) / 0.015)
                     + np.exp(-((t - c + 0.3) ** 2) / 0.015))
        y.append(i % 2)
    X, y = np.array(X), np.array(y)
    init = X[:2]  # one exemplar of each shape: the distance, not the seeding, is tested
    euclid = KMeans(2, init=init, n_init=1).fit(X)
    assert adjusted_rand_score(y, euclid.labels_) < 0.9
    st = SpatialTransformerKMeans(2, init=init, n_landmarks=4, n_steps=30, learning_rate=0.03,
                                  max_iter=5).fit(X)
    assert st.image_shape_ == (1, 40)
    assert adjusted_rand_score(y, st.labels_) == 1.0
    assert st.align(X).shape == X.shape


def test_distortion_settles_over_lloyd_iterations(shapes):
    # The first pass fits the warps from the identity, the later ones continue each pair's
    # warp from the previous pass (WarpGeometry.for_rows): the distortion is not strictly
    # monotone (an update for fixed warps, then new warps), but it must not rise by more
    # than the solver's precision.
    X, _ = shapes
    est = SpatialTransformerKMeans(3, n_landmarks=9)
    geometry = est._make_geometry(X.shape[1])
    Xt = torch.as_tensor(X)
    sw = torch.ones(X.shape[0], dtype=Xt.dtype)
    history = []
    lloyd(Xt, Xt[[0, 1, 12]][None].clone(), geometry, sw, max_iter=8, tol=0.0, history=history)
    inertia = [h["inertia"] for h in history]
    assert len(inertia) >= 2
    assert all(b <= a * 1.01 for a, b in zip(inertia, inertia[1:]))
    assert inertia[-1] <= inertia[0]


def test_align_brings_members_onto_their_centroid(shapes, fitted):
    X, _ = shapes
    aligned = fitted.align(X)
    mu = fitted.cluster_centers_[fitted.labels_]
    assert aligned.shape == X.shape
    before = np.linalg.norm(X - mu, axis=1)
    after = np.linalg.norm(aligned - mu, axis=1)
    assert np.mean(after) < 0.75 * np.mean(before)


def test_predict_is_the_argmin_of_transform(shapes, fitted):
    X, _ = shapes
    assert np.array_equal(fitted.predict(X), fitted.transform(X).argmin(axis=1))


@pytest.mark.parametrize("transform", ["affine", "affine+tps"])
def test_affine_families_cluster_the_shapes(shapes, transform):
    X, y = shapes
    st = SpatialTransformerKMeans(3, warp=transform, n_landmarks=9, n_steps=20,
                                  learning_rate=0.03, max_iter=5, random_state=0).fit(X)
    assert adjusted_rand_score(y, st.labels_) == 1.0


@pytest.mark.parametrize("init", ["k-means+merge", "k-means", "k-means++", "random"])
def test_every_init_gives_a_valid_fit(shapes, init):
    X, _ = shapes
    st = SpatialTransformerKMeans(3, init=init, random_state=0, **FAST).fit(X)
    assert st.cluster_centers_.shape == (3, X.shape[1])
    assert st.n_iter_ >= 1 and np.isfinite(st.inertia_)


@pytest.mark.parametrize("moves, ari", [(0, "bad"), (2, 1.0)])
def test_split_merge_moves_repair_a_fit_with_two_shapes_in_one_cluster(moves, ari):
    # two centroids start on rings, one between a bar and an L: Lloyd iterations keep
    # the bar and the L together; a split-merge move separates them
    X, y = deformed_dataset(n_per_class=10)
    init = np.stack([X[10], X[13], 0.5 * (X[0] + X[20])])
    st = SpatialTransformerKMeans(3, init=init, n_landmarks=9, split_merge_moves=moves,
                                  random_state=0).fit(X)
    if ari == "bad":
        assert adjusted_rand_score(y, st.labels_) < 0.9
    else:
        assert adjusted_rand_score(y, st.labels_) == ari
        np.testing.assert_array_equal(st.predict(X), st.labels_)


def test_split_merge_moves_are_reported_with_verbose(capsys):
    X, _ = deformed_dataset(n_per_class=10)
    init = np.stack([X[10], X[13], 0.5 * (X[0] + X[20])])
    SpatialTransformerKMeans(3, init=init, n_landmarks=9, verbose=1, random_state=0).fit(X)
    out = capsys.readouterr().out
    assert "Split-merge move 1" in out and "kept" in out


@pytest.mark.parametrize("init_rows, n_clusters, rows_seen", [
    (12, 3, 12),  # a random subset of _INIT_ROWS rows
    (4, 3, 6),  # but at least 2 * n_clusters (the over-segmentation's clusters)
    (100, 3, 24),  # every row when there are fewer (24 shapes)
])
def test_merge_inits_warped_steps_run_on_a_subset_of_init_rows_rows(
        shapes, monkeypatch, init_rows, n_clusters, rows_seen):
    from skxclust import _merge_init

    monkeypatch.setattr(_merge_init, "_INIT_ROWS", init_rows)
    euclidean, warped = [], []
    over_segment, for_rows = _merge_init.euclidean_kmeans, warp_geometry.WarpGeometry.for_rows

    def spy_euclidean(X, n, *args, **kwargs):
        euclidean.append((X.shape[0], n))
        return over_segment(X, n, *args, **kwargs)

    def spy_for_rows(self, X, *args, **kwargs):
        warped.append(X.shape[0])
        return for_rows(self, X, *args, **kwargs)

    monkeypatch.setattr(_merge_init, "euclidean_kmeans", spy_euclidean)
    monkeypatch.setattr(warp_geometry.WarpGeometry, "for_rows", spy_for_rows)
    X, _ = shapes
    SpatialTransformerKMeans(n_clusters, split_merge_moves=0, random_state=0, **FAST).fit(X)
    # the over-segmentation sees every row, the warped steps the subset, Lloyd every row
    assert euclidean == [(X.shape[0], 2 * n_clusters)]
    assert warped[0] == rows_seen and warped[-1] == X.shape[0]


def test_ward_merge_joins_the_closest_clusters_first():
    d = np.array([[0, 1, 9, 9], [1, 0, 9, 9], [9, 9, 0, 2], [9, 9, 2, 0.0]])
    np.testing.assert_array_equal(ward_merge(d, np.ones(4), 3), [0, 0, 1, 2])
    np.testing.assert_array_equal(ward_merge(d, np.ones(4), 2), [0, 0, 1, 1])
    np.testing.assert_array_equal(ward_merge(d, np.ones(4), 1), [0, 0, 0, 0])


def test_score_is_the_laplace_log_evidence_of_the_rows(shapes):
    # the distance from the public transform; the Occam factor from an independent
    # Hessian (autograd, tests/_warp_reference.py) at the warp behind that distance (the
    # warp alone: tests/test_appearance.py checks the volume of the appearance)
    X, _ = shapes
    fitted = SpatialTransformerKMeans(3, n_landmarks=9, n_steps=20, learning_rate=0.03,
                                      max_iter=5, appearance="none", random_state=0).fit(X)
    n, n_pixels = X.shape
    labels = fitted.predict(X)
    d = fitted.transform(X)[np.arange(n), labels] ** 2
    Xt, centers = torch.as_tensor(X), torch.as_tensor(fitted.cluster_centers_)
    _, warps = fitted._make_geometry(n_pixels).pair_warps(Xt, centers)
    model = make_warp_model(fitted.image_shape_, fitted.n_landmarks, fitted.warp, torch.float64)
    contrast = ((X - X.mean(1, keepdims=True)) ** 2).sum(1)  # the penalty's scale
    pairs = [(Xt[i], centers[labels[i]], model, warps[i, labels[i]], float(contrast[i]),
              fitted.warp_penalty, fitted.affine_penalty_) for i in range(n)]
    # these warps are the ones transform measured (energy to 1e-12 relative)
    np.testing.assert_allclose([float(pair_energy(*pair)) for pair in pairs], d, rtol=1e-9)
    volume = np.array([float(pair_log_volume(*pair)) for pair in pairs])
    s2 = fitted.noise_variance_
    expected = -d / (2 * s2) - volume / 2 - n_pixels / 2 * np.log(2 * np.pi * s2)
    assert fitted.score(X) == pytest.approx(expected.sum(), rel=1e-9)
    w = np.arange(n) % 3
    assert fitted.score(X, sample_weight=w) == pytest.approx(expected @ w, rel=1e-9)


def test_noise_variance_is_the_mean_energy_per_pixel_of_the_training_rows(shapes, fitted):
    X, _ = shapes
    d = fitted.transform(X).min(axis=1) ** 2
    assert fitted.noise_variance_ == pytest.approx(d.mean() / X.shape[1], rel=1e-6)


def test_labels_are_what_predict_gives_on_the_training_rows(shapes, fitted):
    X, _ = shapes
    np.testing.assert_array_equal(fitted.predict(X), fitted.labels_)


def test_with_candidate_screening_labels_predict_and_transform_agree():
    # 5 clusters, screen_ratio=1.02 (tighter than the default 1.5, so that screening
    # changes labels here): after screen_steps each row keeps fitting only the centroids
    # within 1.02 times its lowest energy, and fit, predict and transform share those fits
    X = load_digits().data[:300]
    st = SpatialTransformerKMeans(5, n_landmarks=9, n_steps=6, screen_steps=1, max_iter=2,
                                  screen_ratio=1.02, random_state=0, centroid_blur=None).fit(X)
    assert st.screen_steps < st.n_steps
    labels = st.predict(X)
    D = st.transform(X)
    np.testing.assert_array_equal(st.labels_, labels)
    np.testing.assert_array_equal(D.argmin(axis=1), labels)
    # screening ran: fitted to the end, the dropped centroids come closer (measured: 1152 of
    # 1500 distances) and 7 rows change cluster, as a predict skipping the screening would
    # show (no centroid blur: its stages screen anew, a dropped pair could rejoin elsewhere)
    unscreened = copy.deepcopy(st).set_params(screen_ratio=None).transform(X)
    # the kept pairs are fitted alike, batched differently: float32 rounding (1e-9 seen)
    assert np.all(unscreened <= D * (1 + 1e-6))
    assert np.sum(unscreened < D * (1 - 1e-6)) > 0.2 * D.size
    assert np.any(unscreened.argmin(axis=1) != labels)


# -- engineering contract -----------------------------------------------------------------
def test_alignment_memory_is_bounded_by_batch_size(shapes, monkeypatch):
    X, _ = shapes
    seen = []
    real = warp_geometry.graduated_fit_warps

    def spy(samples, centroids, *args, **kwargs):
        seen.append((samples.shape[0], centroids.shape[0]))
        return real(samples, centroids, *args, **kwargs)

    monkeypatch.setattr(warp_geometry, "graduated_fit_warps", spy)
    SpatialTransformerKMeans(3, batch_size=5, random_state=0, **FAST).fit(X)
    # at most batch_size * n_clusters pairs at once: 5 rows against the 3 centroids, 2
    # against the 6 of the initialisation, 7 against the 2 of a split (measured)
    assert seen and max(rows * centroids for rows, centroids in seen) <= 5 * 3
    assert max(rows for rows, centroids in seen if centroids == 3) == 5


def test_fit_is_reproducible_and_leaves_the_global_torch_rng_alone(shapes):
    X, _ = shapes
    state = torch.random.get_rng_state()
    a = SpatialTransformerKMeans(3, init="k-means++", random_state=3, **FAST).fit(X)
    b = SpatialTransformerKMeans(3, init="k-means++", random_state=3, **FAST).fit(X)
    assert torch.equal(state, torch.random.get_rng_state())
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)


def test_float32_input_gives_float32_outputs(shapes):
    X = shapes[0].astype(np.float32)
    st = SpatialTransformerKMeans(3, random_state=0, **FAST).fit(X)
    assert st.cluster_centers_.dtype == np.float32
    assert st.transform(X).dtype == np.float32
    assert st.align(X).dtype == np.float32


def test_inputs_are_never_modified(shapes):
    X, _ = shapes
    X = X.copy()
    before = X.copy()
    w = np.ones(X.shape[0])
    st = SpatialTransformerKMeans(3, random_state=0, **FAST).fit(X, sample_weight=w)
    st.predict(X), st.transform(X), st.align(X), st.score(X)
    np.testing.assert_array_equal(X, before)
    np.testing.assert_array_equal(w, 1.0)


def test_warp_centroids_average_pixels_of_any_coverage_and_keep_uncovered_ones():
    # a pixel's splat weight can be a fraction (a lone member's bilinear shares): the
    # centroid is sums / weight there too; below 1e-6 of the largest it keeps its value
    sums = torch.tensor([[0.3, 0.5, 2.0, 5e-9]], dtype=torch.float64)
    weight = torch.tensor([[0.25, 0.5, 4.0, 1e-9]], dtype=torch.float64)
    centers = torch.full((1, 4), 9.0, dtype=torch.float64)
    new = warp_geometry.WarpGeometry.centers_from_sums(sums, weight, centers)
    torch.testing.assert_close(new, torch.tensor([[1.2, 1.0, 0.5, 9.0]], dtype=torch.float64))


def test_pickle_round_trip_keeps_predictions(shapes, fitted):
    X, _ = shapes
    clone = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(clone.predict(X), fitted.predict(X))
    np.testing.assert_allclose(clone.transform(X), fitted.transform(X))


def test_grid_search_over_landmarks_and_learning_rate_in_a_pipeline(shapes):
    # every cross-validated score is the estimator's own score of the held-out fold
    X, _ = shapes
    st = SpatialTransformerKMeans(3, init="k-means++", random_state=0, n_steps=3, max_iter=2)
    pipe = Pipeline([("scale", MaxAbsScaler()), ("st", st)])
    grid = {"st__n_landmarks": [4, 9], "st__learning_rate": [0.01, 0.05]}
    folds = list(KFold(2).split(X))
    search = GridSearchCV(pipe, grid, cv=folds).fit(X)
    results = search.cv_results_
    expected = np.empty((len(results["params"]), len(folds)))
    for i, params in enumerate(results["params"]):
        for j, (train, test) in enumerate(folds):
            scale = MaxAbsScaler().fit(X[train])
            model = clone(st).set_params(**{k.removeprefix("st__"): v for k, v in
                                            params.items()}).fit(scale.transform(X[train]))
            expected[i, j] = model.score(scale.transform(X[test]))
    for j in range(len(folds)):
        np.testing.assert_allclose(results[f"split{j}_test_score"], expected[:, j], rtol=1e-12)
    np.testing.assert_allclose(results["mean_test_score"], expected.mean(1), rtol=1e-12)
    assert search.best_index_ == np.argmax(expected.mean(1))
    # the grid reaches the model: 4 and 9 landmarks score differently at each learning rate
    by_landmarks = {lr: {p["st__n_landmarks"]: expected[i, 0] for i, p in
                         enumerate(results["params"]) if p["st__learning_rate"] == lr}
                    for lr in grid["st__learning_rate"]}
    assert all(abs(sc[4] - sc[9]) > 1e-3 * abs(sc[4]) for sc in by_landmarks.values())
    assert search.predict(X).shape == (X.shape[0],)


def test_verbose_reports_iterations_distortion_and_time(shapes, capsys):
    X, _ = shapes
    SpatialTransformerKMeans(3, verbose=2, random_state=0, **FAST).fit(X)
    out = capsys.readouterr().out
    assert "Iteration 1: inertia" in out and "aligned" in out and "s\n" in out


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_fit_matches_cpu(shapes):
    X, _ = shapes
    cpu = SpatialTransformerKMeans(3, device="cpu", random_state=0, **FAST).fit(X)
    gpu = SpatialTransformerKMeans(3, device="cuda", random_state=0, **FAST).fit(X)
    assert adjusted_rand_score(cpu.labels_, gpu.labels_) == 1.0
    np.testing.assert_allclose(gpu.cluster_centers_, cpu.cluster_centers_, atol=1e-6)


# -- bad input ------------------------------------------------------------------------------
X64 = np.random.default_rng(0).random((20, 64))


@pytest.mark.parametrize(
    "params, match",
    [
        ({"image_shape": (7, 9)}, r"image_shape=\(7, 9\).*n_features=64"),
        ({"image_shape": (8, 8, 1)}, "image_shape"),
        ({"image_shape": (0, 64)}, "image_shape"),
        ({"n_landmarks": 5}, "n_landmarks=5"),
        ({"n_landmarks": 10}, "n_landmarks=10"),
        ({"n_landmarks": 1}, "n_landmarks"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"learning_rate": -0.1}, "learning_rate"),
        ({"warp": "similarity"}, "warp"),
        ({"batch_size": 0}, "batch_size"),
        ({"n_steps": -1}, "n_steps"),
        ({"warp_penalty": -1.0}, "warp_penalty"),
        ({"n_candidates": 0}, "n_candidates"),
        ({"update_steps": -1}, "update_steps"),
        ({"n_clusters": 0}, "n_clusters"),
        ({"n_clusters": 30}, "n_samples=20 should be >= n_clusters=30"),
        ({"init": "kmeans"}, "init"),
        ({"init": np.zeros((3, 10))}, "init array must have shape"),
        ({"n_init": 0}, "n_init"),
        ({"max_iter": 0}, "max_iter"),
        ({"tol": -1.0}, "tol"),
        ({"device": "tpu"}, "device"),
    ],
)
def test_bad_parameters_are_refused_naming_the_parameter(params, match):
    X = X64.copy()
    est = SpatialTransformerKMeans(**{"n_clusters": 3, **FAST, **params})
    with pytest.raises(ValueError, match=match):
        est.fit(X)
    np.testing.assert_array_equal(X, X64)
    assert not hasattr(est, "cluster_centers_")


@pytest.mark.parametrize(
    "X, kwargs, match",
    [
        (np.full((20, 64), np.nan), {}, "NaN"),
        (np.ones((20, 64)) * np.inf, {}, "infinity"),
        (X64[:1], {}, "n_samples=1"),
        (X64, {"sample_weight": -np.ones(20)}, "sample_weight"),
        (X64, {"sample_weight": np.ones(5)}, "sample_weight"),
    ],
)
def test_bad_data_is_refused(X, kwargs, match):
    with pytest.raises(ValueError, match=match):
        SpatialTransformerKMeans(3 if X.shape[0] > 1 else 2, **FAST).fit(X, **kwargs)


def test_sparse_input_is_refused():
    scipy_sparse = pytest.importorskip("scipy.sparse")
    with pytest.raises(TypeError, match="[Ss]parse"):
        SpatialTransformerKMeans(3, **FAST).fit(scipy_sparse.csr_matrix(X64))


def test_inference_refuses_a_different_number_of_features(fitted):
    with pytest.raises(ValueError, match="features"):
        fitted.predict(np.zeros((2, 10)))


def test_unfitted_estimator_refuses_inference():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        SpatialTransformerKMeans().align(X64)


def test_ward_merge_numbers_groups_by_their_first_cluster_whatever_the_rounding():
    # merge_init's distances are symmetric up to rounding (which varied with the threads):
    # whichever triangle holds the smallest cost, clusters 0-3 then 1-2 merge, numbered alike
    d = np.array([[0.0, 9.0, 9.0, 1.0], [9.0, 0.0, 2.0, 9.0],
                  [9.0, 2.0, 0.0, 9.0], [1.0, 9.0, 9.0, 0.0]])
    lower, upper = d.copy(), d.copy()
    lower[3, 0] -= 1e-12
    upper[0, 3] -= 1e-12
    for m in (lower, upper):
        np.testing.assert_array_equal(ward_merge(m, np.ones(4), 2), [0, 1, 1, 0])
