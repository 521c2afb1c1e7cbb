"""How explain_pipeline reads the steps before the k-means: each as an affine map, probed
and then verified on the input, or refused naming the step."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from skxclust import ExplainableKMeans, explain_pipeline

X_DIGITS = load_digits().data[:200]


def fitted_pipeline(step, X=X_DIGITS, n_clusters=4):
    return make_pipeline(step, ExplainableKMeans(n_clusters, random_state=0)).fit(X)


def test_a_step_with_sparse_output_is_read_as_its_dense_affine_map():
    pipe = fitted_pipeline(FunctionTransformer(sp.csr_matrix, accept_sparse=True))
    np.testing.assert_allclose(explain_pipeline(pipe, X_DIGITS), pipe[-1].explain(X_DIGITS),
                               rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("step", [PCA(8, random_state=0), StandardScaler()],
                         ids=["PCA", "StandardScaler"])
@pytest.mark.parametrize(("scale", "offset"), [(1e-3, 0.0), (1e3, 0.0), (1e7, 0.0),
                                               (1.0, 1e4), (1.0, 1e8)])
def test_relevance_through_an_affine_step_is_conserved_at_any_scale_of_the_input(
        step, scale, offset):
    """The affine map is probed on the data's own scale, so its rounding stays relative to
    the data: probed at the origin instead, it carries rounding of about machine precision
    times the step's offset, which grows with the square of the input's scale (PCA at 1e7)
    or with its offset (StandardScaler at +1e4) and made these steps refused as not affine.
    At +1e8 the step's output is of order 1 while the terms of ``x @ A + t`` are of order
    1e7: the check's tolerance is relative to those terms, not to the output."""
    X = X_DIGITS * scale + offset
    pipe = fitted_pipeline(step, X)
    R = explain_pipeline(pipe, X)
    evidence = pipe.decision_function(X).max(1)
    np.testing.assert_allclose(R.sum(1), evidence, rtol=1e-6, atol=1e-6 * evidence.max())


def test_an_offset_step_is_affine_to_the_magnitude_of_its_terms():
    """Removing an offset of 1e10 leaves outputs of order 1 that carry rounding of order
    1e-6 (machine precision times 1e10): within 1e-8 of the terms, beyond 1e-8 of the
    output. The step is affine and is read as such."""
    X = X_DIGITS / 7 + 1e10
    pipe = fitted_pipeline(FunctionTransformer(lambda x: (x - 1e10) / 3), X)
    R = explain_pipeline(pipe, X)
    evidence = pipe.decision_function(X).max(1)
    np.testing.assert_allclose(R.sum(1), evidence, rtol=1e-6, atol=1e-4 * evidence.max())


def test_rows_of_zeros_are_explained_through_an_affine_step():
    """All-zero rows give the probe no scale of their own: it steps by 1."""
    pipe = fitted_pipeline(StandardScaler())
    zeros = np.zeros((3, X_DIGITS.shape[1]))
    R = explain_pipeline(pipe, zeros)
    np.testing.assert_allclose(R.sum(1), pipe.decision_function(zeros).max(1), rtol=1e-6)


@pytest.mark.parametrize("step", [
    FunctionTransformer(lambda x: x + 1e-6 * x ** 2),  # off affine by 2.4e-4 at most
    FunctionTransformer(lambda x: x[:, x.std(0) > 0]),  # drops the constant columns
    FunctionTransformer(lambda x: np.minimum(x, 15)),  # affine on row 0 (max 15) only
], ids=["nearly-affine", "input-dependent-width", "clipping"])
def test_a_step_that_is_not_exactly_affine_on_the_input_is_refused_naming_it(step):
    pipe = fitted_pipeline(step)
    with pytest.raises(ValueError, match="step 'functiontransformer'.*not an affine map"):
        explain_pipeline(pipe, X_DIGITS)


@pytest.mark.parametrize("skipped", ["passthrough", None])
def test_passthrough_steps_are_skipped(skipped):
    km = ExplainableKMeans(4, random_state=0)
    pipe = Pipeline([("skipped", skipped), ("kmeans", km)]).fit(X_DIGITS)
    np.testing.assert_allclose(explain_pipeline(pipe, X_DIGITS), km.explain(X_DIGITS),
                               rtol=1e-9, atol=1e-9)


def test_non_finite_input_is_refused_even_with_a_given_target():
    pipe = fitted_pipeline(FunctionTransformer())
    X = X_DIGITS.copy()
    X[3, 5] = np.nan
    with pytest.raises(ValueError, match="Input contains NaN"):
        explain_pipeline(pipe, X, target=0)


def test_a_step_without_transform_is_refused_naming_it():
    km = ExplainableKMeans(3, random_state=0).fit(X_DIGITS)
    pipe = Pipeline([("regressor", LinearRegression()), ("kmeans", km)])
    with pytest.raises(TypeError, match="step 'regressor' \\(LinearRegression\\) has no "
                                        "transform"):
        explain_pipeline(pipe, X_DIGITS)


def test_explain_pipeline_refuses_an_estimator_that_is_not_a_pipeline():
    km = ExplainableKMeans(3, random_state=0).fit(X_DIGITS)
    with pytest.raises(TypeError, match="pipeline must be a sklearn Pipeline, got "
                                        "ExplainableKMeans"):
        explain_pipeline(km, X_DIGITS)


def test_explain_pipeline_refuses_a_kmeans_with_a_feature_extractor():
    km = ExplainableKMeans(3, feature_extractor=torch.nn.Identity(), random_state=0)
    pipe = make_pipeline(FunctionTransformer(), km).fit(X_DIGITS)
    with pytest.raises(ValueError, match="does not support an ExplainableKMeans with a "
                                         "feature_extractor"):
        explain_pipeline(pipe, X_DIGITS)


def test_explain_pipeline_refuses_a_single_cluster_like_explain():
    pipe = fitted_pipeline(FunctionTransformer(), n_clusters=1)
    with pytest.raises(ValueError, match="explain needs n_clusters >= 2"):
        explain_pipeline(pipe, X_DIGITS)


def test_relevance_is_conserved_when_the_centroids_lie_off_the_image_of_the_steps():
    """A step into more dimensions than its input (here each feature twice) reaches an
    8-D subspace only; centroids fitted elsewhere need the root projected on each
    hyperplane (with normals shorter than 1 at this scale)."""
    rng = np.random.default_rng(0)
    X = rng.normal(scale=1e-2, size=(50, 8))
    km = ExplainableKMeans(4, random_state=0).fit(rng.normal(scale=1e-2, size=(200, 16)))
    pipe = Pipeline([("twice", FunctionTransformer(lambda x: np.hstack([x, 2 * x]))),
                     ("kmeans", km)])
    R = explain_pipeline(pipe, X)
    np.testing.assert_allclose(R.sum(1), pipe.decision_function(X).max(1), rtol=1e-9)


@pytest.mark.parametrize("batch_size", [7, 1024])
def test_a_given_beta_and_every_batch_of_rows_are_explained_as_in_explain(batch_size):
    km = ExplainableKMeans(4, batch_size=batch_size, random_state=0)
    pipe = make_pipeline(FunctionTransformer(), km).fit(X_DIGITS)
    assert km.beta_ != 2.0
    np.testing.assert_allclose(explain_pipeline(pipe, X_DIGITS, beta=2.0),
                               km.explain(X_DIGITS, beta=2.0), rtol=1e-9, atol=1e-9)
