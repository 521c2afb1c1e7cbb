"""
=================================================
Explaining k-means behind a scaler and a PCA
=================================================

Clustering often runs on standardised, PCA-reduced features, which makes a plain
explanation useless to a human: it speaks about principal components, not pixels.
:func:`skxclust.explain_pipeline` explains a pipeline whose steps before the final
:class:`~skxclust.ExplainableKMeans` are affine maps ``z = x A + t`` (scalers, PCA,
truncated SVD, ...). Each neuralized unit ``h_ck(z) = w_ck^T z + b_ck`` is then affine in
``x`` too, with weights ``A w_ck``, so relevance lands on the input pixels, and the
relevances of a sample still sum exactly to its cluster evidence.
"""

# %%
# A pipeline on the digits
# ------------------------
import os

import matplotlib.pyplot as plt
import numpy as np
from sklearn.decomposition import PCA
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skxclust import ExplainableKMeans, explain_pipeline
from skxclust.datasets import load_digits_images, stratified_subset

QUICK = os.environ.get("SKXCLUST_EXAMPLES_QUICK", "0") not in ("", "0")

X, y, image_shape = load_digits_images()
if QUICK:
    X, y = stratified_subset(X, y, 300, random_state=0)

pipe = make_pipeline(
    StandardScaler(),
    PCA(n_components=20, random_state=0),
    ExplainableKMeans(n_clusters=10, n_init=1 if QUICK else 10, random_state=0),
).fit(X)
labels = pipe.predict(X)

# %%
# Relevance in pixel space
# ------------------------
rows = [int(np.flatnonzero(labels == k)[0]) for k in range(5)]
R = explain_pipeline(pipe, X[rows])
f = pipe.decision_function(X[rows]).max(axis=1)
for i, r, fi in zip(rows, R, f):
    print(f"sample {i:4d}: cluster {labels[i]}, f = {fi:8.3f}, sum of relevance = {r.sum():8.3f}")

fig, axes = plt.subplots(2, len(rows), figsize=(2 * len(rows), 4.2))
for j, i in enumerate(rows):
    axes[0, j].imshow(X[i].reshape(image_shape), cmap="gray_r")
    axes[0, j].set_title(f"cluster {labels[i]}", fontsize=9)
    m = np.abs(R[j]).max()
    axes[1, j].imshow(R[j].reshape(image_shape), cmap="bwr", vmin=-m, vmax=m)
for ax in axes.ravel():
    ax.axis("off")
fig.suptitle("samples (top) and pixel relevance through scaler + PCA (bottom)")
fig.tight_layout()

# %%
# Exact conservation for every sample
# -----------------------------------
R_all = explain_pipeline(pipe, X)
f_all = pipe.decision_function(X).max(axis=1)
print(f"largest relative error: {np.max(np.abs(R_all.sum(1) - f_all) / np.abs(f_all)):.1e}")

# %%
# A non-affine step is refused
# ----------------------------
# A step that is not an affine map of its input would break the exact propagation, so it
# is refused with an error that names the step.
from sklearn.preprocessing import QuantileTransformer  # noqa: E402

bad = make_pipeline(QuantileTransformer(n_quantiles=50),
                    ExplainableKMeans(n_clusters=3, random_state=0)).fit(X)
try:
    explain_pipeline(bad, X[:5])
except ValueError as exc:
    print("refused:", str(exc)[:90], "...")
plt.show()
