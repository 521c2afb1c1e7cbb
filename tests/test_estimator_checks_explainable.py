"""scikit-learn's estimator checks for ExplainableKMeans."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from skxclust import ExplainableKMeans

# Only the checks that scikit-learn itself marks xfail for KMeans, with its reason.
KMEANS_XFAILS = {
    "check_sample_weight_equivalence_on_dense_data": (
        "sample_weight is not equivalent to removing/repeating samples."
    ),
    "check_sample_weight_equivalence_on_sparse_data": (
        "sample_weight is not equivalent to removing/repeating samples."
    ),
}


@parametrize_with_checks(
    [ExplainableKMeans(n_clusters=2, n_init=2, max_iter=5, device="cpu")],
    expected_failed_checks=lambda est: KMEANS_XFAILS,
)
def test_explainable_kmeans_passes_sklearn_estimator_checks(estimator, check):
    check(estimator)
