"""dask: blockwise fit on a LocalCluster and the threaded scheduler against the in-memory fit.

Run ``python benchmarks/bench_dask.py`` (or ``python -m benchmarks --only dask``); it prints
a table and writes ``benchmarks/results/dask.json``. ``--quick`` (into
``benchmarks/results/quick/``) shrinks both data sets and the ST settings.

Both fits start from the same explicit initial centroids. ``ExplainableKMeans`` fits agree
to rounding; ST K-means' do not have to (a dask fit makes no split-merge moves, which the
in-memory default makes, and its float32 warp fits round differently with other rows in a
chunk: see the scaling guide), so its figures measure the distance between the two. The
JSON records the largest centroid difference (relative to the largest centroid value),
the share of equal labels, the relative inertia difference and the iteration counts, with
the fit times of the in-memory fit, of the dask fit on the threaded scheduler and of the
dask fit on ``LocalCluster``s of two single-threaded worker processes (started, and
warmed up by importing skxclust, before timing; start-up times are recorded apart): one
with distributed's default worker environment, one without its ``MALLOC_TRIM_THRESHOLD_``
(:data:`TUNED_ENVIRON`), which slows torch's temporaries down in the workers.

- ``ExplainableKMeans``: Gaussian blobs, float64, :data:`EUCLIDEAN_ROWS` x 32, K = 10, in
  :data:`N_BLOCKS` row blocks; initial centroids from k-means++ on the first 10 000 rows.
- ``SpatialTransformerKMeans``: scikit-learn's digits (float64), K = 10, in
  :data:`N_BLOCKS` row blocks, default parameters; initial centroids from scikit-learn's
  KMeans (10 seedings) so that both fits skip the warped initialisation.
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
from sklearn.cluster import KMeans, kmeans_plusplus  # noqa: E402
from sklearn.datasets import make_blobs  # noqa: E402

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

NAME = "dask"
N_CLUSTERS = 10
N_BLOCKS = 8
SEED = 0
EUCLIDEAN_ROWS = {"full": 400_000, "quick": 20_000}
ST_ROWS = {"full": None, "quick": 300}  # None: all of digits
QUICK_ST = {"max_iter": 3, "n_steps": 10, "update_steps": 3}
TUNED_ENVIRON = {"OMP_NUM_THREADS": 1, "MKL_NUM_THREADS": 1, "OPENBLAS_NUM_THREADS": 1}
CLUSTERS = ("local_cluster_default", "local_cluster_no_malloc_trim")


def warm_up() -> None:
    """Import skxclust (and torch) on a worker before anything is timed."""
    import skxclust._dask_fit  # noqa: F401


def compare(memory, blockwise) -> dict:
    """How far the dask fit is from the in-memory fit."""
    scale = max(1.0, float(np.abs(memory.cluster_centers_).max()))
    return {
        "max_abs_centroid_difference": float(
            np.abs(memory.cluster_centers_ - blockwise.cluster_centers_).max()),
        "max_relative_centroid_difference": float(
            np.abs(memory.cluster_centers_ - blockwise.cluster_centers_).max() / scale),
        "equal_labels": float(np.mean(memory.labels_ == blockwise.labels_)),
        "relative_inertia_difference": float(
            abs(memory.inertia_ - blockwise.inertia_) / memory.inertia_),
        "n_iter": [int(memory.n_iter_), int(blockwise.n_iter_)],
    }


def timed_fit(make, X):
    t0 = time.perf_counter()
    est = make().fit(X)
    return est, time.perf_counter() - t0


def run_case(make, X, clients) -> dict:
    """In-memory fit, dask fit on the threaded scheduler and on each cluster."""
    import dask
    import dask.array as da

    Xd = da.from_array(X, chunks=(-(-X.shape[0] // N_BLOCKS), X.shape[1]))
    memory, t_memory = timed_fit(make, X)
    with dask.config.set(scheduler="threads"):
        threaded, t_threads = timed_fit(make, Xd)
    case = {"n_samples": int(X.shape[0]), "n_features": int(X.shape[1]),
            "n_blocks": int(Xd.numblocks[0]),
            "fit_seconds": {"in_memory": t_memory, "dask_threads": t_threads},
            "threads_vs_in_memory": compare(memory, threaded)}
    for name, client in clients.items():
        with dask.config.set(scheduler=client):
            on_cluster, seconds = timed_fit(make, Xd.persist())
        case["fit_seconds"][name] = seconds
        case[f"{name}_vs_in_memory"] = compare(memory, on_cluster)
    return case


def start_cluster(environ: dict | None):
    """A LocalCluster of two single-threaded worker processes and its client, warmed up."""
    import dask
    import distributed

    settings = {} if environ is None else {"distributed.nanny.pre-spawn-environ": environ}
    with dask.config.set(settings):
        cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                           host="127.0.0.1", dashboard_address=None)
    client = distributed.Client(cluster, set_as_default=False)
    client.run(warm_up)
    return cluster, client


def build_parser():
    """The command line: ``--quick`` and ``--output``."""
    return bench_parser(__doc__.splitlines()[0],
                        f"{EUCLIDEAN_ROWS['quick']} blob rows, {ST_ROWS['quick']} digits, "
                        f"ST settings {QUICK_ST}")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print its table and write its JSON; returns the exit status."""
    args = build_parser().parse_args(argv)
    output = output_path(args, NAME)
    size = "quick" if args.quick else "full"
    set_threads()
    result = {"benchmark": "dask fit (threads, LocalCluster) vs in-memory fit, same init",
              "quick": args.quick, "machine": machine_info(), "n_clusters": N_CLUSTERS,
              "cases": {}}
    clusters, clients = [], {}
    try:
        for name, environ in zip(CLUSTERS, (None, TUNED_ENVIRON)):
            t0 = time.perf_counter()
            cluster, client = start_cluster(environ)
            clusters.append(cluster)
            clients[name] = client
            result.setdefault("local_clusters", {})[name] = {
                "n_workers": 2, "threads_per_worker": 1,
                "worker_environ": "distributed defaults" if environ is None else environ,
                "start_seconds": time.perf_counter() - t0}
        X, _ = make_blobs(EUCLIDEAN_ROWS[size], 32, centers=N_CLUSTERS, cluster_std=4.0,
                          random_state=SEED)
        init, _ = kmeans_plusplus(X[:10_000], N_CLUSTERS, random_state=SEED)
        result["cases"]["ExplainableKMeans"] = run_case(
            lambda: ExplainableKMeans(N_CLUSTERS, init=init), X, clients)
        digits, _ = load_digits_data()
        digits = digits.astype(np.float64)[: ST_ROWS[size]]
        init = KMeans(N_CLUSTERS, n_init=10, random_state=SEED).fit(digits).cluster_centers_
        st_params = QUICK_ST if args.quick else {}
        result["cases"]["SpatialTransformerKMeans"] = run_case(
            lambda: SpatialTransformerKMeans(N_CLUSTERS, init=init, **st_params), digits,
            clients)
    finally:
        for client in clients.values():
            client.close()
        for cluster in clusters:
            cluster.close()
    summary = []
    for name, case in result["cases"].items():
        secs = case["fit_seconds"]
        diffs = [case[f"{k}_vs_in_memory"] for k in ("threads", *CLUSTERS)]
        row = {"estimator": name, "rows x features": f"{case['n_samples']} x "
               f"{case['n_features']}", "in-memory fit s": f"{secs['in_memory']:.2f}",
               "dask threads s": f"{secs['dask_threads']:.2f}",
               "LocalCluster s": f"{secs[CLUSTERS[0]]:.2f}",
               "LocalCluster, no malloc trim s": f"{secs[CLUSTERS[1]]:.2f}",
               "max centroid diff (rel.)": "{:.1e}".format(
                   max(d["max_relative_centroid_difference"] for d in diffs)),
               "equal labels": "{:.4f}".format(min(d["equal_labels"] for d in diffs))}
        summary.append(row)
        print(row, flush=True)
    result["summary"] = summary
    result["machine"]["load_average_end"] = load_average()
    write_json(output, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
