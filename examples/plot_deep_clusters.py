"""
=====================================================
Deep clusters: explaining k-means on learned features
=====================================================

With ``feature_extractor=phi`` (a ``torch.nn.Sequential``),
:class:`~skxclust.ExplainableKMeans` clusters ``phi(X)`` and
:meth:`~skxclust.ExplainableKMeans.explain` returns relevance on the *raw pixels*: the
NEON relevance of the features is propagated back through ``phi`` by layer-wise relevance
propagation (LRP) rules. For a ReLU network without biases, the cluster evidence is
conserved down to the pixels except for the relevance that reaches zero activations (NEON
gives a share to features that are exactly zero) and the stabiliser's tiny share; the last
section measures both.

Here ``phi`` is a tiny convolutional network with hand-set oriented edge filters and a
hand-set layer that contrasts the orientations (no training needed): the clusters are built
on local stroke orientation rather than on raw intensity.
"""

# %%
# A bias-free ReLU feature extractor
# ----------------------------------
import os

import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.metrics import adjusted_rand_score
from torch import nn

from skxclust import ExplainableKMeans
from skxclust.datasets import load_digits_images, stratified_subset

QUICK = os.environ.get("SKXCLUST_EXAMPLES_QUICK", "0") not in ("", "0")

X, y, image_shape = load_digits_images(scale=True)
if QUICK:
    X, y = stratified_subset(X, y, 200, random_state=0)

# Four oriented edge filters and their negatives: after the ReLU, each channel responds
# to one edge polarity and orientation.
edges = torch.tensor([
    [[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]],   # vertical
    [[-1, -2, -1], [0, 0, 0], [1, 2, 1]],   # horizontal
    [[-2, -1, 0], [-1, 0, 1], [0, 1, 2]],   # diagonal
    [[0, -1, -2], [1, 0, -1], [2, 1, 0]],   # anti-diagonal
], dtype=torch.float64) / 4
conv = nn.Conv2d(1, 8, kernel_size=3, padding=1, bias=False, dtype=torch.float64)
with torch.no_grad():
    conv.weight.copy_(torch.cat([edges, -edges])[:, None])

# A 1x1 convolution contrasts the orientations: each output channel takes both
# polarities of its own orientation minus a third of those of the three others, so it has
# positive and negative weights.
own = torch.eye(4, dtype=torch.float64).repeat(1, 2)  # (4 orientations, 8 edge channels)
contrast = nn.Conv2d(8, 4, kernel_size=1, bias=False, dtype=torch.float64)
with torch.no_grad():
    contrast.weight.copy_((own - (1 - own) / 3)[:, :, None, None])

phi = nn.Sequential(
    nn.Unflatten(1, (1, *image_shape)),  # (n, 64) -> (n, 1, 8, 8)
    conv,                                 # the input layer: always the epsilon rule
    nn.ReLU(),
    nn.AvgPool2d(2),                      # (n, 8, 4, 4)
    contrast,                             # (n, 4, 4, 4): the rule chosen in explain
    nn.ReLU(),
    nn.Flatten(),                         # (n, 64)
)

n_init = 1 if QUICK else 10
deep = ExplainableKMeans(n_clusters=10, feature_extractor=phi, n_init=n_init,
                         random_state=0).fit(X)
pixel = ExplainableKMeans(n_clusters=10, n_init=n_init, random_state=0).fit(X)
print(f"feature space: {deep.cluster_centers_.shape[1]} dimensions")
print(f"ARI, k-means on pixels:         {adjusted_rand_score(y, pixel.labels_):.3f}")
print(f"ARI, k-means on edge features:  {adjusted_rand_score(y, deep.labels_):.3f}")

# %%
# Relevance on the pixels
# -----------------------
# The rule chosen in ``explain`` applies to the weighted layers after the first one, here
# the contrast layer: ``rule="zplus"`` uses only its positive weights (its inputs are
# non-negative, after the first ReLU), so the orientations it subtracts receive no relevance
# from it. The edge convolution sees the raw pixels and is explained with the epsilon rule
# under either choice (it is found by type: the ``Unflatten`` before it does not count). The
# default epsilon rule is shown for comparison.
rows = [int(np.flatnonzero(deep.labels_ == k)[0]) for k in range(4)]
R_eps = deep.explain(X[rows])
R_zp = deep.explain(X[rows], rule="zplus")

fig, axes = plt.subplots(3, len(rows), figsize=(2 * len(rows), 6.3))
for j, i in enumerate(rows):
    axes[0, j].imshow(X[i].reshape(image_shape), cmap="gray_r")
    axes[0, j].set_title(f"cluster {deep.labels_[i]}", fontsize=9)
    for row, (R, name) in enumerate([(R_eps, "epsilon"), (R_zp, "z-plus")], start=1):
        m = np.abs(R[j]).max()
        axes[row, j].imshow(R[j].reshape(image_shape), cmap="bwr", vmin=-m, vmax=m)
        axes[row, j].set_title(name, fontsize=8)
for ax in axes.ravel():
    ax.axis("off")
fig.tight_layout()

# %%
# Conservation through the network
# --------------------------------
# LRP conserves relevance layer by layer, except where it has nowhere to go. The midpoint
# rule of NEON also gives relevance to features that are exactly zero (their root point is
# not zero); a ReLU output at 0 has no input contribution to pass it back to, so it is
# absorbed there, as is the relevance of a convolution output that is zero only up to
# rounding (the zero-sum edge filters over a flat patch give about 1e-17 instead of 0).
# The epsilon rule absorbs, besides, the share of its stabiliser (and of the biases, in a
# network that has some). :func:`skxclust.nn.lrp_trace` returns what each layer absorbs, so
# that ``f_c(x) = pixels + absorbed at zero activations + absorbed by the rules``.
from skxclust.nn import lrp_trace, neon_relevance  # noqa: E402
from skxclust.nn.propagation import supported_layers  # noqa: E402

R_all = deep.explain(X)
f_all = deep.decision_function(X).max(axis=1)
x = torch.as_tensor(X)
with torch.no_grad():
    F = phi(x)
R_feat = neon_relevance(F, torch.as_tensor(deep.cluster_centers_), None, deep.beta_)[0]
trace = lrp_trace(supported_layers(phi), x, R_feat)
at_zero = trace.absorbed_at_zero.sum(1).numpy()
by_rule = trace.absorbed_by_rule.sum(1).numpy()
gap = f_all - R_all.sum(axis=1) - at_zero - by_rule
print(f"features exactly zero: {np.mean(F.numpy() == 0):.0%}")
print(f"median share of f absorbed at zero activations: {np.median(at_zero / f_all):.2f}")
print(f"largest |share of f absorbed by the rules|:     {np.max(np.abs(by_rule / f_all)):.1e}")
print(f"largest |f - pixels - absorbed| / f:            {np.max(np.abs(gap / f_all)):.1e}")
largest = np.abs(R_all).max(axis=1)
print(f"largest pixel relevance / f, median row:        {np.median(largest / f_all):.2f}")
print(f"largest pixel relevance / sum |R_feat|, all rows: "
      f"{np.max(largest / R_feat.abs().sum(1).numpy()):.1f}")
plt.show()
