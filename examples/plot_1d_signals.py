"""
=====================================================
Clustering shifted and warped 1-D signals
=====================================================

When rows of ``X`` are signals rather than images, :class:`~skxclust.SpatialTransformerKMeans`
warps each centroid along the time axis only (``image_shape=(1, n)``, or any
``n_features`` that is not a perfect square). Here three waveforms (one bump, two bumps,
a plateau) appear shifted, stretched and elastically time-warped. Euclidean k-means mixes
the shapes up by position; ST k-means groups them by shape and keeps sharp centroids.
The last section clusters series of three channels, all warped by one time warp.
"""

# %%
# Deformed waveforms
# ------------------
# :func:`~skxclust.datasets.make_affine` shifts and stretches, and
# :func:`~skxclust.datasets.make_elastic` time-warps, each signal along its axis.
import os

import matplotlib.pyplot as plt
import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score

from skxclust import SpatialTransformerKMeans
from skxclust.datasets import make_affine, make_elastic

QUICK = os.environ.get("SKXCLUST_EXAMPLES_QUICK", "0") not in ("", "0")

length = 60
t = np.arange(length) - length / 2
templates = np.stack([
    np.exp(-0.5 * (t / 3.0) ** 2),                                          # one bump
    np.exp(-0.5 * ((t - 8) / 2.5) ** 2) + np.exp(-0.5 * ((t + 8) / 2.5) ** 2),  # two bumps
    1 / (1 + np.exp(-(t + 8))) - 1 / (1 + np.exp(-(t - 8))),                 # plateau
])
n_per_class = 10 if QUICK else 30
y = np.repeat(np.arange(3), n_per_class)
X = make_affine(templates[y], (1, length), scale=(0.85, 1.15), translation=(-7, 7),
                random_state=0)
X = make_elastic(X, (1, length), alpha=1.0, sigma=6.0, random_state=1)
X = X + 0.03 * np.random.default_rng(2).normal(size=X.shape)

fig, axes = plt.subplots(1, 3, figsize=(10, 2.5), sharey=True)
for k, ax in enumerate(axes):
    ax.plot(X[y == k][:10].T, color="gray", linewidth=0.8)
    ax.plot(templates[k], color="k", linewidth=2)
    ax.set_title(f"class {k}: template (black), samples (gray)", fontsize=9)

# %%
# Euclidean k-means vs ST k-means
# -------------------------------
km = KMeans(n_clusters=3, n_init=10, random_state=0).fit(X)
st = SpatialTransformerKMeans(
    n_clusters=3, image_shape=(1, length), n_landmarks=9, n_steps=10 if QUICK else 40,
    max_iter=2 if QUICK else 8, n_init=1 if QUICK else 4, random_state=0,
).fit(X)
print(f"ARI, k-means:    {adjusted_rand_score(y, km.labels_):.3f}")
print(f"ARI, ST k-means: {adjusted_rand_score(y, st.labels_):.3f}")

fig, axes = plt.subplots(2, 3, figsize=(10, 4.5), sharex=True)
for row, (model, name) in enumerate([(km, "k-means"), (st, "ST k-means")]):
    for k in range(3):
        axes[row, k].plot(model.cluster_centers_[k], color="C0" if row == 0 else "C3")
        axes[row, k].set_title(f"{name} centroid {k}", fontsize=9)
fig.tight_layout()

# %%
# Aligned members
# ---------------
# :meth:`~skxclust.SpatialTransformerKMeans.align` brings every sample into the frame of
# its centroid: the members of a cluster then overlay their centroid.
aligned = st.align(X)
fig, axes = plt.subplots(1, 3, figsize=(10, 2.5), sharey=True)
for k, ax in enumerate(axes):
    members = np.flatnonzero(st.labels_ == k)[:10]
    ax.plot(aligned[members].T, color="gray", linewidth=0.8)
    ax.plot(st.cluster_centers_[k], color="C3", linewidth=2)
    ax.set_title(f"cluster {k}: aligned members", fontsize=9)

# %%
# Series of several channels
# --------------------------
# A row may hold ``C`` channels of one series, channel after channel (an accelerometer's
# three axes). With ``image_shape=(C, 1, length)`` every channel of a series is warped by
# the same time warp: an event happens at one time in every channel. Here each class
# puts the same three waveforms in a different order on its three channels, and every
# series is shifted in time as a whole.
from skxclust.plotting import plot_centroids  # noqa: E402

orders = [(0, 1, 2), (1, 2, 0), (2, 0, 1)]
y3 = np.repeat(np.arange(3), n_per_class)
shifts = np.random.default_rng(3).integers(-7, 8, size=len(y3))
X3 = np.stack([np.roll(templates[list(orders[label])], shift, axis=1)
               for label, shift in zip(y3, shifts)])  # (n, 3 channels, length)
X3 = X3 + 0.03 * np.random.default_rng(4).normal(size=X3.shape)
X3 = X3.reshape(len(y3), 3 * length)  # channel after channel
km3 = KMeans(n_clusters=3, n_init=10, random_state=0).fit(X3)
st3 = SpatialTransformerKMeans(n_clusters=3, image_shape=(3, 1, length),
                               max_iter=2 if QUICK else 8, random_state=0).fit(X3)
print(f"3 channels, ARI, k-means:    {adjusted_rand_score(y3, km3.labels_):.3f}")
print(f"3 channels, ARI, ST k-means: {adjusted_rand_score(y3, st3.labels_):.3f}")
fig = plot_centroids(st3, X=X3, max_members=5)  # the channels one below the other
plt.show()
