"""
=================================================================
Choosing n_landmarks and learning_rate with GridSearchCV
=================================================================

:class:`~skxclust.SpatialTransformerKMeans` scores a model by the Laplace log-evidence of
the rows (:meth:`~skxclust.SpatialTransformerKMeans.score`), so
:class:`~sklearn.model_selection.GridSearchCV` works without labels: each candidate is
fitted on some folds and scored on the held-out fold.

Why not minus the distortion, as :class:`sklearn.cluster.KMeans` does with inertia? A
finer landmark grid can always match a sample more closely, so the held-out distortion
favours the most flexible warp whether or not the clusters get better. The evidence
charges each setting for the warp parameters the data determine (an Occam term), so it
compares grids of different flexibility. The warps are the solved optimum of a
regularised fit, so ``learning_rate`` (the size of the first solver steps) barely changes
the model: it is in the grid to show that. Labels are used below for evaluation only.
"""

# %%
# A grid search inside a pipeline
# -------------------------------
import os

import matplotlib.pyplot as plt
import pandas as pd
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer

from skxclust import SpatialTransformerKMeans
from skxclust.datasets import load_digits_images, stratified_subset
from skxclust.metrics import clustering_accuracy

QUICK = os.environ.get("SKXCLUST_EXAMPLES_QUICK", "0") not in ("", "0")

X, y, image_shape = load_digits_images()
X_fit, _ = stratified_subset(X, y, 40 if QUICK else 300, random_state=0)
n_clusters = 4 if QUICK else 10

pipe = Pipeline([
    ("scale", FunctionTransformer(lambda Z: Z / 16.0)),  # pixel values to [0, 1]
    ("st", SpatialTransformerKMeans(n_clusters=n_clusters, image_shape=image_shape,
                                    n_steps=5 if QUICK else 20, max_iter=1 if QUICK else 5,
                                    random_state=0)),
])
grid = {
    "st__n_landmarks": [4, 9] if QUICK else [4, 9, 16, 36],
    "st__learning_rate": [0.05] if QUICK else [0.01, 0.05],
}
search = GridSearchCV(pipe, grid, cv=KFold(3, shuffle=True, random_state=0)).fit(X_fit)

table = pd.DataFrame(search.cv_results_["params"])
table["held-out log-evidence per row"] = search.cv_results_["mean_test_score"] / (
    len(X_fit) / 3)
table["fit time (s)"] = search.cv_results_["mean_fit_time"]
print(table.to_string(index=False))
print("selected by score:", search.best_params_)

# %%
# Score and held-out accuracy per candidate
# -----------------------------------------
# Every setting refitted on the same rows; the labels of *all* of digits score its
# ``predict`` (for evaluation only: selection used the score alone).
accuracy = []
for params in search.cv_results_["params"]:
    model = pipe.set_params(**params).fit(X_fit)
    accuracy.append(clustering_accuracy(y, model.predict(X)))
table["ACC on all digits"] = accuracy
print(table.to_string(index=False))

fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
for lr, part in table.groupby("st__learning_rate"):
    left.plot(part["st__n_landmarks"], part["held-out log-evidence per row"], "o-",
              label=f"learning_rate={lr}")
    right.plot(part["st__n_landmarks"], part["ACC on all digits"], "o-",
               label=f"learning_rate={lr}")
left.set(xlabel="n_landmarks", ylabel="held-out score\n(log-evidence per row)")
right.set(xlabel="n_landmarks", ylabel="ACC\n(labels, evaluation only)")
left.legend()
fig.tight_layout()

# %%
# Centroids of the selected model
# -------------------------------
fig, axes = plt.subplots(1, n_clusters, figsize=(n_clusters, 1.4))
for k, ax in enumerate(axes):
    ax.imshow(search.best_estimator_[-1].cluster_centers_[k].reshape(image_shape),
              cmap="gray_r")
    ax.axis("off")
best = search.best_params_
fig.suptitle(f"selected: n_landmarks={best['st__n_landmarks']}, "
             f"learning_rate={best['st__learning_rate']}", fontsize=9)
plt.show()
