"""How long the model-selection workflow takes: GridSearchCV over SpatialTransformerKMeans.

Run ``python benchmarks/bench_grid_search.py`` (or ``python -m benchmarks --only
grid_search``); it writes ``benchmarks/results/grid_search.json``.

1. Backends: the same search (``n_landmarks`` [4, 16] x ``learning_rate`` [0.01],
   3 folds, on 1,500 stratified MNIST-5k rows, float64) with ``n_jobs=1``, with
   ``n_jobs=2`` in joblib's default process backend (loky), and with ``n_jobs=2`` in its
   threading backend; wall time of each and the ratio to ``n_jobs=1``. The selected
   setting must not depend on the backend (each fit is seeded by ``random_state``).
2. The workflow of the model-selection guide: ``GridSearchCV(SpatialTransformerKMeans(10,
   random_state=0), {"n_landmarks": [4, 9, 16, 36], "learning_rate": [0.003, 0.01,
   0.05]}, cv=3, n_jobs=2).fit(X)`` on all of MNIST-5k (float64, [0, 1]): 36 fits and the
   refit, wall time (issue 20's target: 30 minutes), as the guide runs it: ``n_jobs=2`` in
   joblib's default backend (loky), regardless of the backend section 1 found fastest (its
   1,500-row fits are short, so starting the worker processes weighs more there than in
   this search). ``--estimate-full`` divides by the speed-up of section 1's fastest run.

``--quick`` (``benchmarks/results/quick/grid_search.json``): 300 rows of digits, two
settings, shortened fits, for both sections. ``--skip-full`` runs section 1 only.
``--estimate-full`` replaces section 2 by an estimate of its wall time (the full search
takes longer than a session may have): one fit of each ``n_landmarks`` (``learning_rate``
0.01) on the training rows of the first of the 3 folds, timed with the ``score`` of the
held-out fold; the estimate is the sum over the 12 settings and 3 folds of these times
(``learning_rate`` only sets the initial damping, which adapts per pair), plus the refit
on all rows as the fit of the selected ``n_landmarks`` times the ratio of rows, divided by
the speed-up of section 1's fastest backend.
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
from joblib import parallel_backend  # noqa: E402
from sklearn.model_selection import GridSearchCV, KFold  # noqa: E402

from benchmarks._common import (  # noqa: E402
    bench_parser,
    load_average,
    load_digits_data,
    load_mnist5k,
    machine_info,
    output_path,
    set_threads,
    write_json,
)
from skxclust import SpatialTransformerKMeans  # noqa: E402
from skxclust.datasets import stratified_subset  # noqa: E402

NAME = "grid_search"
FULL_N_JOBS = 2  # the guide's search: n_jobs=2, joblib's default backend (loky)
TARGETS = {"full_search_minutes": 30.0}
BACKEND_GRID = {"n_landmarks": [4, 16], "learning_rate": [0.01]}
FULL_GRID = {"n_landmarks": [4, 9, 16, 36], "learning_rate": [0.003, 0.01, 0.05]}
BACKEND_ROWS = 1500
CV = 3
QUICK = {"rows": 300, "grid": {"n_landmarks": [4, 9], "learning_rate": [0.01]},
         "st_params": {"max_iter": 2, "n_steps": 4}}
BACKENDS = (("sequential", 1, None), ("processes", 2, "loky"), ("threads", 2, "threading"))


def timed_search(X, grid, n_jobs: int, backend: str | None, st_params: dict) -> dict:
    """One GridSearchCV run (refit on all rows, the default); wall time and selection."""
    search = GridSearchCV(SpatialTransformerKMeans(10, random_state=0, **st_params), grid,
                          cv=CV, n_jobs=n_jobs, error_score="raise")
    t0 = time.perf_counter()
    if backend is None:
        search.fit(X)
    else:
        with parallel_backend(backend, n_jobs=n_jobs):
            search.fit(X)
    seconds = time.perf_counter() - t0
    label = backend or ("sequential" if n_jobs == 1 else "loky")  # joblib's default
    return {"n_jobs": n_jobs, "backend": label, "seconds": seconds,
            "n_fits": len(search.cv_results_["params"]) * CV + 1,
            "mean_fit_time": [float(v) for v in search.cv_results_["mean_fit_time"]],
            "best_params": search.best_params_,
            "mean_test_score": [float(v) for v in search.cv_results_["mean_test_score"]]}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write its JSON; returns the exit status."""
    args = build_parser().parse_args(argv)
    output = output_path(args, NAME)
    set_threads()
    info = machine_info()
    st_params = QUICK["st_params"] if args.quick else {}
    if args.quick:
        X, y = load_digits_data()
        X_small = stratified_subset(X.astype(np.float64), y, QUICK["rows"], random_state=0)[0]
        X_full, grid, full_grid = X_small, QUICK["grid"], QUICK["grid"]
    else:
        X, y = load_mnist5k()
        X_full = X.astype(np.float64)
        X_small = stratified_subset(X_full, y, BACKEND_ROWS, random_state=0)[0]
        grid, full_grid = BACKEND_GRID, FULL_GRID
    result = {"quick": args.quick, "machine": info, "targets": TARGETS, "cv": CV,
              "backends": {"rows": int(X_small.shape[0]), "grid": grid, "runs": []}}
    for name, n_jobs, backend in BACKENDS:
        run = timed_search(X_small, grid, n_jobs, backend, st_params)
        result["backends"]["runs"].append(run)
        print(f"{name}: {run['seconds']:.1f} s, best {run['best_params']}", flush=True)
    runs = result["backends"]["runs"]
    for run in runs:
        run["ratio_to_sequential"] = run["seconds"] / runs[0]["seconds"]
    result["backends"]["same_selection"] = all(r["best_params"] == runs[0]["best_params"]
                                               for r in runs)
    fastest = min(runs, key=lambda r: r["seconds"])
    if args.estimate_full:
        est = estimated_search(X_full, full_grid, st_params, runs[0], fastest)
        result["full_search_estimate"] = {"rows": int(X_full.shape[0]), "grid": full_grid,
                                          **est}
        print(f"full search (estimate): {est['minutes']:.1f} min", flush=True)
    elif not args.skip_full:
        full = timed_search(X_full, full_grid, FULL_N_JOBS, None, st_params)
        full["minutes"] = full["seconds"] / 60.0
        result["full_search"] = {"rows": int(X_full.shape[0]), "grid": full_grid, **full}
        print(f"full search: {full['minutes']:.1f} min, best {full['best_params']}",
              flush=True)
    result["benchmark"] = "GridSearchCV over SpatialTransformerKMeans, wall time"
    result["summary"] = summary_rows(result)
    info["load_average_end"] = load_average()
    write_json(output, result)
    return 0


def estimated_search(X, grid, st_params: dict, sequential: dict, fastest: dict) -> dict:
    """Wall-time estimate of the full search from one timed fit (and held-out ``score``)
    per ``n_landmarks`` on the first fold (see the module docstring)."""
    train, test = next(KFold(CV).split(X))
    per_setting = {}
    for n_landmarks in grid["n_landmarks"]:
        est = SpatialTransformerKMeans(10, random_state=0, n_landmarks=n_landmarks,
                                       learning_rate=0.01, **st_params)
        t0 = time.perf_counter()
        est.fit(X[train])
        fit_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        score = float(est.score(X[test]))
        per_setting[n_landmarks] = {"fit_seconds": fit_seconds,
                                    "score_seconds": time.perf_counter() - t0,
                                    "score": score}
        print(f"n_landmarks={n_landmarks}: fit {fit_seconds:.1f} s", flush=True)
    best = max(per_setting, key=lambda n: per_setting[n]["score"])
    fold_seconds = sum(v["fit_seconds"] + v["score_seconds"] for v in per_setting.values())
    refit = per_setting[best]["fit_seconds"] * X.shape[0] / len(train)
    sequential_seconds = fold_seconds * len(grid["learning_rate"]) * CV + refit
    speedup = sequential["seconds"] / fastest["seconds"]
    seconds = sequential_seconds / speedup
    return {"n_jobs": fastest["n_jobs"], "backend": fastest["backend"], "estimated": True,
            "fold_rows": int(len(train)), "per_n_landmarks": per_setting,
            "selected_n_landmarks_first_fold": best, "sequential_seconds": sequential_seconds,
            "backend_speedup": speedup, "seconds": seconds, "minutes": seconds / 60.0}


def summary_rows(result: dict) -> list[dict]:
    """One README row per timed search."""
    b = result["backends"]
    rows = [{"search": f"{len(b['grid']['n_landmarks']) * len(b['grid']['learning_rate'])} "
                       f"settings x {result['cv']} folds + refit, {b['rows']} rows",
             "n_jobs": r["n_jobs"], "backend": r["backend"], "seconds": round(r["seconds"], 1),
             "vs n_jobs=1": f"{r['ratio_to_sequential']:.2f}x", "target": "–"}
            for r in b["runs"]]
    full = result.get("full_search")
    if full:
        aim = result["targets"]["full_search_minutes"]
        rows.append({"search": f"the guide's 12 settings x {result['cv']} folds + refit, "
                               f"all {full['rows']} MNIST-5k rows",
                     "n_jobs": full["n_jobs"], "backend": full["backend"],
                     "seconds": round(full["seconds"], 1), "vs n_jobs=1": "–",
                     "target": f"<= {aim:g} min: {'met' if full['minutes'] <= aim else 'missed'}"
                     if not result["quick"] else "not judged (quick run)"})
    estimate = result.get("full_search_estimate")
    if estimate:
        aim = result["targets"]["full_search_minutes"]
        rows.append({"search": f"the guide's 12 settings x {result['cv']} folds + refit, "
                               f"all {estimate['rows']} MNIST-5k rows (estimated from one "
                               "fit per n_landmarks)",
                     "n_jobs": estimate["n_jobs"], "backend": estimate["backend"],
                     "seconds": round(estimate["seconds"], 1), "vs n_jobs=1": "–",
                     "target": f"<= {aim:g} min: "
                               f"{'met' if estimate['minutes'] <= aim else 'missed'} (estimate)"
                     if not result["quick"] else "not judged (quick run)"})
    return rows


def build_parser():
    """The command line (for ``python -m benchmarks``)."""
    parser = bench_parser(__doc__.splitlines()[0], f"digits, {QUICK}")
    parser.add_argument("--skip-full", action="store_true")
    parser.add_argument("--estimate-full", action="store_true",
                        help="estimate section 2 from one fit per n_landmarks")
    return parser


if __name__ == "__main__":
    sys.exit(main())
