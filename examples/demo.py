"""skxclust demo: cluster scikit-learn's handwritten digits and explain the clusters.

Run ``python examples/demo.py --output demo_output`` (``make demo``). It

1. clusters the 8x8 digits that ship with scikit-learn with ``ExplainableKMeans`` and with
   ``sklearn.cluster.KMeans`` (same ``n_init``), and with ``SpatialTransformerKMeans`` when
   this version of skxclust has it;
2. prints a table of clustering accuracy (ACC, Hungarian matching), NMI, ARI and fit time;
3. checks that the explanations conserve the cluster evidence: for every digit the
   relevances sum to ``f_c(x)`` (``decision_function`` of its cluster);
4. writes a PNG with the centroids and the relevance maps of a few digits, and prints its path.

``--quick`` runs on a 400-digit stratified subset with fewer restarts (a smoke test).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from skxclust import ExplainableKMeans
from skxclust.datasets import load_digits_images, stratified_subset
from skxclust.metrics import clustering_accuracy

N_CLUSTERS = 10
FIGURE_NAME = "digits_centroids_relevance.png"


def _spatial_kmeans_class():
    """``SpatialTransformerKMeans`` when this skxclust exports it, else None."""
    try:
        from skxclust import SpatialTransformerKMeans
    except ImportError:
        return None
    return SpatialTransformerKMeans


def _evaluate(name: str, estimator, X, y) -> dict:
    t0 = time.perf_counter()
    labels = estimator.fit_predict(X)
    seconds = time.perf_counter() - t0
    return {
        "name": name,
        "estimator": estimator,
        "acc": clustering_accuracy(y, labels),
        "nmi": float(normalized_mutual_info_score(y, labels)),
        "ari": float(adjusted_rand_score(y, labels)),
        "fit_s": seconds,
    }


def _print_table(rows: list[dict]) -> None:
    print(f"| {'model':<40} |   ACC |   NMI |   ARI | fit time |")
    print(f"|{'-' * 42}|------:|------:|------:|---------:|")
    for r in rows:
        print(f"| {r['name']:<40} | {r['acc']:.3f} | {r['nmi']:.3f} | {r['ari']:.3f} | "
              f"{r['fit_s']:7.2f}s |")


def _pick_examples(labels: np.ndarray, n: int) -> np.ndarray:
    """First sample of each of the first ``n`` clusters (one digit per cluster)."""
    picked = [int(np.flatnonzero(labels == k)[0]) for k in np.unique(labels)[:n]]
    return np.asarray(picked)


def _write_figure(path: Path, models: list[tuple[str, object]], X, R, image_shape, idx):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from skxclust.plotting import plot_centroids, plot_relevance

    fig = plt.figure(figsize=(12, 2.1 * (len(models) + 1)), layout="constrained")
    subfigs = fig.subfigures(len(models) + 1, 1)
    for sub, (title, model) in zip(subfigs, models):
        plot_centroids(model, image_shape, fig=sub)
        sub.suptitle(title)
    km = models[0][1]
    labels = km.predict(X[idx])
    f = km.decision_function(X[idx])[np.arange(len(idx)), labels]
    titles = [f"cluster {c}, f={v:.0f}" for c, v in zip(labels, f)]
    plot_relevance(X[idx], R[idx], image_shape, titles=titles, n_cols=len(idx), fig=subfigs[-1])
    subfigs[-1].suptitle("Why each digit is in its cluster: relevance (red for, blue against)")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    """Run the demo; returns the results (rows of the table, conservation error, figure path).

    Parameters
    ----------
    argv : list of str, default=None
        Command-line arguments (``--output DIR``, ``--quick``); None reads ``sys.argv``.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=Path("demo_output"),
                        help="folder the figure is written to (created if needed)")
    parser.add_argument("--quick", action="store_true",
                        help="400 digits and 3 restarts: a fast smoke test")
    args = parser.parse_args(argv)

    X, y, image_shape = load_digits_images()
    n_init = 10
    if args.quick:
        X, y = stratified_subset(X, y, 400, random_state=0)
        n_init = 3
    print(f"Digits: {X.shape[0]} images of {image_shape[0]}x{image_shape[1]} pixels, "
          f"{N_CLUSTERS} clusters, n_init={n_init}\n")

    rows = [
        _evaluate(f"sklearn KMeans (n_init={n_init})",
                  KMeans(N_CLUSTERS, n_init=n_init, random_state=0), X, y),
        _evaluate(f"skxclust ExplainableKMeans (n_init={n_init})",
                  ExplainableKMeans(N_CLUSTERS, n_init=n_init, random_state=0), X, y),
    ]
    spatial = _spatial_kmeans_class()
    if spatial is not None:
        st = spatial(n_clusters=N_CLUSTERS, random_state=0)
        if args.quick:  # a smoke test of the code path, not of the method's quality
            st.set_params(**{k: v for k, v in {"max_iter": 2, "n_steps": 5}.items()
                             if k in st.get_params()})
        rows.append(_evaluate("skxclust SpatialTransformerKMeans", st, X, y))
    else:
        print("(SpatialTransformerKMeans is not in this version of skxclust: row skipped)\n")
    _print_table(rows)

    km = rows[1]["estimator"]
    R = km.explain(X)
    f = km.decision_function(X).max(axis=1)
    conservation = float(np.max(np.abs(R.sum(axis=1) - f)))
    print(f"\nConservation: max over {X.shape[0]} digits of |sum_i R_i - f_c(x)| = "
          f"{conservation:.2e} (relative to max f: {conservation / f.max():.1e})")

    args.output.mkdir(parents=True, exist_ok=True)
    figure = args.output / FIGURE_NAME
    models = [("ExplainableKMeans centroids", km)]
    if spatial is not None:
        models.append(("SpatialTransformerKMeans centroids", rows[2]["estimator"]))
    _write_figure(figure, models, X, R, image_shape, _pick_examples(km.labels_, 5))
    print(f"\nFigure written to {figure}")
    return {"rows": [{k: v for k, v in r.items() if k != "estimator"} for r in rows],
            "conservation_error": conservation, "figure": figure}


if __name__ == "__main__":
    main()
