"""Property-based tests (hypothesis) of SpatialTransformerKMeans on small random images.

Random image shapes (1-D signals included), K, scales, offsets, dtypes and warp settings;
each example fits a tiny model (a few warp steps, one or two Lloyd iterations). Candidate
screening (n_candidates < n_clusters and screen_steps < n_steps) is on in about one in five.
"""

import warnings

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning

from skxclust import SpatialTransformerKMeans

SETTINGS = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def problems(draw, dtypes=(np.float64, np.float32)):
    height, width = draw(st.integers(1, 4)), draw(st.integers(2, 5))
    n_clusters = draw(st.integers(2, 4))
    n_samples = draw(st.integers(n_clusters + 1, 12))
    scale = 10.0 ** draw(st.integers(-3, 6))
    offset = draw(st.sampled_from([0.0, 1.0, 100.0, -1e4]))
    seed = draw(st.integers(0, 2**16))
    X = np.random.default_rng(seed).normal(size=(n_samples, height * width))
    X = (X * scale + offset * scale).astype(draw(st.sampled_from(dtypes)))
    params = dict(
        n_clusters=n_clusters,
        image_shape=(height, width),
        warp=draw(st.sampled_from(["tps", "affine", "affine+tps"])),
        n_landmarks=draw(st.sampled_from([4, 9])),
        n_steps=draw(st.integers(0, 4)),
        learning_rate=draw(st.sampled_from([0.01, 0.1])),
        warp_penalty=draw(st.sampled_from([0.0, 1e-3, 1.0])),
        n_candidates=draw(st.sampled_from([None, 1, 2, 3])),
        screen_steps=draw(st.integers(0, 3)),  # screening runs when screen_steps < n_steps
        update_steps=draw(st.sampled_from([0, 2])),
        init=draw(st.sampled_from(["k-means+merge", "k-means++", "random"])),
        n_init=draw(st.sampled_from(["auto", 1])),
        max_iter=draw(st.integers(1, 2)),
        random_state=seed,
        device="cpu",
    )
    return X, params


def _fit(X, params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # duplicate rows are allowed
        return SpatialTransformerKMeans(**params).fit(X)


@SETTINGS
@given(problems(dtypes=(np.float64,)), st.integers(0, 3))
def test_relevance_sums_to_the_evidence_of_any_target_and_is_finite(problem, target_seed):
    X, params = problem
    st_km = _fit(X, params)
    f = st_km.decision_function(X)
    rows = np.arange(len(X))
    targets = np.random.default_rng(target_seed).integers(0, params["n_clusters"], len(X))
    for target, explained in [(None, f.max(1)), (targets, f[rows, targets])]:
        R = st_km.explain(X, target=target)
        assert R.shape == X.shape and R.dtype == X.dtype
        assert np.all(np.isfinite(R))
        np.testing.assert_allclose(R.sum(1), explained, rtol=1e-5,
                                   atol=1e-5 * np.abs(f).max() + 1e-300)


@SETTINGS
@given(problems())
def test_argmax_evidence_is_predict_and_predict_is_idempotent(problem):
    X, params = problem
    st_km = _fit(X, params)
    labels = st_km.predict(X)
    np.testing.assert_array_equal(labels, st_km.predict(X))
    f = st_km.decision_function(X)
    assert np.all(np.isfinite(f))
    f_assigned = f[np.arange(len(X)), labels]
    # ties may let argmax pick another, equally good cluster
    tol = (1e-6 if X.dtype == np.float64 else 1e-3) * np.abs(f).max()
    np.testing.assert_allclose(f_assigned, f.max(1), rtol=0, atol=tol)
    assert np.all(f_assigned >= -tol)


# float32, warp_penalty=0: the last row's warped centroid fits it exactly and its energy
# rounded to -1.2e-10 (the bending-free penalty v^T G v), which transform's sqrt made NaN
NEGATIVE_ENERGY = (
    np.array([[0.34558418, 0.82161814, 0.33043706, -1.3031572],
              [0.9053559, 0.44637457, -0.5369532, 0.5811181],
              [0.3645724, 0.2941325, 0.02842224, 0.546713]], dtype=np.float32),
    dict(n_clusters=2, image_shape=(2, 2), warp="tps", n_landmarks=9, n_steps=3,
         learning_rate=0.01, warp_penalty=0.0, n_candidates=None, screen_steps=0,
         update_steps=0, init="k-means+merge", n_init="auto", max_iter=1, random_state=1,
         device="cpu"),
)


@SETTINGS
@given(problems())
@example(NEGATIVE_ENERGY)
def test_predict_is_the_argmin_of_transform_and_every_output_is_finite(problem):
    X, params = problem
    st_km = _fit(X, params)
    labels = st_km.predict(X)
    D = st_km.transform(X)
    outputs = [D, st_km.decision_function(X), st_km.explain(X), st_km.align(X),
               st_km.cluster_centers_, np.array([st_km.score(X), st_km.inertia_])]
    for out in outputs:
        assert np.all(np.isfinite(out))
    assert D.dtype == X.dtype and np.all(D >= 0)
    # with or without candidate screening: predict, transform and fit use the same fits
    # (a screened-out centroid's distance is the upper bound reached when it was dropped)
    np.testing.assert_array_equal(st_km.labels_, labels)
    d_assigned = D[np.arange(len(X)), labels]
    tol = (1e-12 if X.dtype == np.float64 else 1e-6) * D.max()
    np.testing.assert_allclose(d_assigned, D.min(1), rtol=0, atol=tol)
