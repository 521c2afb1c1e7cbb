"""skxclust demo: cluster scikit-learn's handwritten digits and explain the clusters.

Run ``python examples/demo.py --output demo_output`` (``make demo``). It

1. clusters the 1797 8x8 digits that ship with scikit-learn, as float32 pixels (0 to 16)
   like the README's quality table, with ``sklearn.cluster.KMeans``, ``ExplainableKMeans``
   (same ``n_init``) and ``SpatialTransformerKMeans`` (its defaults), all with
   ``random_state=0``;
2. prints their clustering accuracy (ACC, Hungarian matching of clusters to digits), NMI,
   ARI and fit time: the median of ``--repeats`` fits after one warm-up fit;
3. checks that the explanations conserve the cluster evidence: for every digit the
   relevances sum to ``f_c(x)`` (``decision_function`` of its cluster), computed in
   float64 from the fitted model;
4. writes a figure with every centroid of both models, matched column by column, a digit
   of each cluster and its relevance maps under both models, and prints its path.

``--quick`` runs on a 400-digit stratified subset with fewer restarts, one timed fit and
shortened ST fits (a smoke test of the code, not of the numbers).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

# skxclust first: it sets a short OpenMP spin (GOMP_SPINCOUNT) before torch loads (README)
from skxclust import ExplainableKMeans, SpatialTransformerKMeans  # isort: skip
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from skxclust.datasets import load_digits_images, stratified_subset
from skxclust.metrics import clustering_accuracy

N_CLUSTERS = 10
FIGURE_NAME = "digits_centroids_relevance.png"
QUICK_ST = {"max_iter": 2, "n_steps": 5}  # quick mode only: a smoke test of the code path
COLUMNS = (
    "ACC: share of digits in a cluster matched one-to-one to a digit class (Hungarian); "
    "NMI, ARI: agreement of the clusters with the digit labels (1 = the same partition); "
    "labels are used only to score. fit s: median wall time of {repeats} fit(s) after a "
    "warm-up fit, (min-max) in brackets."
)


def _timed_fits(make, X, repeats: int, warm_up_X) -> tuple[object, list[float]]:
    """Fit ``make()`` once on ``warm_up_X`` (not timed), then ``repeats`` times on X."""
    make().fit(warm_up_X)
    times = []
    for _ in range(repeats):
        estimator = make()
        t0 = time.perf_counter()
        estimator.fit(X)
        times.append(time.perf_counter() - t0)
    return estimator, times


def _row(name: str, estimator, times: list[float], y) -> dict:
    labels = estimator.labels_
    return {
        "name": name,
        "estimator": estimator,
        "acc": clustering_accuracy(y, labels),
        "nmi": float(normalized_mutual_info_score(y, labels)),
        "ari": float(adjusted_rand_score(y, labels)),
        "fit_s": statistics.median(times),
        "fit_s_min": min(times),
        "fit_s_max": max(times),
    }


def _print_table(rows: list[dict], repeats: int) -> None:
    print(f"| {'model':<42} |   ACC |   NMI |   ARI | fit s, median (min-max) |")
    print(f"|{'-' * 44}|------:|------:|------:|------------------------:|")
    for r in rows:
        fit = f"{r['fit_s']:.3f} ({r['fit_s_min']:.3f}-{r['fit_s_max']:.3f})"
        print(f"| {r['name']:<42} | {r['acc']:.3f} | {r['nmi']:.3f} | {r['ari']:.3f} | "
              f"{fit:>23} |")
    print(COLUMNS.format(repeats=repeats))


def match_centroids(reference: np.ndarray, other: np.ndarray) -> np.ndarray:
    """For each reference centroid, the index of its partner in ``other`` (one-to-one).

    Hungarian matching minimising the total squared distance between paired centroids.
    """
    cost = ((reference[:, None, :] - other[None, :, :]) ** 2).sum(axis=-1)
    rows, cols = linear_sum_assignment(cost)
    return cols[np.argsort(rows)]


def pick_examples(labels: np.ndarray, evidence: np.ndarray, other_labels: np.ndarray,
                  match: np.ndarray) -> np.ndarray:
    """One digit per cluster: among the members that both models put in the column's pair
    of clusters (or, if none, the cluster's members), the one of median evidence."""
    picked = []
    for k in range(len(match)):
        members = np.flatnonzero(labels == k)
        agreed = members[other_labels[members] == match[k]]
        pool = agreed if agreed.size else members
        order = pool[np.argsort(evidence[pool])]
        picked.append(int(order[len(order) // 2]))
    return np.asarray(picked)


def _write_figure(path: Path, km, st, match, X, y, idx, image_shape) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from skxclust.plotting import plot_centroids, plot_relevance

    X64 = X[idx].astype(np.float64)
    ekm_labels = km.predict(X64)
    ekm_f = km.decision_function(X64)[np.arange(len(idx)), ekm_labels]
    ekm_R = km.explain(X64)
    st_labels = st.predict(X64)
    st_f = st.decision_function(X64)[np.arange(len(idx)), st_labels]
    st_R = st.explain(X64)
    ekm_sizes = np.bincount(km.labels_, minlength=N_CLUSTERS)
    st_sizes = np.bincount(st.labels_, minlength=N_CLUSTERS)

    fig = plt.figure(figsize=(15, 10.5), layout="constrained")
    rows = fig.subfigures(5, 1)
    grids = [row.subplots(1, N_CLUSTERS) for row in rows]
    pixels = {"colorbar": "pixel value", "vmin": 0.0, "vmax": 16.0}  # the digits' range
    plot_centroids(km.cluster_centers_, image_shape, axes=grids[0], **pixels,
                   titles=[f"cluster {k}\nn={ekm_sizes[k]}" for k in range(N_CLUSTERS)])
    rows[0].suptitle("ExplainableKMeans: centroid of each cluster (n = digits in it)",
                     fontsize=11)
    plot_centroids(st.cluster_centers_[match], image_shape, axes=grids[1], **pixels,
                   titles=[f"ST cluster {m}\nn={st_sizes[m]}" for m in match])
    rows[1].suptitle("SpatialTransformerKMeans: its centroids, each under the most similar "
                     "ExplainableKMeans centroid (Hungarian matching)", fontsize=11)
    plot_centroids(X[idx], image_shape, axes=grids[2], **pixels,
                   titles=[f"digit {y[i]}" for i in idx])
    rows[2].suptitle("One digit of each column's clusters (its true label above it)",
                     fontsize=11)
    plot_relevance(X64, ekm_R, image_shape, show_sample=False, shared_scale=True,
                   axes=grids[3])
    rows[3].suptitle("ExplainableKMeans: why the digit is in its cluster; its relevances "
                     "sum to its evidence f", fontsize=11)
    plot_relevance(X64, st_R, image_shape, show_sample=False, shared_scale=True,
                   axes=grids[4])
    rows[4].suptitle("SpatialTransformerKMeans: why the digit is in its cluster (relevance "
                     "on the digit's pixels)", fontsize=11)
    for ax, c, v in zip(grids[3], ekm_labels, ekm_f):
        ax.set_title(f"cluster {c}\nf={v:.0f}", fontsize=9)
    for ax, c, v in zip(grids[4], st_labels, st_f):
        ax.set_title(f"ST cluster {c}\nf={v:.0f}", fontsize=9)
    fig.suptitle(
        "Digits clustered by two models. Columns: the clusters of ExplainableKMeans, each "
        "paired with one SpatialTransformerKMeans cluster.\nRelevance: red pixels speak for "
        "the digit's cluster, blue against it, white are neutral; f = squared distance to "
        "the nearest other centroid minus to its own (after warping, for ST).", fontsize=11)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    """Run the demo; returns the results (rows of the table, conservation error, figure path).

    Parameters
    ----------
    argv : list of str, default=None
        Command-line arguments (``--output DIR``, ``--quick``, ``--repeats N``); None reads
        ``sys.argv``.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=Path("demo_output"),
                        help="folder the figure is written to (created if needed)")
    parser.add_argument("--quick", action="store_true",
                        help="400 digits, 3 restarts, short ST fits: a fast smoke test")
    parser.add_argument("--repeats", type=int, default=None,
                        help="timed fits per model after the warm-up (default 3, quick 1)")
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 3)

    X, y, image_shape = load_digits_images()
    X = X.astype(np.float32)
    n_init = 10
    st_params = {}
    if args.quick:
        X, y = stratified_subset(X, y, 400, random_state=0)
        n_init, st_params = 3, QUICK_ST
    warm_up_X = stratified_subset(X, y, 200, random_state=1)[0]
    print(f"Digits: {X.shape[0]} images of {image_shape[0]}x{image_shape[1]} pixels, float32 "
          f"(as in the README's quality table), {N_CLUSTERS} clusters, random_state=0\n")

    models = [
        (f"sklearn KMeans (n_init={n_init})",
         lambda: KMeans(N_CLUSTERS, n_init=n_init, random_state=0)),
        (f"skxclust ExplainableKMeans (n_init={n_init})",
         lambda: ExplainableKMeans(N_CLUSTERS, n_init=n_init, random_state=0)),
        ("skxclust SpatialTransformerKMeans" + (" (short)" if st_params else ""),
         lambda: SpatialTransformerKMeans(N_CLUSTERS, random_state=0, **st_params)),
    ]
    rows = []
    for name, make in models:
        estimator, times = _timed_fits(make, X, repeats, warm_up_X)
        rows.append(_row(name, estimator, times, y))
    _print_table(rows, repeats)
    km, st = rows[1]["estimator"], rows[2]["estimator"]

    X64 = X.astype(np.float64)  # the float32 model's centroids, explained in float64
    R = km.explain(X64)
    f = km.decision_function(X64).max(axis=1)
    conservation = float(np.max(np.abs(R.sum(axis=1) - f)))
    relative = float(np.max(np.abs(R.sum(axis=1) - f) / np.abs(f)))
    print(f"\nConservation (ExplainableKMeans, float64): max over {X.shape[0]} digits of "
          f"|sum_i R_i - f_c(x)| = {conservation:.1e}, relative to f_c(x): {relative:.1e} "
          f"(rounding; the tests require < 1e-6 relative)")

    match = match_centroids(km.cluster_centers_, st.cluster_centers_)
    idx = pick_examples(km.labels_, f, st.labels_, match)
    args.output.mkdir(parents=True, exist_ok=True)
    figure = args.output / FIGURE_NAME
    _write_figure(figure, km, st, match, X, y, idx, image_shape)
    print(f"\nFigure written to {figure}")
    return {"rows": [{k: v for k, v in r.items() if k != "estimator"} for r in rows],
            "conservation_error": conservation, "conservation_relative": relative,
            "match": match, "examples": idx, "figure": figure}


if __name__ == "__main__":
    main()
