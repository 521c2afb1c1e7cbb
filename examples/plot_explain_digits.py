"""
=============================================
Explaining k-means clusters of digits (NEON)
=============================================

:class:`~skxclust.ExplainableKMeans` clusters scikit-learn's 8 x 8 digits like
:class:`sklearn.cluster.KMeans`, and :meth:`~skxclust.ExplainableKMeans.explain` tells,
pixel by pixel, why a digit sits in its cluster.

The evidence for cluster ``c`` is ``f_c(x) = min_{k != c} ||x - mu_k||^2 - ||x - mu_c||^2``;
it is positive exactly for the assigned cluster. The relevance maps split ``f_c(x)`` over
the pixels: red pixels speak for the cluster, blue pixels against it, and each map sums
to ``f_c(x)`` exactly.
"""

# %%
# Fit on the digits
# -----------------
# Set ``SKXCLUST_EXAMPLES_QUICK=1`` to run on a small subset (used by the tests).
import os

import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import adjusted_rand_score

from skxclust import ExplainableKMeans
from skxclust.datasets import load_digits_images, stratified_subset
from skxclust.plotting import plot_centroids, plot_relevance

QUICK = os.environ.get("SKXCLUST_EXAMPLES_QUICK", "0") not in ("", "0")

X, y, image_shape = load_digits_images()
if QUICK:
    X, y = stratified_subset(X, y, 300, random_state=0)

km = ExplainableKMeans(n_clusters=10, n_init=1 if QUICK else 10, random_state=0).fit(X)
print(f"ARI against the digit labels: {adjusted_rand_score(y, km.labels_):.3f}")

fig = plot_centroids(km, image_shape, cmap="gray_r", figsize=(10, 1.6))
fig.suptitle("centroids (cluster index and size)")

# %%
# Relevance of the pixels for the assigned cluster
# ------------------------------------------------
# One sample of each of the first clusters, shown next to its relevance map
# (:func:`~skxclust.plotting.plot_relevance`: colour limits symmetric around 0).
rows = [int(np.flatnonzero(km.labels_ == k)[0]) for k in range(4)]
R = km.explain(X[rows])
f = km.decision_function(X[rows])
titles = [f"cluster {km.labels_[i]}: sum R = {r.sum():.1f}" for i, r in zip(rows, R)]
fig = plot_relevance(X[rows], R, image_shape, sample_cmap="gray_r", titles=titles)

# %%
# Conservation
# ------------
# The relevances of each sample add up to its cluster evidence, up to rounding.
R_all = km.explain(X)
f_all = km.decision_function(X).max(axis=1)
rel_err = np.abs(R_all.sum(axis=1) - f_all) / np.abs(f_all)
print(f"largest relative conservation error over {len(X)} samples: {rel_err.max():.1e}")

# %%
# Why *not* another cluster?
# --------------------------
# ``target`` explains the evidence for any cluster. For a cluster the sample is not in,
# ``f`` is negative: the map shows which pixels keep the sample out of it.
i = rows[0]
runner_up = int(np.argsort(f[0])[-2])
R_other = km.explain(X[[i]], target=runner_up)
fig = plot_relevance(X[[i]], R_other, image_shape, sample_cmap="gray_r",
                     titles=[f"cluster {runner_up}: sum R = {R_other.sum():.1f}"])
plt.show()
