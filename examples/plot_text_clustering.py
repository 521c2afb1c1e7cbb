"""
=======================================================
Clustering text: the words that put a document in place
=======================================================

K-means on TF-IDF vectors is a classic way to find topics in a corpus, but a cluster label
alone does not say *why* a document landed where it did. :class:`~skxclust.ExplainableKMeans`
takes the sparse TF-IDF matrix as it is (never densified) and its
:meth:`~skxclust.ExplainableKMeans.explain` splits each document's cluster evidence over
the vocabulary: the words that put the document in its cluster, and, averaged over the
members, the words that characterise the cluster.

The corpus ships with Python itself, so nothing is downloaded: the docstrings of the
modules, classes and functions of a few standard-library packages (``asyncio``,
``email``, ``logging``, ...), one document per docstring of at least 150 characters,
labelled by the package it comes from. The exact documents depend on the Python version;
the package labels are used only to read the clusters, never to fit them.
"""

# %%
# The corpus: standard-library docstrings, grouped by package
# -------------------------------------------------------------
import importlib
import inspect
import os
import pkgutil
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from skxclust import ExplainableKMeans

QUICK = os.environ.get("SKXCLUST_EXAMPLES_QUICK", "0") not in ("", "0")
PACKAGES = ["asyncio", "email", "logging", "xml"]
if not QUICK:
    PACKAGES += ["http", "importlib", "json", "unittest"]


def package_docstrings(package: str, min_length: int = 150) -> list[str]:
    """Distinct docstrings of a package's modules, classes, functions and methods."""
    root = importlib.import_module(package)
    names = [package] + [m.name for m in pkgutil.walk_packages(root.__path__, package + ".")]
    found: dict[str, None] = {}
    for name in sorted(names):
        if ".test" in name or name.endswith("__main__"):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = importlib.import_module(name)
        except Exception:  # optional parts (e.g. a missing C extension) are skipped
            continue
        objects = [module]
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if obj.__module__ == name:
                objects += [obj] + [f for _, f in inspect.getmembers(obj, inspect.isfunction)
                                    if f.__qualname__.startswith(obj.__qualname__ + ".")]
        objects += [f for _, f in inspect.getmembers(module, inspect.isfunction)
                    if f.__module__ == name]
        for obj in objects:
            doc = inspect.getdoc(obj)
            if doc and len(doc) >= min_length:
                found.setdefault(doc)
    return list(found)


documents, packages = [], []
for package in PACKAGES:
    docs = package_docstrings(package)
    documents += docs
    packages += [package] * len(docs)
packages = np.array(packages)
print(f"{len(documents)} docstrings from {len(PACKAGES)} packages:",
      {p: int((packages == p).sum()) for p in PACKAGES})

# %%
# TF-IDF, then ExplainableKMeans on the sparse matrix
# ---------------------------------------------------
# The TF-IDF matrix stays a scipy CSR matrix: fitting and explaining work on it
# directly (sparse products; ``explain`` densifies a few rows at a time).
vectorizer = TfidfVectorizer(stop_words="english", min_df=3, max_df=0.3,
                             token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z]+\b")
X = vectorizer.fit_transform(documents)
words = vectorizer.get_feature_names_out()
print(f"TF-IDF matrix {X.shape[0]} x {X.shape[1]}, {X.nnz} stored values "
      f"({X.nnz / np.prod(X.shape):.2%} dense)")

km = ExplainableKMeans(n_clusters=len(PACKAGES), n_init=2 if QUICK else 10,
                       random_state=0).fit(X)
print(f"agreement with the packages: ARI {adjusted_rand_score(packages, km.labels_):.2f}, "
      f"NMI {normalized_mutual_info_score(packages, km.labels_):.2f}")

# %%
# The words that characterise each cluster
# ----------------------------------------
# ``explain`` gives, for every document, the relevance of every word for the document's
# cluster; the relevances of a document add up to its cluster evidence
# ``f_c(x) = min_k ||x - mu_k||^2 - ||x - mu_c||^2``. Averaged over a cluster's members, they
# name the words that separate the cluster from its competitors (present words that its
# centroid shares, and absent words typical of the competitors, which count as well).
relevance = km.explain(X)
n_words = 6
n_cols = 4
n_rows = int(np.ceil(km.n_clusters / n_cols))
fig, axes = plt.subplots(n_rows, n_cols, figsize=(3.2 * n_cols, 2.4 * n_rows),
                         squeeze=False)
for c, ax in enumerate(axes.ravel()):
    members = km.labels_ == c
    if c >= km.n_clusters or not members.any():
        ax.axis("off")
        continue
    mean = relevance[members].mean(axis=0)
    top = np.argsort(-mean)[:n_words]
    names, counts = np.unique(packages[members], return_counts=True)
    ax.barh(np.arange(n_words)[::-1], mean[top], color="tab:blue")
    ax.set_yticks(np.arange(n_words)[::-1], words[top])
    ax.set_title(f"cluster {c}: {members.sum()} docs\nmostly {names[np.argmax(counts)]} "
                 f"({counts.max() / members.sum():.0%})", fontsize=9)
    ax.tick_params(labelsize=8)
fig.suptitle("Mean relevance of the top words of each cluster")
fig.tight_layout()

# %%
# The words that put one document in its cluster
# ----------------------------------------------
# For wide vocabularies, ``explain(X, top_k=k)`` returns only the ``k`` most relevant
# words of each row (their column indices, largest relevance first, and the relevances),
# so the full ``(n_documents, n_words)`` map is never held.
features, values = km.explain(X, top_k=5)
evidence = km.decision_function(X).max(axis=1)
rng = np.random.default_rng(0)
shown = rng.choice(X.shape[0], size=3, replace=False)
for i in shown:
    first_line = documents[i].splitlines()[0][:70]
    print(f"\n[{packages[i]}] {first_line!r}\n  cluster {km.labels_[i]}, evidence "
          f"{evidence[i]:.3f}, top words: "
          + ", ".join(f"{words[j]} ({v:+.3f})" for j, v in zip(features[i], values[i])))

fig, axes = plt.subplots(1, len(shown), figsize=(4 * len(shown), 2.6), squeeze=False)
for ax, i in zip(axes.ravel(), shown):
    ax.barh(np.arange(5)[::-1], values[i], color="tab:orange")
    ax.set_yticks(np.arange(5)[::-1], words[features[i]])
    ax.set_title(f"{packages[i]} docstring -> cluster {km.labels_[i]}", fontsize=9)
    ax.tick_params(labelsize=8)
fig.suptitle("Top-5 words of three documents (relevance for their cluster)")
fig.tight_layout()
plt.show()
