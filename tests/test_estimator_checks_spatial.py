"""scikit-learn's estimator checks for SpatialTransformerKMeans (both noise models)."""

import warnings

from conftest import skip_array_api_check
from sklearn.utils.estimator_checks import parametrize_with_checks

from skxclust import SpatialTransformerKMeans

FAST = dict(n_steps=3, max_iter=5, n_landmarks=4)

# noise="contrast" refuses constant rows (their noise variance would be 0), and these
# checks fit data with some (rows such as [1, 1]; a single feature)
_CONSTANT_ROW_CHECKS = ("check_estimators_dtypes", "check_sample_weights_pandas_series",
                        "check_sample_weights_not_an_array", "check_sample_weights_shape",
                        "check_sample_weights_not_overwritten", "check_fit2d_1feature")


def _expected_failed_checks(estimator):
    failed = {
        "check_sample_weight_equivalence_on_dense_data":
            "as for sklearn.cluster.KMeans, repeated samples and weights can reach a "
            "different local optimum",
    }
    if estimator.noise == "contrast":
        failed.update(dict.fromkeys(_CONSTANT_ROW_CHECKS, "noise='contrast' refuses the "
                                    "constant rows of the check's data"))
    return failed


with warnings.catch_warnings():
    warnings.simplefilter("ignore")

    @parametrize_with_checks(
        [SpatialTransformerKMeans(n_clusters=3, random_state=0, **FAST),
         SpatialTransformerKMeans(n_clusters=3, random_state=0, noise="contrast", **FAST)],
        expected_failed_checks=_expected_failed_checks,
    )
    def test_sklearn_estimator_checks(estimator, check):
        skip_array_api_check(check)
        check(estimator)
