"""Streaming: partial_fit over chunks against a full fit, for both estimators.

Run ``python benchmarks/bench_streaming.py`` (or ``python -m benchmarks --only streaming``);
it prints a table and writes ``benchmarks/results/streaming.json``. ``--quick`` (into
``benchmarks/results/quick/``) uses a 600-row stratified subset of digits and shortened ST
settings (:data:`QUICK_ST`).

Data: scikit-learn's 8 x 8 digits (raw 0..16 features, float32), K = 10, the same
``random_state`` for every estimator. The rows are cut, in their stored order, into
:data:`N_CHUNKS` chunks; :data:`N_PASSES` passes of ``partial_fit`` over the chunks are
compared with one ``fit`` on all rows. The objective is the inertia on all of digits,
the sum of ``transform(X).min(axis=1) ** 2`` (for ST K-means the warps are re-optimised
for the final centroids, as in ``predict``), for the streamed and the fitted model alike.
Targets: streamed objective at most 1.10x the full fit's (ExplainableKMeans) and 1.25x
(SpatialTransformerKMeans).
``sklearn.cluster.MiniBatchKMeans.partial_fit`` on the same chunks is the peer.
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
from sklearn.cluster import KMeans, MiniBatchKMeans  # noqa: E402

from benchmarks._common import (  # noqa: E402
    bench_parser,
    load_average,
    load_digits_data,
    machine_info,
    output_path,
    set_threads,
    write_json,
)
from skxclust import ExplainableKMeans, SpatialTransformerKMeans  # noqa: E402
from skxclust.datasets import stratified_subset  # noqa: E402

NAME = "streaming"
N_CLUSTERS = 10
N_CHUNKS = 6
N_PASSES = 3
SEED = 0
TARGETS = {"ExplainableKMeans": 1.10, "SpatialTransformerKMeans": 1.25}
QUICK_ROWS = 600
QUICK_ST = {"max_iter": 3, "n_steps": 10, "update_steps": 3}


def distortion(model, X) -> float:
    """Sum over the rows of the squared distance to the nearest centroid (``transform``
    gives distances for every estimator here; ST K-means' ``score`` is a log-evidence)."""
    return float((model.transform(X).min(axis=1).astype("float64") ** 2).sum())


def stream(make, X, chunks) -> tuple[object, list[float], float]:
    """``N_PASSES`` passes of ``partial_fit`` over ``chunks``: (model, objective after
    every pass, seconds spent in partial_fit)."""
    model, per_pass, seconds = make(), [], 0.0
    for _ in range(N_PASSES):
        for rows in chunks:
            t0 = time.perf_counter()
            model.partial_fit(X[rows])
            seconds += time.perf_counter() - t0
        per_pass.append(distortion(model, X))
    return model, per_pass, seconds


def compare(name: str, make_full, make_stream, X, chunks) -> dict:
    """Full fit against streaming for one estimator (factories of unfitted models)."""
    t0 = time.perf_counter()
    full = make_full().fit(X)
    fit_seconds = time.perf_counter() - t0
    full_objective = distortion(full, X)
    model, per_pass, stream_seconds = stream(make_stream, X, chunks)
    ratio = per_pass[-1] / full_objective
    target = TARGETS.get(name)
    return {
        "full_fit_objective": full_objective, "full_fit_seconds": fit_seconds,
        "full_fit_n_iter": int(full.n_iter_),
        "stream_objective_per_pass": per_pass, "stream_seconds": stream_seconds,
        "n_steps": int(getattr(model, "n_steps_", N_PASSES * len(chunks))),
        "ratio": ratio, "ratio_per_pass": [p / full_objective for p in per_pass],
        "target": target, "met": None if target is None else bool(ratio <= target),
    }


def build_parser():
    """The command line: ``--quick`` and ``--output``."""
    return bench_parser(__doc__.splitlines()[0],
                        f"{QUICK_ROWS} rows of digits, shortened ST settings {QUICK_ST}")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print its table and write its JSON; returns the exit status."""
    args = build_parser().parse_args(argv)
    output = output_path(args, NAME)
    set_threads()
    result = {"benchmark": "partial_fit over chunks vs a full fit (digits, K=10)",
              "quick": args.quick, "machine": machine_info(), "n_clusters": N_CLUSTERS,
              "n_chunks": N_CHUNKS, "n_passes": N_PASSES, "random_state": SEED,
              "objective": "inertia on all rows, sum of transform(X).min(1) ** 2", "estimators": {}}
    X, y = load_digits_data()
    st_params = dict(QUICK_ST) if args.quick else {}
    if args.quick:
        X, y = stratified_subset(X, y, QUICK_ROWS, random_state=SEED)
        result["quick_settings"] = {"rows": QUICK_ROWS, "st_params": QUICK_ST}
    chunks = np.array_split(np.arange(X.shape[0]), N_CHUNKS)
    result["n_samples"], result["chunk_rows"] = int(X.shape[0]), [len(c) for c in chunks]
    def explainable():
        return ExplainableKMeans(N_CLUSTERS, random_state=SEED)

    def spatial():
        return SpatialTransformerKMeans(N_CLUSTERS, random_state=SEED, **st_params)

    models = {  # name: (full fit, streamed); the peer's full fit is KMeans, same seeding
        "sklearn MiniBatchKMeans": (lambda: KMeans(N_CLUSTERS, random_state=SEED, n_init=1),
                                    lambda: MiniBatchKMeans(N_CLUSTERS, random_state=SEED)),
        "ExplainableKMeans": (explainable, explainable),
        "SpatialTransformerKMeans": (spatial, spatial),
    }
    summary = []
    for name, (make_full, make_stream) in models.items():
        entry = compare(name, make_full, make_stream, X, chunks)
        result["estimators"][name] = entry
        print(f"{name}: stream/full objective {entry['ratio']:.4f} "
              f"(per pass {[round(r, 4) for r in entry['ratio_per_pass']]}), "
              f"fit {entry['full_fit_seconds']:.2f}s, partial_fit {entry['stream_seconds']:.2f}s",
              flush=True)
        summary.append({"estimator": name,
                        "stream / full objective": f"{entry['ratio']:.3f}",
                        "target": "–" if entry["target"] is None else f"≤ {entry['target']}",
                        "met": entry["met"],
                        "fit s": f"{entry['full_fit_seconds']:.2f}",
                        "partial_fit s (all)": f"{entry['stream_seconds']:.2f}"})
    result["summary"] = summary
    result["machine"]["load_average_end"] = load_average()
    write_json(output, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
