"""NEON's reference rule: root points from a reference input (``explain(reference=...)``)."""

import math
import re

import numpy as np
import pytest
import torch
from conftest import to_csr
from sklearn.datasets import load_digits

from skxclust import ExplainableKMeans, SpatialTransformerKMeans
from skxclust.nn import neon_relevance
from skxclust.nn.reference_rule import neon_reference_relevance

X = load_digits().data[:240]
REFERENCE = X.mean(axis=0)


def _problem(per_row: bool, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(7, 5, generator=gen, dtype=torch.float64)
    centers = torch.randn(4, 5, generator=gen, dtype=torch.float64)
    if per_row:
        centers = centers + 0.3 * torch.randn(7, 4, 5, generator=gen, dtype=torch.float64)
    offset = torch.rand(7, 4, generator=gen, dtype=torch.float64)
    return x, centers, offset, torch.randn(5, generator=gen, dtype=torch.float64)


@pytest.mark.parametrize("per_row", [False, True])
@pytest.mark.parametrize("with_offset", [False, True])
@pytest.mark.parametrize("beta", [0.0, 0.7, math.inf])
@pytest.mark.parametrize("target", [None, "fixed"])
def test_reference_relevance_sums_to_the_evidence(per_row, with_offset, beta, target):
    x, centers, offset, z = _problem(per_row)
    offset = offset if with_offset else None
    tgt = None if target is None else torch.tensor([0, 1, 2, 3, 0, 1, 2])
    R, f = neon_reference_relevance(x, centers, tgt, beta, z, offset=offset)
    _, f_mid = neon_relevance(x, centers, tgt, beta, offset=offset)
    torch.testing.assert_close(f, f_mid, rtol=0, atol=1e-12)
    torch.testing.assert_close(R.sum(1), f, rtol=0, atol=1e-11)


@pytest.mark.parametrize("with_offset", [False, True])
def test_the_midpoint_as_reference_is_the_midpoint_rule(with_offset):
    # two clusters: one competitor, whose midpoint is the rule's root before projection
    x, centers, offset, _ = _problem(per_row=False)
    centers, offset = centers[:2], offset[:, :2] if with_offset else None
    R_mid, _ = neon_relevance(x, centers, None, 1.0, offset=offset)
    R_ref, _ = neon_reference_relevance(x, centers, None, 1.0, centers.mean(0), offset=offset)
    torch.testing.assert_close(R_ref, R_mid, rtol=0, atol=1e-12)


def test_the_reference_rule_floors_small_h_by_the_given_relative_eps():
    # each competitor carries R_k h_ck / max(h_ck, eps max_k h_ck) of the evidence
    x, centers, _, z = _problem(per_row=False)
    R, f = neon_reference_relevance(x, centers, None, 0.7, z, eps=0.5)
    g = 2.0 * x @ centers.T - (centers * centers).sum(1)
    h = g.max(1, keepdim=True).values - g
    target = torch.nn.functional.one_hot(g.argmax(1), 4).bool()
    share = torch.softmax(torch.where(target, -math.inf, -0.7 * h), 1) * f[:, None]
    guard = torch.maximum(h, 0.5 * h.max(1, keepdim=True).values)
    expected = (share * h / guard).sum(1)
    torch.testing.assert_close(R.sum(1), expected, rtol=0, atol=1e-12)
    assert not torch.allclose(expected, f)  # the guard did bind


def test_the_reference_rule_mixes_the_pairwise_explanations_by_the_soft_min_shares():
    # with one competitor k, all of h_ck goes to it; with three, R_k / h_ck of that
    x, centers, _, z = _problem(per_row=False)
    R, f = neon_reference_relevance(x, centers, None, 0.7, z)
    g = 2.0 * x @ centers.T - (centers * centers).sum(1)
    for i, c in enumerate(g.argmax(1).tolist()):
        rivals = [k for k in range(4) if k != c]
        h = g[i, c] - g[i, rivals]
        shares = torch.softmax(-0.7 * h, 0) * f[i]
        expected = sum(share / h_k * neon_reference_relevance(
            x[i:i + 1], centers[[c, k]], torch.tensor([0]), 0.7, z)[0][0]
            for share, h_k, k in zip(shares, h, rivals))
        torch.testing.assert_close(R[i], expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("beta", [-1.0, float("nan")])
def test_the_reference_rule_refuses_a_beta_outside_zero_to_inf(beta):
    x, centers, _, z = _problem(per_row=False)
    with pytest.raises(ValueError, match=re.escape(f"beta must be in [0, inf], got {beta!r}.")):
        neon_reference_relevance(x, centers, None, beta, z)


def test_a_reference_on_the_boundary_gives_gradient_times_input():
    # h(x) = w.x + b with w = 2 (mu_0 - mu_1); z on h = 0: R = w * (x - z) exactly, the
    # ordering that removes the most evidence first when features are set to z
    centers = torch.tensor([[0.0, 0.0, 1.0], [2.0, 1.0, 0.0]], dtype=torch.float64)
    z = torch.tensor([1.0, 0.5, 0.5], dtype=torch.float64) + torch.tensor([1.0, -2.0, 0.0])
    w = 2.0 * (centers[0] - centers[1])
    assert float(w @ z - (centers[0] ** 2).sum() + (centers[1] ** 2).sum()) == 0.0
    x = torch.tensor([[0.1, -0.3, 0.9], [-0.5, 0.2, 2.0]], dtype=torch.float64)
    R, f = neon_reference_relevance(x, centers, torch.tensor([0, 0]), 1.0, z)
    torch.testing.assert_close(R, w * (x - z), rtol=0, atol=1e-12)


def test_a_per_row_reference_equals_one_call_per_row():
    x, centers, offset, _ = _problem(per_row=True)
    z = torch.randn(7, 5, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    R, _ = neon_reference_relevance(x, centers, None, 1.0, z, offset=offset)
    for i in range(7):
        Ri, _ = neon_reference_relevance(x[i:i + 1], centers[i:i + 1], None, 1.0, z[i],
                                         offset=offset[i:i + 1])
        torch.testing.assert_close(R[i:i + 1], Ri, rtol=0, atol=1e-12)


@pytest.fixture(scope="module")
def st_fitted():
    return SpatialTransformerKMeans(n_clusters=4, n_steps=15, max_iter=2, random_state=0,
                                    device="cpu").fit(X)


@pytest.mark.parametrize("target", [None, 1])
def test_spatial_reference_relevance_sums_to_the_warped_evidence(st_fitted, target):
    rows = X[:40]
    R = st_fitted.explain(rows, target=target, reference=REFERENCE)
    f = st_fitted.decision_function(rows)
    f_t = f.max(1) if target is None else f[:, target]
    np.testing.assert_allclose(R.sum(1), f_t, rtol=1e-5, atol=1e-9 * np.abs(f).max())
    assert not np.allclose(R, st_fitted.explain(rows, target=target, reference=None))


def test_explainable_reference_relevance_sums_to_the_evidence():
    km = ExplainableKMeans(n_clusters=4, random_state=0, device="cpu").fit(X)
    R = km.explain(X, reference=REFERENCE)
    np.testing.assert_allclose(R.sum(1), km.decision_function(X).max(1), rtol=1e-9,
                               atol=1e-9)
    assert not np.allclose(R, km.explain(X))
    # top_k reads the same map
    features, values = km.explain(X[:5], top_k=3, reference=REFERENCE)
    np.testing.assert_allclose(values, np.sort(R[:5], axis=1)[:, ::-1][:, :3], rtol=1e-12)


def test_without_warping_spatial_reference_relevance_equals_explainable_kmeans():
    init = X[[0, 60, 120, 180]]
    st = SpatialTransformerKMeans(n_clusters=4, n_steps=0, init=init, max_iter=300,
                                  appearance="none", device="cpu").fit(X)
    km = ExplainableKMeans(n_clusters=4, init=init, device="cpu").fit(X)
    np.testing.assert_allclose(st.explain(X[:50], reference=REFERENCE),
                               km.explain(X[:50], reference=REFERENCE), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("reference", [REFERENCE[:10], np.full(64, np.nan), "median",
                                       "Mean", "", np.ones((2, 64))])
def test_explain_refuses_a_bad_reference(st_fitted, reference):
    km = ExplainableKMeans(n_clusters=4, random_state=0, device="cpu").fit(X)
    for est in (km, st_fitted):
        with pytest.raises(ValueError, match="reference"):
            est.explain(X[:3], reference=reference)


# -- ExplainableKMeans(reference="mean"): the same fitted training mean, not the default ---
@pytest.mark.parametrize("kind", ["float64", "float32", "sparse"])
@pytest.mark.parametrize("beta", ["auto", 2.0])
def test_explainable_reference_mean_is_the_training_mean(kind, beta):
    import scipy.sparse as sp

    data = {"float64": X, "float32": X.astype(np.float32), "sparse": sp.csr_matrix(X)}[kind]
    km = ExplainableKMeans(n_clusters=4, beta=beta, random_state=0, device="cpu").fit(data)
    # the fit centres dense rows by their mean: the sums come back to the input frame
    np.testing.assert_allclose(km.reference_, REFERENCE, rtol=1e-6 if kind == "float32"
                               else 1e-12, atol=1e-6)
    rows = data[:30]
    mean = km.explain(rows, reference="mean")
    np.testing.assert_allclose(mean, km.explain(rows, reference=km.reference_), rtol=1e-6,
                               atol=1e-9)
    assert not np.allclose(mean, km.explain(rows))  # the default stays the midpoint rule
    np.testing.assert_allclose(mean.sum(1), km.decision_function(rows).max(1), rtol=1e-4)


@pytest.mark.parametrize("reference", ["mean", REFERENCE], ids=["mean", "input"])
def test_spatial_reference_relevance_of_float32_rows_is_computed_in_float32(reference):
    rows = X.astype(np.float32)
    st = SpatialTransformerKMeans(n_clusters=3, n_steps=0, max_iter=2, appearance="none",
                                  random_state=0, device="cpu").fit(rows)
    assert st.explain(rows[:5], reference=reference).dtype == np.float32


def test_explainable_reference_is_unweighted_and_of_every_fit_path():
    import dask.array as da

    weight = np.linspace(0.1, 3.0, X.shape[0])
    km = ExplainableKMeans(n_clusters=4, random_state=0, device="cpu")
    np.testing.assert_allclose(km.fit(X, sample_weight=weight).reference_, REFERENCE,
                               rtol=1e-12, atol=1e-12)
    dask_fit = ExplainableKMeans(n_clusters=4, random_state=0, device="cpu").fit(
        da.from_array(X, chunks=80))
    np.testing.assert_allclose(dask_fit.reference_, REFERENCE, rtol=1e-12, atol=1e-12)
    km.partial_fit(X[:100]).partial_fit(X[100:])  # like beta_: the last chunk's
    np.testing.assert_allclose(km.reference_, X[100:].mean(0), rtol=1e-12, atol=1e-12)


def test_explainable_reference_mean_needs_the_fitted_mean():
    import copy

    km = ExplainableKMeans(n_clusters=4, random_state=0, device="cpu").fit(X)
    old = copy.deepcopy(km)
    del old.reference_  # a model pickled before reference_ existed
    with pytest.raises(AttributeError, match="refit"):
        old.explain(X[:3], reference="mean")
    np.testing.assert_array_equal(old.explain(X[:3]), km.explain(X[:3]))
    net = torch.nn.Sequential(torch.nn.Linear(64, 8), torch.nn.ReLU())
    deep = ExplainableKMeans(n_clusters=3, feature_extractor=net, random_state=0).fit(X)
    assert not hasattr(deep, "reference_")  # the rows summed would be embeddings
    with pytest.raises(ValueError, match="reference is not supported with a feature"):
        deep.explain(X[:3], reference="mean")


# -- the default of SpatialTransformerKMeans: the reference rule from the training mean ----
def test_spatial_explain_defaults_to_the_training_mean_as_reference(st_fitted):
    # 240 rows: all of them are statistics rows, so reference_ is their exact mean
    np.testing.assert_allclose(st_fitted.reference_, REFERENCE, rtol=1e-12)
    rows = X[:30]
    default = st_fitted.explain(rows)
    np.testing.assert_array_equal(default, st_fitted.explain(rows, reference="mean"))
    np.testing.assert_allclose(default, st_fitted.explain(rows, reference=REFERENCE),
                               rtol=1e-10, atol=1e-10)
    assert not np.allclose(default, st_fitted.explain(rows, reference=None))
    np.testing.assert_allclose(default.sum(1), st_fitted.decision_function(rows).max(1),
                               rtol=1e-5)


def test_spatial_reference_is_the_mean_of_the_statistics_rows_above_512():
    from skxclust._spatial_explain import warp_statistics_rows

    data = load_digits().data[:700]
    st = SpatialTransformerKMeans(n_clusters=3, n_steps=2, max_iter=1, split_merge_moves=0,
                                  random_state=0, device="cpu").fit(data)
    rows = warp_statistics_rows(700)
    assert len(rows) == 512
    np.testing.assert_allclose(st.reference_, data[rows].mean(0), rtol=1e-12)
    assert not np.allclose(st.reference_, data.mean(0), rtol=1e-3)


def test_spatial_explain_needs_the_fitted_reference_only_for_mean(st_fitted):
    import copy

    old = copy.deepcopy(st_fitted)
    del old.reference_  # a model pickled before reference_ existed
    with pytest.raises(AttributeError, match="refit"):
        old.explain(X[:3])
    np.testing.assert_array_equal(old.explain(X[:3], reference=None),
                                  st_fitted.explain(X[:3], reference=None))


def test_explain_refuses_a_reference_with_a_feature_extractor():
    net = torch.nn.Sequential(torch.nn.Linear(64, 8), torch.nn.ReLU())
    km = ExplainableKMeans(n_clusters=3, feature_extractor=net, random_state=0).fit(X)
    with pytest.raises(ValueError, match="reference is not supported with a feature"):
        km.explain(X[:3], reference=REFERENCE)


@pytest.mark.parametrize("block_rows", [None, 1, 7, 240, 1000])
@pytest.mark.parametrize("sparse", [False, True])
def test_column_sums_are_float64_sums_in_any_blocks(block_rows, sparse):
    from skxclust.nn.sparse import column_sums

    rows = torch.from_numpy(X.astype(np.float32))
    data = to_csr(rows) if sparse else rows
    sums = column_sums(data, block_rows)
    assert sums.dtype == torch.float64
    torch.testing.assert_close(sums, rows.double().sum(0), rtol=1e-12, atol=1e-9)


def test_row_sums_never_copy_the_rows_to_float64_whole():
    import subprocess
    import sys

    # 60,000 x 200 float32 rows (46 MiB): a float64 copy would add 92 MiB to the peak
    code = ("import resource, torch\nfrom skxclust._plan import row_sums\n"
            "x = torch.rand(60000, 200)\n"
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "row_sums(x)\n"
            "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)")
    grown = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True).stdout)
    assert grown < 30, f"row_sums raised the peak by {grown:.0f} MiB"
