"""Shared data of the scikit-learn KMeans test port.

scikit-learn 1.9.1's KMeans tests (``sklearn/cluster/tests/test_k_means.py``), adapted to
ExplainableKMeans, are split by topic into

- ``tests/test_sklearn_kmeans_lloyd.py``: the Lloyd iterations (results, empty-cluster
  relocation, convergence, iteration counts, distances and inertia, verbose output);
- ``tests/test_sklearn_kmeans_init.py``: initialisation (``init``, ``n_init``, seeding,
  sample weights in the seeding) and parameter errors;
- ``tests/test_sklearn_kmeans_inputs.py``: inputs (dense and sparse, dtypes, memory layout,
  sample weights) and the inference methods (``predict``, ``transform``, feature names).

This module holds what they share: the ``KMeans`` stand-in and scikit-learn's module-level
data. The fixtures ``global_random_seed`` and ``global_dtype`` are in ``tests/conftest.py``.

Written from that module: ``KMeans`` is ExplainableKMeans, the data, parameters and
assertions are scikit-learn's; nothing is weakened. What changed for all of them (the
changes of single tests are listed in the docstring of the file that holds them):

- ``algorithm="elkan"`` parametrisations are dropped (no ``algorithm`` parameter: every
  fit is Lloyd's); ``MiniBatchKMeans`` parametrisations are dropped (no mini-batch
  ``fit``; its ``partial_fit`` step is ours where a test drives ``partial_fit``).
- ``global_random_seed`` runs seeds 0 and 42, ``global_dtype`` float64 and float32.
- Checks of scikit-learn private helpers are pointed at our counterparts.

Removed (15 of scikit-learn's 58 test functions; 43 kept), with the reason:

- ``test_minibatch_kmeans_verbose``, ``test_minibatch_kmeans_warning_init_size``,
  ``test_minibatch_sensible_reassign``, ``test_minibatch_reassign``,
  ``test_minibatch_with_many_reassignments``, ``test_minibatch_kmeans_init_size``,
  ``test_minibatch_declared_convergence``, ``test_minibatch_iter_steps``: MiniBatchKMeans
  ``fit`` and its parameters (``init_size``, ``reassignment_ratio``,
  ``max_no_improvement``, ``batch_size`` as a mini-batch size) do not exist here.
- ``test_kmeans_copyx``: no ``copy_x`` parameter (the input is never modified; tested in
  ``tests/test_input_validation_refused.py`` and ``tests/test_input_validation_accepted.py``).
- ``test_k_means_function``: no ``k_means`` function.
- ``test_warning_elkan_1_cluster``: no ``algorithm`` parameter.
- ``test_kmeans_plusplus_wrong_params``, ``test_kmeans_plusplus_norms``: no public
  ``kmeans_plusplus`` function and no ``x_squared_norms`` argument.
- ``test_kmeans_plusplus_dataorder``: memory layout is covered by
  ``test_fortran_aligned_data`` (our seeding takes torch tensors).
- ``test_is_same_clustering``: a scikit-learn private helper with no counterpart here.
- The ``"callable"`` init cases of ``test_all_init``, ``test_minibatch_kmeans_partial_fit_init``,
  ``test_kmeans_init_auto_with_initial_centroids`` and ``test_wrong_params``: ``init``
  takes no callable.
"""

import numpy as np
import torch
from sklearn.datasets import make_blobs
from sklearn.utils.fixes import CSR_CONTAINERS

from skxclust import ExplainableKMeans
from skxclust._validation import to_tensor


def KMeans(*args, **kwargs):  # noqa: N802 - the name the tests use
    return ExplainableKMeans(*args, device="cpu", **kwargs)


# non centered, sparse centers to check the
centers = np.array(
    [
        [0.0, 5.0, 0.0, 0.0, 0.0],
        [1.0, 1.0, 4.0, 0.0, 0.0],
        [1.0, 0.0, 0.0, 5.0, 1.0],
    ]
)
n_samples = 100
n_clusters, n_features = centers.shape
X, true_labels = make_blobs(
    n_samples=n_samples, centers=centers, cluster_std=1.0, random_state=42
)
X_as_any_csr = [container(X) for container in CSR_CONTAINERS]
data_containers = [np.array] + CSR_CONTAINERS
data_containers_ids = (
    ["dense", "sparse_matrix", "sparse_array"]
    if len(X_as_any_csr) == 2
    else ["dense", "sparse_matrix"]
)


def _tensor(X):
    return to_tensor(X, torch.device("cpu"))
