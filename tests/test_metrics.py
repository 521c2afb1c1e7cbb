"""Hungarian clustering accuracy and its GridSearchCV scorer."""

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV

from skxclust import ExplainableKMeans
from skxclust.metrics import (
    clustering_accuracy,
    clustering_accuracy_scorer,
    contingency_matrix,
)


def _brute_force_accuracy(y_true, y_pred):
    """Best accuracy over every injective map clusters -> classes (small cases only)."""
    from itertools import permutations

    classes, clusters = np.unique(y_true), np.unique(y_pred)
    best = 0
    slots = list(classes) + [None] * max(0, len(clusters) - len(classes))
    for perm in permutations(slots, len(clusters)):
        mapping = dict(zip(clusters, perm))
        best = max(best, sum(mapping[p] == t for t, p in zip(y_true, y_pred)))
    return best / len(y_true)


def test_permuted_cluster_labels_score_one():
    y = np.repeat(np.arange(5), 4)
    perm = np.array([3, 0, 4, 1, 2])
    assert clustering_accuracy(y, perm[y]) == 1.0


def test_renamed_string_and_integer_labels_score_one():
    assert clustering_accuracy(["a", "a", "b", "c"], [7, 7, 1, 9]) == 1.0


def test_known_confusion_gives_matched_diagonal_share():
    # counts (classes x clusters) = [[3, 1], [2, 4]]: best matching 3 + 4 of 10.
    y_true = [0, 0, 0, 0, 1, 1, 1, 1, 1, 1]
    y_pred = [5, 5, 5, 6, 5, 5, 6, 6, 6, 6]
    assert clustering_accuracy(y_true, y_pred) == pytest.approx(0.7)


def test_matching_is_global_not_greedy_per_cluster():
    # Greedy (each cluster to its majority class) would map both clusters to class 0.
    y_true = [0, 0, 0, 0, 1, 1, 0, 0, 0]
    y_pred = [0, 0, 0, 0, 0, 0, 1, 1, 1]
    assert clustering_accuracy(y_true, y_pred) == pytest.approx(5 / 9)


def test_more_clusters_than_classes_count_unmatched_clusters_as_errors():
    y_true = [0, 0, 0, 1, 1, 1]
    y_pred = [0, 0, 2, 1, 1, 3]  # clusters 2 and 3 have no class left to match
    assert clustering_accuracy(y_true, y_pred) == pytest.approx(4 / 6)


def test_fewer_clusters_than_classes_count_unmatched_classes_as_errors():
    y_true = [0, 0, 1, 1, 2, 2]
    y_pred = [0, 0, 0, 0, 0, 0]
    assert clustering_accuracy(y_true, y_pred) == pytest.approx(2 / 6)


@pytest.mark.parametrize("seed", range(5))
def test_hungarian_matches_brute_force_on_random_labelings(seed):
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, 3, 30)
    y_pred = rng.integers(0, 4, 30)
    assert clustering_accuracy(y_true, y_pred) == pytest.approx(
        _brute_force_accuracy(y_true, y_pred)
    )


def test_contingency_matrix_counts_class_cluster_pairs():
    counts, classes, clusters = contingency_matrix([1, 1, 2, 2, 2], ["x", "y", "y", "y", "x"])
    np.testing.assert_array_equal(counts, [[1, 1], [1, 2]])
    assert classes.tolist() == [1, 2] and clusters.tolist() == ["x", "y"]


@pytest.mark.parametrize(
    ("y_true", "y_pred", "match"),
    [
        ([0, 1, 1], [0, 1], "same length"),
        ([], [], "empty"),
        ([[0, 1]], [[0, 1]], "1-D"),
        ([0, 1], [[0], [1]], "y_pred must be a 1-D"),
        ([0.0, np.nan], [0, 1], "NaN"),
        (3, [0], "y_true must be a 1-D array of labels, got an array of shape \\(\\)"),
    ],
)
def test_bad_label_vectors_raise_value_error_naming_the_problem(y_true, y_pred, match):
    with pytest.raises(ValueError, match=match):
        clustering_accuracy(y_true, y_pred)


@pytest.mark.parametrize("y_true", [
    np.array([True, True, False, False]),
    np.array(["cat", "cat", "dog", "dog"], dtype=object),  # e.g. a pandas column
], ids=["booleans", "object-strings"])
def test_boolean_and_object_labels_are_labels(y_true):
    assert clustering_accuracy(y_true, [1, 1, 0, 0]) == 1.0
    assert clustering_accuracy([0, 0, 1, 1], y_true) == 1.0


def test_non_label_dtype_raises_type_error():
    with pytest.raises(TypeError, match="y_true"):
        clustering_accuracy(np.array([1 + 1j, 2j]), [0, 1])


def test_scorer_scores_predict_labels_against_y():
    X = np.array([[0.0, 0.0], [0.0, 0.2], [5.0, 5.0], [5.0, 5.2]])
    y = np.array([1, 1, 0, 0])
    km = ExplainableKMeans(n_clusters=2, random_state=0, device="cpu").fit(X)
    assert clustering_accuracy_scorer(km, X, y) == 1.0


def test_scorer_drives_grid_search_to_the_true_number_of_clusters():
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    y = rng.permutation(np.repeat(np.arange(3), 30))  # every CV fold sees every class
    X = centres[y] + 0.3 * rng.standard_normal((90, 2))
    search = GridSearchCV(
        ExplainableKMeans(random_state=0, device="cpu"),
        {"n_clusters": [2, 3]},
        scoring=clustering_accuracy_scorer,
        cv=3,
    ).fit(X, y)
    assert search.best_params_ == {"n_clusters": 3}
    assert search.best_score_ == pytest.approx(1.0)
