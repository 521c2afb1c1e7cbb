"""
=====================================================
Time series: clustering a UCR data set, train -> test
=====================================================

Rows of ``X`` that are signals (``n_features`` not a perfect square, or
``image_shape=(1, n)``) are warped along their single axis: the centroid of each
(sample, centroid) pair is moved in time by a monotone warp (it never folds back in
time), started from the pair's best global shift (found exactly by cross-correlation),
then bent by a regularised spline. Here ST K-means is fitted on the TRAIN split of the
UCR set Trace (shipped with tslearn; ``pip install skxclust[timeseries]``) and
``predict`` labels the TEST split, the protocol of the elastic-clustering literature
(``benchmarks/bench_timeseries.py`` runs it on every shipped set). Without tslearn, and
in the gallery's quick mode, a synthetic set of the same kind is used: steps and
spike-and-decay transients at random times. Labels are used only to score.
"""

# %%
# Data: z-normalised series, one row each
# ---------------------------------------
import os

import matplotlib.pyplot as plt
import numpy as np
from sklearn.cluster import KMeans

from skxclust import SpatialTransformerKMeans
from skxclust.metrics import clustering_accuracy
from skxclust.plotting import plot_centroids

QUICK = os.environ.get("SKXCLUST_EXAMPLES_QUICK", "0") not in ("", "0")


def znormalise(X):
    X = X - X.mean(axis=1, keepdims=True)
    return X / X.std(axis=1, keepdims=True)


def synthetic(n_per_class, seed, length=120):
    """Steps with and without a wiggle, spikes with a slow or a fast decay."""
    rng = np.random.default_rng(seed)
    t = np.arange(length)
    rows, labels = [], []
    for label in range(4):
        for _ in range(n_per_class):
            at = rng.uniform(0.25, 0.6) * length
            if label < 2:
                row = np.tanh((t - at) / 3.0)
                if label == 1:
                    row += 0.6 * np.exp(-0.5 * ((t - at - 25) / 3.0) ** 2)
            else:
                decay = 12.0 if label == 2 else 35.0
                row = np.where(t < at, 0.0, -np.exp(-(t - at) / decay))
                row += 2.0 * np.exp(-0.5 * ((t - at) / 1.5) ** 2)
            rows.append(row + 0.05 * rng.normal(size=length))
            labels.append(label)
    return znormalise(np.array(rows)), np.array(labels)


try:
    if QUICK:
        raise ImportError("quick mode: synthetic data")
    from tslearn.datasets import CachedDatasets

    X_train, y_train, X_test, y_test = CachedDatasets().load_dataset("Trace")
    X_train, X_test = znormalise(X_train[:, :, 0]), znormalise(X_test[:, :, 0])
    name = "Trace"
except ImportError:
    X_train, y_train = synthetic(5 if QUICK else 25, seed=0, length=80 if QUICK else 120)
    X_test, y_test = synthetic(5 if QUICK else 25, seed=1, length=80 if QUICK else 120)
    name = "synthetic steps and spikes"
n_clusters = len(np.unique(y_train))
print(f"{name}: {X_train.shape[0]} train, {X_test.shape[0]} test series of length "
      f"{X_train.shape[1]}, {n_clusters} classes")

# %%
# Fit on TRAIN, predict TEST
# --------------------------
km = KMeans(n_clusters, random_state=0).fit(X_train)
st = SpatialTransformerKMeans(n_clusters, random_state=0).fit(X_train)
for label, model in (("k-means", km), ("ST K-means", st)):
    acc = clustering_accuracy(y_test, model.predict(X_test))
    print(f"{label:11s} held-out accuracy {acc:.3f}")

# %%
# Centroids as curves
# -------------------
# :func:`~skxclust.plotting.plot_centroids` draws a signal's centroid as a curve, with
# members of its cluster faint behind it, each brought into the centroid's frame by
# :meth:`~skxclust.SpatialTransformerKMeans.align` (the inverse of its fitted warp): the
# aligned members overlay the centroid, whatever their shift. Euclidean k-means'
# centroids are averages of unaligned series: the step or the spike is smeared.
fig = plot_centroids(st, X=X_train, max_members=15)
fig.suptitle(f"ST K-means on {name}: centroids (black), aligned members (blue)")
fig = plot_centroids(km, X=X_train, max_members=15)
fig.suptitle(f"k-means on {name}: centroids (black), members (blue)")
plt.show()
