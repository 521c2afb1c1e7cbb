"""GridSearchCV over the appearance families of ST K-means, selected by ``score``.

Run ``python benchmarks/bench_appearance_search.py`` (or ``python -m benchmarks --only
appearance_search``); it writes ``benchmarks/results/appearance_search.json``.

On each data set and each of :data:`N_SPLITS` stratified 80/20 splits (``random_state=s``
for split ``s``): ``GridSearchCV`` fits ``SpatialTransformerKMeans(n_clusters=10,
random_state=s)`` with ``appearance`` in ``"none"``, ``"intensity"``,
``"intensity+thickness"`` and ``noise`` in ``"constant"``, ``"contrast"`` (the
:data:`CANDIDATES`, named ``"family / noise"``) on three folds of the training rows
(``KFold(3, shuffle=True, random_state=s)``) and keeps the candidate with the highest mean
held-out ``score`` (the Laplace log-evidence: no labels). Then every candidate is fitted
on all training rows and scored by the clustering accuracy of ``predict`` on the
untouched 20 % (labels used to judge only). The search made the right choice when what it
gives a user, the held-out accuracy of the candidate it selected on each split, averaged
over the splits, is the highest candidate mean within :data:`TOLERANCE` (one split alone
is not a judge: on digits the families' gaps change sign from split to split).

Data: scikit-learn's digits (raw 0..16), and the same digits with a random ink gain and
background level per image (``x * U(0.4, 1.0) + U(0, 4)``, seeded), where an appearance
transformation has something to explain. ``--quick``: 400 rows of each, shortened fits,
two splits."""

from __future__ import annotations

import skxclust

# skxclust first, as a user's script imports it: its OpenMP spin setting applies before
# torch loads OpenMP (skxclust._openmp), so the benchmark runs what users run.
SHORT_SPIN = skxclust._openmp.SPIN_SET_BY_SKXCLUST

import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

if __package__ in (None, ""):  # run as a script: make the ``benchmarks`` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from sklearn.model_selection import GridSearchCV, KFold, train_test_split  # noqa: E402

from benchmarks._common import (  # noqa: E402
    bench_parser,
    load_average,
    load_digits_data,
    machine_info,
    output_path,
    set_threads,
    write_json,
)
from skxclust import SpatialTransformerKMeans  # noqa: E402
from skxclust.datasets import stratified_subset  # noqa: E402
from skxclust.metrics import clustering_accuracy  # noqa: E402

NAME = "appearance_search"
FAMILIES = ("none", "intensity", "intensity+thickness")
NOISE_MODELS = ("constant", "contrast")
CANDIDATES = tuple(f"{family} / {noise}" for noise in NOISE_MODELS for family in FAMILIES)
TOLERANCE = 0.005  # mean held-out ACC within this of the best counts as the best
N_SPLITS = 5


def random_contrast(X: np.ndarray, seed: int = 0) -> np.ndarray:
    """Every row times its own gain in [0.4, 1] plus its own level in [0, 4] (seeded)."""
    rng = np.random.default_rng(seed)
    return X * rng.uniform(0.4, 1.0, (len(X), 1)) + rng.uniform(0.0, 4.0, (len(X), 1))


def candidate(params: dict) -> str:
    """The name ``"family / noise"`` of the parameters of a candidate."""
    return f"{params['appearance']} / {params['noise']}"


def run_split(X: np.ndarray, y: np.ndarray, params: dict, split: int) -> dict:
    """The search on the training rows of one split and every candidate's held-out ACC."""
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, stratify=y,
                                                        random_state=split)
    est = SpatialTransformerKMeans(n_clusters=10, random_state=split, **params)
    t0 = time.perf_counter()
    search = GridSearchCV(est, {"appearance": list(FAMILIES), "noise": list(NOISE_MODELS)},
                          cv=KFold(3, shuffle=True, random_state=split)).fit(X_train)
    seconds = time.perf_counter() - t0
    best = candidate(search.best_params_)
    accuracy = {}
    for family in FAMILIES:
        for noise in NOISE_MODELS:
            name = candidate({"appearance": family, "noise": noise})
            model = search.best_estimator_ if name == best else \
                est.set_params(appearance=family, noise=noise).fit(X_train)
            accuracy[name] = clustering_accuracy(y_test, model.predict(X_test))
    return {"split": split, "selected": best,
            "mean_test_score": {candidate(p): score for p, score in zip(
                search.cv_results_["params"], search.cv_results_["mean_test_score"].tolist())},
            "heldout_acc": {name: accuracy[name] for name in CANDIDATES},
            "search_seconds": seconds}


def run(name: str, X: np.ndarray, y: np.ndarray, params: dict, n_splits: int) -> dict:
    """Every split of one data set, and the judgement over the splits."""
    splits = []
    for split in range(n_splits):
        splits.append(run_split(X, y, params, split))
        s = splits[-1]
        print(f"{name} split {split}: selected {s['selected']}; held-out ACC "
              + ", ".join(f"{f} {a:.3f}" for f, a in s["heldout_acc"].items()), flush=True)
    mean_acc = {f: float(np.mean([s["heldout_acc"][f] for s in splits])) for f in CANDIDATES}
    searched = float(np.mean([s["heldout_acc"][s["selected"]] for s in splits]))
    top = max(mean_acc.values())
    return {"data": name, "splits": splits,
            "selected": {f: sum(s["selected"] == f for s in splits) for f in CANDIDATES},
            "mean_heldout_acc": mean_acc, "searched_heldout_acc": searched,
            "most_accurate": max(mean_acc, key=mean_acc.get),
            "right_choice": searched >= top - TOLERANCE,
            "search_seconds": float(sum(s["search_seconds"] for s in splits))}


def _selected_text(counts: dict) -> str:
    """``{"none": 3, "intensity": 2, ...}`` as ``"none 3, intensity 2"`` (picked ones)."""
    return ", ".join(f"{f} {n}" for f, n in counts.items() if n)


def build_parser():
    """The command line: ``--quick`` and ``--output``."""
    return bench_parser(__doc__.splitlines()[0], "400 rows per data set, shortened fits")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write its JSON; returns the exit status."""
    args = build_parser().parse_args(argv)
    output = output_path(args, NAME)
    set_threads()
    info = machine_info()
    start = time.perf_counter()
    X, y = load_digits_data()
    X = X.astype(np.float64)
    params: dict = {}
    n_splits = N_SPLITS
    if args.quick:
        X, y = stratified_subset(X, y, 400, random_state=0)
        params = dict(n_steps=5, max_iter=2, update_steps=2)
        n_splits = 2
    results = [run("digits", X, y, params, n_splits),
               run("digits_random_contrast", random_contrast(X), y, params, n_splits)]
    report = {
        "benchmark": "GridSearchCV over ST K-means' appearance families and noise models, "
                     f"selected by score (no labels) on each of {n_splits} splits; held-out "
                     "ACC of every candidate (labels judge only)",
        "quick": args.quick,
        "machine": info,
        "settings": {"families": list(FAMILIES), "noise": list(NOISE_MODELS),
                     "splits": f"{n_splits} stratified 80/20 splits, random_state=split",
                     "cv": "KFold(3, shuffle=True, random_state=split) on the training rows",
                     "estimator": {"n_clusters": 10, "random_state": "split", **params},
                     "tolerance": TOLERANCE,
                     "random_contrast": "x * U(0.4, 1.0) + U(0, 4) per row, seed 0"},
        "results": results,
        "summary": [{"data": r["data"], "selected (splits)": _selected_text(r["selected"]),
                     "most accurate held out": r["most_accurate"],
                     **{f"mean ACC {f}": round(a, 3)
                        for f, a in r["mean_heldout_acc"].items()},
                     "ACC of the search's choice": round(r["searched_heldout_acc"], 3),
                     "right choice": r["right_choice"]} for r in results],
        "total_wall_seconds": time.perf_counter() - start,
    }
    info["load_average_end"] = load_average()
    write_json(output, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
