"""scikit-learn's estimator checks for ExplainableKMeans."""

from conftest import skip_array_api_check
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
# scikit-learn 1.9.1's sparse-container check reads ``classifier_tags.multi_class`` of any
# estimator that has predict_proba, which is None for a clusterer (AttributeError after a
# successful sparse fit and predict). Sparse input itself is covered by
# tests/test_sparse_input.py and tests/test_sklearn_kmeans_*.py.
SKLEARN_CHECK_BUGS = {
    name: "scikit-learn's check reads classifier_tags of a clusterer with predict_proba"
    for name in ("check_estimator_sparse_array", "check_estimator_sparse_matrix")
}


@parametrize_with_checks(
    [ExplainableKMeans(n_clusters=2, n_init=2, max_iter=5, device="cpu")],
    expected_failed_checks=lambda est: {**KMEANS_XFAILS, **SKLEARN_CHECK_BUGS},
)
def test_explainable_kmeans_passes_sklearn_estimator_checks(estimator, check):
    skip_array_api_check(check)
    check(estimator)
