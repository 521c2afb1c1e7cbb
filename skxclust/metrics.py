"""Clustering metrics that scikit-learn does not ship: Hungarian clustering accuracy.

Clustering accuracy (ACC) is the fraction of samples whose cluster, after the best
one-to-one matching of clusters to classes, names their class. It is what the deep- and
deformation-invariant-clustering literature reports next to NMI and ARI (which
:mod:`sklearn.metrics` already has).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import make_scorer

__all__ = ["clustering_accuracy", "clustering_accuracy_scorer", "contingency_matrix"]


def _check_labels(y_true, y_pred) -> tuple[np.ndarray, np.ndarray]:
    """Validate two label vectors: 1-D, same non-zero length, no missing values."""
    arrays = []
    for name, y in (("y_true", y_true), ("y_pred", y_pred)):
        arr = np.asarray(y)
        if arr.ndim != 1:
            raise ValueError(
                f"{name} must be a 1-D array of labels, got an array of shape {arr.shape}."
            )
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} contains NaN or infinity; labels must be finite.")
        if arr.dtype.kind not in "biufUSO":
            raise TypeError(f"{name} must hold integer or string labels, got dtype {arr.dtype}.")
        arrays.append(arr)
    y_true, y_pred = arrays
    if y_true.shape[0] != y_pred.shape[0]:
        raise ValueError(
            f"y_true and y_pred must have the same length, got {y_true.shape[0]} and "
            f"{y_pred.shape[0]}."
        )
    if y_true.shape[0] == 0:
        raise ValueError("y_true and y_pred are empty; clustering accuracy needs >= 1 sample.")
    return y_true, y_pred


def contingency_matrix(y_true, y_pred) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Counts of samples per (class, cluster) pair.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Ground-truth class labels (any hashable, sortable labels).
    y_pred : array-like of shape (n_samples,)
        Cluster labels.

    Returns
    -------
    counts : ndarray of shape (n_classes, n_clusters)
        ``counts[i, j]`` is the number of samples of class ``classes[i]`` in cluster
        ``clusters[j]``.
    classes : ndarray of shape (n_classes,)
        Sorted distinct values of ``y_true``.
    clusters : ndarray of shape (n_clusters,)
        Sorted distinct values of ``y_pred``.

    Examples
    --------
    >>> from skxclust.metrics import contingency_matrix
    >>> counts, classes, clusters = contingency_matrix([0, 0, 1], [5, 7, 7])
    >>> counts
    array([[1, 1],
           [0, 1]])
    """
    y_true, y_pred = _check_labels(y_true, y_pred)
    classes, t = np.unique(y_true, return_inverse=True)
    clusters, p = np.unique(y_pred, return_inverse=True)
    counts = np.zeros((classes.size, clusters.size), dtype=np.int64)
    np.add.at(counts, (t.ravel(), p.ravel()), 1)
    return counts, classes, clusters


def clustering_accuracy(y_true, y_pred) -> float:
    """Clustering accuracy under the best one-to-one matching of clusters to classes.

    The matching maximises the number of correctly labelled samples (Hungarian algorithm,
    :func:`scipy.optimize.linear_sum_assignment` on the contingency matrix). Each class is
    matched to at most one cluster and vice versa, so when there are more clusters than
    classes the unmatched clusters count as errors, and when there are fewer, the
    unmatched classes do. Label values themselves do not matter (any permutation or
    renaming of ``y_pred`` gives the same score).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Ground-truth class labels.
    y_pred : array-like of shape (n_samples,)
        Cluster labels, e.g. from ``estimator.predict``.

    Returns
    -------
    float
        Accuracy in ``[0, 1]``; 1.0 when the clustering equals the classes up to renaming.

    Raises
    ------
    ValueError
        If the inputs are not 1-D, differ in length, are empty or contain NaN.
    TypeError
        If the labels are neither numbers nor strings.

    See Also
    --------
    sklearn.metrics.normalized_mutual_info_score
    sklearn.metrics.adjusted_rand_score
    clustering_accuracy_scorer : the same metric as a scorer for ``GridSearchCV``.

    Examples
    --------
    >>> from skxclust.metrics import clustering_accuracy
    >>> clustering_accuracy([0, 0, 1, 1], [1, 1, 0, 0])
    1.0
    >>> clustering_accuracy([0, 0, 1, 1], [0, 0, 0, 1])
    0.75

    Extra clusters cannot all be matched: here cluster 2 counts as wrong.

    >>> clustering_accuracy([0, 0, 1, 1], [0, 0, 1, 2])
    0.75
    """
    counts, _, _ = contingency_matrix(y_true, y_pred)
    rows, cols = linear_sum_assignment(counts, maximize=True)
    return float(counts[rows, cols].sum() / counts.sum())


clustering_accuracy_scorer = make_scorer(clustering_accuracy, greater_is_better=True)
clustering_accuracy_scorer.__doc__ = """Scorer ``scorer(estimator, X, y)``:
:func:`clustering_accuracy` of ``y`` against ``estimator.predict(X)``.

Use it as ``scoring=clustering_accuracy_scorer`` in
:class:`~sklearn.model_selection.GridSearchCV` when ground-truth labels are available for
evaluation. Note that choosing clustering hyper-parameters with labels is supervised model
selection; report it as such.
"""
