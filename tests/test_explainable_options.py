"""ExplainableKMeans options the other tests leave at one value: the sparse-input tag, a
feature extractor's evaluation mode, explain's targets over several row blocks (midpoint
and reference rules), and ``as_module``'s temperature and refusals."""

import numpy as np
import pytest
import torch
from sklearn.datasets import make_blobs

from skxclust import ExplainableKMeans

X, _ = make_blobs(n_samples=120, n_features=5, centers=4, cluster_std=1.0, random_state=1)


@pytest.fixture(scope="module")
def fitted():
    # batch_size 32: explain goes through the 120 rows in four blocks
    return ExplainableKMeans(n_clusters=4, batch_size=32, random_state=0, device="cpu").fit(X)


@pytest.mark.parametrize("extractor, sparse", [
    (None, True), (torch.nn.Sequential(torch.nn.Identity()), False)])
def test_sparse_input_tag_is_set_without_a_feature_extractor_only(extractor, sparse):
    tags = ExplainableKMeans(feature_extractor=extractor).__sklearn_tags__()
    assert tags.input_tags.sparse is sparse


def test_a_feature_extractor_with_dropout_is_applied_in_evaluation_mode():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(5, 8, dtype=torch.float64),
                              torch.nn.Dropout(0.5)).train()
    km = ExplainableKMeans(n_clusters=3, feature_extractor=net, random_state=0,
                           device="cpu").fit(X)
    with torch.no_grad():
        features = net.eval()(torch.from_numpy(X)).numpy()
    mu = km.cluster_centers_
    expected = np.sqrt(((features[:, None, :] - mu[None]) ** 2).sum(-1))
    np.testing.assert_allclose(km.transform(X), expected, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(km.labels_, expected.argmin(1))


@pytest.mark.parametrize("reference", [None, "mean"])
@pytest.mark.parametrize("target", [2, "per_row"])
def test_explain_for_a_given_target_sums_to_that_clusters_evidence(fitted, reference, target):
    target = np.arange(len(X)) % 4 if target == "per_row" else target
    relevance = fitted.explain(X, target=target, reference=reference)
    f = fitted.decision_function(X)[np.arange(len(X)), target]
    np.testing.assert_allclose(relevance.sum(axis=1), f, rtol=1e-9, atol=1e-9)


def test_as_module_soft_uses_the_estimators_temperature():
    km = ExplainableKMeans(n_clusters=4, temperature=3.0, random_state=0, device="cpu").fit(X)
    soft = km.as_module("soft")
    np.testing.assert_allclose(soft(torch.from_numpy(X)).numpy(), km.predict_proba(X),
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("n_clusters, beta, match", [
    (1, None, "kind='neuralized' needs n_clusters >= 2"),
    (4, 0.0, "beta must be > 0 for the LogMeanExp pool"),
], ids=["one_cluster", "zero_beta"])
def test_as_module_neuralized_refusal_names_the_estimators_setting(n_clusters, beta, match):
    km = ExplainableKMeans(n_clusters=n_clusters, random_state=0, device="cpu").fit(X)
    with pytest.raises(ValueError, match=match):
        km.as_module("neuralized", beta=beta)
