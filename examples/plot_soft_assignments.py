"""
=======================================
Soft assignments and the temperature
=======================================

:meth:`~skxclust.ExplainableKMeans.predict_proba` returns
``softmax_k(-||x - mu_k||^2 / (2 T))``. Because ``||x||^2`` is shared by all clusters,
this is a linear layer (``W = mu / T``, ``b = -||mu||^2 / (2 T)``) followed by a softmax:
the "soft k-means" view of the same centroids. The temperature ``T`` sets how sharp the
assignment is: ``T -> 0`` gives the hard k-means labels, large ``T`` spreads the mass
evenly. Distances scale with the data, so ``T`` must be chosen on that scale.
"""

# %%
# Three blobs in 2-D
# ------------------
import os

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_blobs

from skxclust import ExplainableKMeans

QUICK = os.environ.get("SKXCLUST_EXAMPLES_QUICK", "0") not in ("", "0")

X, _ = make_blobs(n_samples=150 if QUICK else 600, centers=3, cluster_std=1.2,
                  random_state=0)
km = ExplainableKMeans(n_clusters=3, random_state=0).fit(X)

# A typical squared distance between a sample and its centroid sets the scale of T.
scale = km.inertia_ / len(X)
print(f"mean squared distance to the centroid: {scale:.2f}")

# %%
# Confidence maps for several temperatures
# ----------------------------------------
# The colour is the largest soft assignment ``max_k p_k(x)``: 1 deep inside a cluster,
# 1/3 where the three clusters are equally likely.
step = 0.25 if QUICK else 0.1
lo, hi = X.min(axis=0) - 1, X.max(axis=0) + 1
gx, gy = np.meshgrid(np.arange(lo[0], hi[0], step), np.arange(lo[1], hi[1], step))
grid = np.c_[gx.ravel(), gy.ravel()]

temperatures = [0.05 * scale, 0.5 * scale, 5 * scale]
fig, axes = plt.subplots(1, 3, figsize=(12, 3.8), sharey=True)
for ax, T in zip(axes, temperatures):
    proba = km.set_params(temperature=T).predict_proba(grid)
    im = ax.contourf(gx, gy, proba.max(axis=1).reshape(gx.shape), levels=np.linspace(1 / 3, 1, 15),
                     cmap="viridis")
    ax.scatter(X[:, 0], X[:, 1], c=km.labels_, s=6, cmap="tab10", edgecolors="none")
    ax.scatter(*km.cluster_centers_.T, marker="x", c="red", s=60)
    ax.set_title(f"T = {T / scale:g} x scale")
fig.colorbar(im, ax=axes, label="max soft assignment")

# %%
# Soft assignments of one point between two clusters
# --------------------------------------------------
# A point halfway between two centroids, slightly closer to the first.
a, b = km.cluster_centers_[0], km.cluster_centers_[1]
x = (0.55 * a + 0.45 * b)[None, :]
Ts = scale * np.logspace(-2, 2, 9 if QUICK else 41)
P = np.array([km.set_params(temperature=T).predict_proba(x)[0] for T in Ts])

fig, ax = plt.subplots(figsize=(6, 3.5))
for k in range(3):
    ax.semilogx(Ts / scale, P[:, k], label=f"cluster {k}")
ax.axhline(1 / 3, color="gray", linestyle=":", linewidth=1)
ax.set_xlabel("temperature / mean squared distance")
ax.set_ylabel("soft assignment")
ax.legend()
print("hard label:", km.predict(x)[0], "| soft at the smallest T:", np.round(P[0], 3))

# %%
# The same model as a torch module
# --------------------------------
# ``as_module("soft")`` is the linear layer + softmax; its output equals ``predict_proba``.
import torch  # noqa: E402

km.set_params(temperature=scale)
net = km.as_module("soft")
weight = net.linear.weight
with torch.no_grad():
    out = net(torch.as_tensor(X[:5], dtype=weight.dtype, device=weight.device))
print("as_module('soft') == predict_proba:",
      np.allclose(out.cpu().numpy(), km.predict_proba(X[:5])))
plt.show()
