"""
=================================================================
Choosing n_landmarks and learning_rate with GridSearchCV
=================================================================

:class:`~skxclust.SpatialTransformerKMeans` scores a model by minus its distortion (the
sum of warped squared distances), like :class:`sklearn.cluster.KMeans` does with inertia.
So :class:`~sklearn.model_selection.GridSearchCV` works without labels: each candidate is
fitted on some folds and scored on the held-out fold.

Mind what the score rewards: a finer landmark grid or a longer warp can always match a
sample more closely, so the held-out distortion favours the most flexible warp. Compare
candidates with an unsupervised criterion that suits your goal (distortion at equal
flexibility, stability across seeds), and look at the centroids. Labels, when you have
them, are for evaluation only.
"""

# %%
# A grid search inside a pipeline
# -------------------------------
import os

import matplotlib.pyplot as plt
import pandas as pd
from sklearn.metrics import adjusted_rand_score
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer

from skxclust import SpatialTransformerKMeans
from skxclust.datasets import load_digits_images, stratified_subset

QUICK = os.environ.get("SKXCLUST_EXAMPLES_QUICK", "0") not in ("", "0")

X, y, image_shape = load_digits_images()
X, y = stratified_subset(X, y, 40 if QUICK else 300, random_state=0)
n_clusters = 4 if QUICK else 10

pipe = Pipeline([
    ("scale", FunctionTransformer(lambda Z: Z / 16.0)),  # pixel values to [0, 1]
    ("st", SpatialTransformerKMeans(n_clusters=n_clusters, image_shape=image_shape,
                                    n_steps=5 if QUICK else 20, max_iter=1 if QUICK else 4,
                                    random_state=0)),
])
grid = {
    "st__n_landmarks": [4, 9] if QUICK else [4, 9, 16],
    "st__learning_rate": [0.05] if QUICK else [0.01, 0.05],
}
search = GridSearchCV(pipe, grid, cv=KFold(2, shuffle=True, random_state=0)).fit(X)

table = pd.DataFrame(search.cv_results_["params"])
table["held-out distortion"] = -search.cv_results_["mean_test_score"]
table["fit time (s)"] = search.cv_results_["mean_fit_time"]
print(table.to_string(index=False))
print("best by distortion:", search.best_params_)

# %%
# Distortion per candidate
# ------------------------
fig, ax = plt.subplots(figsize=(6, 3.5))
for lr, part in table.groupby("st__learning_rate"):
    ax.plot(part["st__n_landmarks"], part["held-out distortion"], "o-",
            label=f"learning_rate={lr}")
ax.set_xlabel("n_landmarks")
ax.set_ylabel("held-out distortion")
ax.legend()

# %%
# Looking beyond the distortion
# -----------------------------
# The labels are used here only to show what the distortion does not: how well the
# clusters match the digits for each landmark grid (at the best learning rate).
best_lr = search.best_params_["st__learning_rate"]
for n_landmarks in grid["st__n_landmarks"]:
    model = pipe.set_params(st__n_landmarks=n_landmarks, st__learning_rate=best_lr).fit(X)
    print(f"n_landmarks={n_landmarks:2d}: ARI {adjusted_rand_score(y, model[-1].labels_):.3f}")

fig, axes = plt.subplots(1, n_clusters, figsize=(n_clusters, 1.4))
for k, ax in enumerate(axes):
    ax.imshow(search.best_estimator_[-1].cluster_centers_[k].reshape(image_shape),
              cmap="gray_r")
    ax.axis("off")
fig.suptitle(f"centroids of the refitted best model {search.best_params_}", fontsize=9)
plt.show()
