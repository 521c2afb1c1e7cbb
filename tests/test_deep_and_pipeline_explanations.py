"""Explanations of deep clusters (feature extractor + LRP) and of affine pipelines."""

import numpy as np
import pytest
import torch
from _deep_helpers import feature_relevance
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA, TruncatedSVD
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import (
    MaxAbsScaler,
    MinMaxScaler,
    Normalizer,
    PolynomialFeatures,
    StandardScaler,
)

from skxclust import ExplainableKMeans, explain_pipeline

X_DIGITS = load_digits().data[:400]


def relu_net(bias: bool, dtype=torch.float64):
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Unflatten(1, (1, 8, 8)),
        torch.nn.Conv2d(1, 4, 3, bias=bias),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Sequential(torch.nn.Linear(36, 16, bias=bias), torch.nn.ReLU()),
    ).to(dtype)


@pytest.fixture(scope="module")
def deep_model():
    return ExplainableKMeans(n_clusters=5, feature_extractor=relu_net(False),
                             random_state=0, device="cpu").fit(X_DIGITS)


def test_deep_clusters_are_fitted_in_feature_space(deep_model):
    assert deep_model.cluster_centers_.shape == (5, 16)
    assert deep_model.n_features_in_ == 64
    with torch.no_grad():
        feats = relu_net(False)(torch.from_numpy(X_DIGITS)).numpy()
    plain = ExplainableKMeans(n_clusters=5, init=deep_model.cluster_centers_).fit(feats)
    np.testing.assert_array_equal(deep_model.predict(X_DIGITS), plain.predict(feats))


def zero_feature_share(km, X):
    """``(f, NEON's share of f on the features that are 0)``: what reaches no pixel."""
    features, relevance, f = feature_relevance(km, X)
    return f, (relevance * (features == 0)).sum(1).numpy()


@pytest.mark.parametrize("rule", ["epsilon", "zplus"])
def test_deep_relevance_on_raw_input_is_the_evidence_but_the_zero_features_share(
        deep_model, rule):
    """Bias-free ReLU net: the pixels hold f_c(x) but NEON's share on the zero features,
    which a ReLU at 0 passes nowhere."""
    R = deep_model.explain(X_DIGITS, rule=rule)
    f, on_zero = zero_feature_share(deep_model, X_DIGITS)
    assert R.shape == X_DIGITS.shape
    assert np.median(np.abs(on_zero) / f) > 0.01  # measured 0.085: not small
    rel_err = np.abs(f - R.sum(1) - on_zero) / np.abs(f)
    # measured medians 6.3e-10 (epsilon) and 4.1e-10 (zplus): the stabiliser epsilon=1e-9
    assert np.median(rel_err) <= 1e-7


def conv_pool_net(pool):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Unflatten(1, (1, 8, 8)),
                               torch.nn.Conv2d(1, 8, 3, bias=False), torch.nn.ReLU(), pool,
                               torch.nn.Flatten()).double()


POOLS = [torch.nn.MaxPool2d(2), torch.nn.AvgPool2d(2)]


@pytest.mark.parametrize("pool", POOLS)
def test_relevance_of_zero_features_after_relu_and_pool_is_absorbed_the_rest_conserved(pool):
    """Many pooled features are exactly 0: their NEON share is routed to the ReLU outputs
    of their window, all 0, and absorbed there; the rest reaches the pixels.

    On raw digits, an all-zero 3x3 patch gives a bias-free convolution output of exactly 0,
    which passes no relevance on either; the next test has no such patch."""
    net = conv_pool_net(pool)
    with torch.no_grad():
        assert (net(torch.from_numpy(X_DIGITS)) == 0).double().mean() > 0.25
    km = ExplainableKMeans(n_clusters=5, feature_extractor=net, random_state=0).fit(X_DIGITS)
    f, on_zero = zero_feature_share(km, X_DIGITS)
    rel_err = np.abs(f - km.explain(X_DIGITS).sum(1) - on_zero) / np.abs(f)
    # measured medians 3.9e-10 (max pool) and 3.5e-10 (average pool)
    assert np.median(rel_err) <= 1e-7
    # epsilon=0: those exactly-zero outputs pass nothing on (they gave NaN before)
    assert np.all(np.isfinite(km.explain(X_DIGITS, epsilon=0.0)))


@pytest.mark.parametrize("pool", POOLS)
def test_pools_conserve_all_but_the_zero_features_share_on_every_row_without_zero_patches(
        pool):
    """Digits shifted by 1 have no all-zero patch, so no convolution output is exactly 0
    while over a third of the pooled features still are; with epsilon=0 every row then
    holds f_c(x) but the zero features' share to rounding (measured max 2.5e-12 and
    1.4e-13 relative)."""
    X = X_DIGITS + 1.0
    net = conv_pool_net(pool)
    with torch.no_grad():
        assert (net(torch.from_numpy(X)) == 0).double().mean() > 0.25
        assert (net[:2](torch.from_numpy(X)) != 0).all()
    km = ExplainableKMeans(n_clusters=5, feature_extractor=net, random_state=0).fit(X)
    f, on_zero = zero_feature_share(km, X)
    rel_err = np.abs(f - km.explain(X, epsilon=0.0).sum(1) - on_zero) / np.abs(f)
    assert rel_err.max() <= 1e-10


def test_identity_extractor_gives_plain_neon_relevance():
    """The epsilon rule passes R unchanged through an identity layer wherever the input is
    non-zero (a zero input carries no relevance under LRP), hence the shift by one."""
    X = X_DIGITS + 1.0
    lin = torch.nn.Linear(64, 64, bias=False).double()
    with torch.no_grad():
        lin.weight.copy_(torch.eye(64))
    deep = ExplainableKMeans(n_clusters=4, feature_extractor=torch.nn.Sequential(lin),
                             random_state=0).fit(X)
    plain = ExplainableKMeans(n_clusters=4, random_state=0).fit(X)
    np.testing.assert_allclose(deep.explain(X), plain.explain(X), rtol=1e-6, atol=1e-6)


def test_feature_extractor_is_not_modified_by_fit_or_explain():
    net = relu_net(True).train()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    km = ExplainableKMeans(n_clusters=3, feature_extractor=net, random_state=0).fit(X_DIGITS)
    km.explain(X_DIGITS[:10])
    assert net.training
    for k, v in net.state_dict().items():
        assert torch.equal(v, before[k])


def test_float32_extractor_accepts_float64_input():
    km = ExplainableKMeans(n_clusters=3, feature_extractor=relu_net(False, torch.float32),
                           random_state=0).fit(X_DIGITS)
    R = km.explain(X_DIGITS[:20])
    assert R.dtype == np.float64 and np.all(np.isfinite(R))


@pytest.mark.parametrize("layer", [torch.nn.Tanh(), torch.nn.BatchNorm1d(64)])
def test_unsupported_extractor_layer_is_refused_naming_it(layer):
    net = torch.nn.Sequential(layer).double()
    with pytest.raises(TypeError, match=type(layer).__name__):
        ExplainableKMeans(n_clusters=2, feature_extractor=net).fit(X_DIGITS)


def test_bad_lrp_rule_is_refused(deep_model):
    with pytest.raises(ValueError, match="rule"):
        deep_model.explain(X_DIGITS[:5], rule="alpha-beta")


# --- pipelines ------------------------------------------------------------------------


AFFINE_PREFIXES = {
    "standard": lambda: [StandardScaler()],
    "minmax+pca": lambda: [MinMaxScaler(), PCA(n_components=12, random_state=0)],
    "standard+pca-whiten+maxabs": lambda: [StandardScaler(), PCA(10, whiten=True,
                                                                   random_state=0),
                                           MaxAbsScaler()],
    "svd": lambda: [TruncatedSVD(n_components=8, random_state=0)],
}


@pytest.mark.parametrize("name", sorted(AFFINE_PREFIXES))
def test_pipeline_relevance_is_on_input_features_and_conserved(name):
    pipe = make_pipeline(*AFFINE_PREFIXES[name](),
                         ExplainableKMeans(n_clusters=6, random_state=0)).fit(X_DIGITS)
    R = explain_pipeline(pipe, X_DIGITS)
    f = pipe.decision_function(X_DIGITS)
    assert R.shape == X_DIGITS.shape
    np.testing.assert_allclose(R.sum(1), f.max(1), rtol=1e-6)
    targets = np.arange(len(X_DIGITS)) % 6
    R_t = explain_pipeline(pipe, X_DIGITS, target=targets)
    np.testing.assert_allclose(R_t.sum(1), f[np.arange(len(X_DIGITS)), targets],
                               rtol=1e-6, atol=1e-9 * np.abs(f).max())


def test_pipeline_with_identity_step_reduces_to_plain_explain():
    pipe = make_pipeline(StandardScaler(with_mean=False, with_std=False),
                         ExplainableKMeans(n_clusters=5, random_state=0)).fit(X_DIGITS)
    np.testing.assert_allclose(explain_pipeline(pipe, X_DIGITS), pipe[-1].explain(X_DIGITS),
                               rtol=1e-9, atol=1e-9)


def test_pipeline_scaler_moves_relevance_like_the_scaled_explanation():
    """Through a pure per-feature scaling, relevance per feature is unchanged."""
    pipe = make_pipeline(StandardScaler(), ExplainableKMeans(n_clusters=5, random_state=0))
    pipe.fit(X_DIGITS)
    Z = pipe[0].transform(X_DIGITS)
    np.testing.assert_allclose(explain_pipeline(pipe, X_DIGITS), pipe[-1].explain(Z),
                               rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("step", [Normalizer(), PolynomialFeatures(2)])
def test_non_affine_step_is_refused_naming_the_step(step):
    pipe = make_pipeline(step, ExplainableKMeans(n_clusters=3, random_state=0))
    pipe.fit(X_DIGITS[:100, :8])
    name = pipe.steps[0][0]
    with pytest.raises(ValueError, match=f"step '{name}'.*not an affine map"):
        explain_pipeline(pipe, X_DIGITS[:100, :8])


def test_pipeline_must_end_in_explainable_kmeans():
    from sklearn.cluster import KMeans

    pipe = make_pipeline(StandardScaler(), KMeans(3, n_init=1)).fit(X_DIGITS)
    with pytest.raises(TypeError, match="ExplainableKMeans"):
        explain_pipeline(pipe, X_DIGITS)


def test_pipeline_target_out_of_range_is_refused():
    pipe = make_pipeline(StandardScaler(), ExplainableKMeans(3, random_state=0)).fit(X_DIGITS)
    with pytest.raises(ValueError, match="out of range"):
        explain_pipeline(pipe, X_DIGITS, target=3)
