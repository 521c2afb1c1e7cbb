"""What the parameters of SpatialTransformerKMeans turn into: no warping is plain k-means,
init="k-means" seeds by Euclidean k-means without a merge, split-merge moves run
``2 * max_iter`` Lloyd iterations from two-means of three runs."""

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from skxclust import ExplainableKMeans, SpatialTransformerKMeans, _spatial

pytestmark = pytest.mark.usefixtures("one_torch_thread")

X, _ = make_blobs(90, 16, centers=6, cluster_std=3.0, random_state=0)


@pytest.mark.parametrize("stuck", [False, True])
def test_no_warping_and_no_appearance_is_plain_kmeans_from_the_same_init(stuck):
    # n_steps=0: no warp, so no split-merge moves either (the docs' "plain k-means"); a
    # "stuck" init (two seeds in one blob, one between two others) is a local optimum
    # that a move would repair
    init = X[:4].copy()
    data = X
    if stuck:
        data, labels = make_blobs(90, 16, centers=3, cluster_std=0.5, random_state=1)
        first, second, third = (data[labels == c] for c in range(3))
        init = np.vstack([first[:2], (second[0] + third[0]) / 2])
    k = init.shape[0]
    st = SpatialTransformerKMeans(k, n_steps=0, appearance="none", init=init,
                                  image_shape=(4, 4), random_state=0).fit(data)
    km = ExplainableKMeans(k, init=init, max_iter=5).fit(data)
    np.testing.assert_array_equal(st.labels_, km.labels_)
    np.testing.assert_allclose(st.cluster_centers_, km.cluster_centers_, rtol=1e-12,
                               atol=1e-12)
    assert st.n_iter_ == km.n_iter_


def test_init_kmeans_seeds_by_euclidean_kmeans_without_a_merge(monkeypatch):
    calls = []
    kmeans = _spatial.euclidean_kmeans
    monkeypatch.setattr(_spatial, "euclidean_kmeans", lambda X, k, *a, **kw: calls.append(
        k) or kmeans(X, k, *a, **kw))
    monkeypatch.setattr(_spatial, "merge_init", lambda *a, **kw: pytest.fail("merged"))
    SpatialTransformerKMeans(3, init="k-means", image_shape=(4, 4), n_steps=2, max_iter=1,
                             split_merge_moves=0, affine_penalty=0.5,
                             random_state=0).fit(X)
    assert calls == [3]


def test_split_merge_moves_run_twice_max_iter_from_two_means_of_three_runs():
    plan = SpatialTransformerKMeans(4, max_iter=3, image_shape=(4, 4))._fit_plan(16, 0.5)
    assert plan.refine.max_iter == 6 and plan.refine.max_moves == 2
    assert plan.refine.seed_centers.keywords == {"n_runs": 3}
