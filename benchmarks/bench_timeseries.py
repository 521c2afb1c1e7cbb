"""Time series: ST K-means against the elastic k-means family on UCR sets (train -> test).

Run ``python benchmarks/bench_timeseries.py`` (or ``python -m benchmarks --only
timeseries``); it prints one line per data set and method and writes
``benchmarks/results/timeseries.json``. It needs ``aeon`` (the UCR sets it ships) and
``tslearn`` (Trace, and the peers run in the same process): ``pip install
skxclust[timeseries]``. Without them it says so and exits with status 0, writing nothing.

Protocol
--------
That of the train-test tables of the KASBA paper (Holder & Bagnall, 2024; tsml-eval's
``tsml_eval/publications/clustering/kasba/results/train-test/section-5.1/clacc_mean.csv``):
every series is z-normalised (mean 0, standard deviation 1), ``K`` is the number of
classes, each method is fitted on the UCR TRAIN split and ``predict`` labels the TEST
split, scored by clustering accuracy (Hungarian matching,
:func:`skxclust.metrics.clustering_accuracy`) and NMI; labels are used to score only.
Each method runs ``--seeds`` times (``random_state = 0, 1, ...``); the JSON keeps every
fit. The data sets are the univariate, equal-length sets shipped inside aeon (the UCR sets
ArrowHead, GunPoint, ItalyPowerDemand, OSULeaf, ACSF1, and UnitTest, aeon's stripped-down
UCR Chinatown: 20 + 22 series of 24 hourly values, no published result) and tslearn
(Trace). aeon's PickupGestureWiimoteZ is left out: its series have unequal lengths
(29-361), and the protocol's table covers equal-length sets. Apart from them (no
published table, no target), the multivariate set aeon ships, BasicMotions (40 + 40
series of 6 channels, 100 samples: accelerometer and gyroscope of walking, resting,
running, badminton), each channel z-normalised: ST K-means with ``image_shape=(6, 1,
100)`` (one time warp shared by the channels), the peers on their (n, L, C) / (n, C, L)
arrays; written to the JSON's ``multivariate``.

Methods (all in this process, one torch thread each for ST):

- ``st``: ``SpatialTransformerKMeans(n_clusters=K)``, the defaults;
- ``kmeans``: ``sklearn.cluster.KMeans(n_clusters=K)`` (Euclidean);
- ``dtw``, ``softdtw``: tslearn's ``TimeSeriesKMeans`` (DTW with DBA; soft-DTW, gamma 1);
- ``kshape``: tslearn's ``KShape``;
- ``kasba``: aeon's ``KASBA`` (MSM distance, barycentre averaging), when aeon has it.

The peers run with ``--peer-seeds`` seeds (default 3; DTW k-means takes minutes per fit on
the long sets) and their library defaults except ``max_iter=10`` for ``TimeSeriesKMeans``
(its default 50 rarely runs past 10 here). Before any set, every method is fitted once on a
small random-walk set, untimed (:func:`warm_up`; its seconds are recorded as
``warmup_seconds``): tslearn compiles its numba kernels in the first DTW fit of a process
(about 7 s here, not cached), which would otherwise count in the mean of the first set
measured (Trace: 10.1 s, then 3.4 and 2.5 s in the runs before the warm-up); a user fitting
more than once pays it once. DTW k-means took 290 s per fit on OSULeaf
(427 samples) when the peers were first run (38-54 s in the committed run) and far longer
on ACSF1 (1,460 samples): the committed run leaves DTW and soft-DTW k-means out on ACSF1
and soft-DTW on OSULeaf. :data:`PUBLISHED` holds the published
train-test ACC of the eight methods of the KASBA table for these sets (facts copied from
the CSV above), shown beside the measured ones.

Targets (issue 23): the mean held-out ACC of ``st`` over the sets at least 0.58 (above the
published KASBA's 0.563); no set more than 0.02 below ``kmeans``; ``st`` fits at least
10 times faster than tslearn's DTW k-means on the same data (mean fit seconds), judged
on Trace and OSULeaf (:data:`SPEED_SETS`, where the issue measured it; the ratio on every
set is recorded).

Options: ``--sets``, ``--methods``, ``--seeds``, ``--peer-seeds``; a run of some methods
merges into the existing JSON (each method keeps the date it was measured), which is
written after every method.
``--quick``: GunPoint and ItalyPowerDemand, ``st`` and ``kmeans``, two seeds.
"""

from __future__ import annotations

import skxclust

# skxclust first, as a user's script imports it: its OpenMP spin setting applies before
# torch loads OpenMP (skxclust._openmp), so the benchmark runs what users run.
SHORT_SPIN = skxclust._openmp.SPIN_SET_BY_SKXCLUST

import datetime  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

if __package__ in (None, ""):  # run as a script: make the ``benchmarks`` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from benchmarks._common import (  # noqa: E402
    bench_parser,
    load_average,
    machine_info,
    output_path,
    read_json,
    set_threads,
    write_json,
)

NAME = "timeseries"
SOURCES = {"ArrowHead": "aeon", "GunPoint": "aeon", "ItalyPowerDemand": "aeon",
           "OSULeaf": "aeon", "Trace": "tslearn", "ACSF1": "aeon", "UnitTest": "aeon"}
# Multivariate sets shipped inside aeon (rows of C channels of L samples, channel after
# channel; ST K-means gets ``image_shape=(C, 1, L)``): kept apart from the univariate
# targets, in the JSON's "multivariate".
MULTIVARIATE = {"BasicMotions": 6}
METHODS = ("st", "kmeans", "dtw", "softdtw", "kshape", "kasba")
PEERS = ("dtw", "softdtw", "kshape", "kasba")
TARGETS = {"mean_acc": 0.58, "below_kmeans_by": 0.02, "speedup_vs_dtw": 10.0}
# the fit-time target is judged where the issue measured it (long series; on
# ItalyPowerDemand's 24 samples DTW costs next to nothing), every ratio is recorded
SPEED_SETS = ("Trace", "OSULeaf")
PUBLISHED_FILE = ("tsml-eval: tsml_eval/publications/clustering/kasba/results/train-test/"
                  "section-5.1/clacc_mean.csv")
# Published train-test clustering accuracy (facts from the file above).
PUBLISHED_METHODS = ("DBA", "Euclid", "KASBA", "MSM", "Shape-DBA", "Soft-DBA", "k-SC",
                     "k-Shape")
PUBLISHED = {
    "ACSF1": (0.29, 0.25, 0.41, 0.36, 0.21, 0.29, 0.3, 0.33),
    "ArrowHead": (0.5714285714285714, 0.5485714285714286, 0.6057142857142858,
                  0.5428571428571428, 0.5542857142857143, 0.5371428571428571,
                  0.6285714285714286, 0.5028571428571429),
    "GunPoint": (0.5133333333333333, 0.5866666666666667, 0.52, 0.5333333333333333, 0.54,
                 0.5133333333333333, 0.5133333333333333, 0.5133333333333333),
    "ItalyPowerDemand": (0.531584062196307, 0.5208940719144801, 0.858114674441205,
                         0.5461613216715258, 0.5121477162293488, 0.531584062196307,
                         0.5461613216715258, 0.8872691933916423),
    "OSULeaf": (0.35537190082644626, 0.371900826446281, 0.3925619834710744,
                0.4297520661157025, 0.4049586776859504, 0.3760330578512397,
                0.4132231404958678, 0.35537190082644626),
    "Trace": (0.8, 0.56, 0.59, 0.55, 0.8, 0.79, 0.51, 0.5),
}
QUICK_SETS, QUICK_METHODS, QUICK_SEEDS = ("GunPoint", "ItalyPowerDemand"), ("st", "kmeans"), 2


def missing_packages() -> list[str]:
    """The optional packages this benchmark needs that are not installed."""
    import importlib.util

    return [name for name in ("aeon", "tslearn") if importlib.util.find_spec(name) is None]


def znormalise(X: np.ndarray) -> np.ndarray:
    """Each row minus its mean, divided by its standard deviation (1 where it is 0)."""
    X = np.asarray(X, dtype=np.float64)
    X = X - X.mean(axis=1, keepdims=True)
    std = X.std(axis=1, keepdims=True)
    return X / np.where(std > 0, std, 1.0)


def load_set(name: str):
    """TRAIN and TEST rows (z-normalised, float64, 2-D) and labels of a shipped UCR set
    (a multivariate set's channels z-normalised each, then laid channel after channel)."""
    if name in MULTIVARIATE:
        from aeon.datasets import load_classification

        out = []
        for split in ("train", "test"):
            X, y = load_classification(name, split=split)  # (n, C, L)
            n, channels, length = X.shape
            out += [znormalise(X.reshape(n * channels, length)).reshape(n, -1), np.asarray(y)]
        return tuple(out)
    if SOURCES[name] == "tslearn":
        from tslearn.datasets import CachedDatasets

        X_train, y_train, X_test, y_test = CachedDatasets().load_dataset(name)
        X_train, X_test = X_train[:, :, 0], X_test[:, :, 0]
    else:
        from aeon.datasets import load_classification

        X_train, y_train = load_classification(name, split="train")
        X_test, y_test = load_classification(name, split="test")
        X_train, X_test = X_train[:, 0], X_test[:, 0]
    return znormalise(X_train), np.asarray(y_train), znormalise(X_test), np.asarray(y_test)


def make_model(method: str, n_clusters: int, seed: int, image_shape=None):
    """The estimator of ``method``: ``fit`` takes (n, L) rows, see :func:`fit_predict`
    (``image_shape``: ST K-means' (C, 1, L) of a multivariate set)."""
    if method == "st":
        from skxclust import SpatialTransformerKMeans

        return SpatialTransformerKMeans(n_clusters, random_state=seed, image_shape=image_shape)
    if method == "kmeans":
        from sklearn.cluster import KMeans

        return KMeans(n_clusters, random_state=seed)
    if method in ("dtw", "softdtw"):
        from tslearn.clustering import TimeSeriesKMeans

        return TimeSeriesKMeans(n_clusters, metric=method, max_iter=10, random_state=seed)
    if method == "kshape":
        from tslearn.clustering import KShape

        return KShape(n_clusters=n_clusters, random_state=seed)
    from aeon.clustering import KASBA

    return KASBA(n_clusters=n_clusters, random_state=seed)


def fit_predict(method: str, n_clusters: int, seed: int, X_train, X_test, channels: int = 1):
    """Fit ``method`` on the TRAIN rows of ``channels`` channels; returns (TEST labels,
    fit seconds)."""
    image_shape = None if channels == 1 else (channels, 1, X_train.shape[1] // channels)
    model = make_model(method, n_clusters, seed, image_shape)
    # tslearn takes (n, L, C), aeon (n, C, L); ours and scikit-learn's (n, C * L)
    def wrap(X):
        if method in ("st", "kmeans"):
            return X
        series = X.reshape(X.shape[0], channels, -1)
        return series if method == "kasba" else series.transpose(0, 2, 1)

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(wrap(X_train))
        seconds = time.perf_counter() - start
        labels = model.predict(wrap(X_test))
    return np.asarray(labels), seconds


def warm_up(methods) -> dict:
    """Fit every method once on 8 random walks of 40 samples (K = 2), so that no timed fit
    pays a one-time cost (numba's compilation, first calls); returns the seconds each
    took."""
    walks = znormalise(np.cumsum(np.random.default_rng(0).normal(size=(8, 40)), axis=1))
    return {method: round(fit_predict(method, 2, 0, walks, walks)[1], 4)
            for method in methods}


def run_set(name: str, methods, seeds: int, peer_seeds: int, done=None) -> dict:
    """Every method on one data set: its rows' shape and each method's fits;
    ``done(entry)`` is called after each method (the run is written there)."""
    from sklearn.metrics import normalized_mutual_info_score

    from skxclust.metrics import clustering_accuracy

    X_train, y_train, X_test, y_test = load_set(name)
    n_clusters = len(np.unique(y_train))
    channels = MULTIVARIATE.get(name, 1)
    entry: dict = {"source": SOURCES.get(name, "aeon"), "n_train": int(X_train.shape[0]),
                   "n_test": int(X_test.shape[0]),
                   "length": int(X_train.shape[1]) // channels, "channels": channels,
                   "n_clusters": n_clusters, "methods": {}}
    for method in methods:
        runs: dict = {"acc": [], "nmi": [], "fit_seconds": []}
        for seed in range(peer_seeds if method in PEERS else seeds):
            labels, seconds = fit_predict(method, n_clusters, seed, X_train, X_test,
                                          channels)
            runs["acc"].append(float(clustering_accuracy(y_test, labels)))
            runs["nmi"].append(float(normalized_mutual_info_score(y_test, labels)))
            runs["fit_seconds"].append(round(seconds, 4))
        runs["date_utc"] = datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds")
        entry["methods"][method] = runs
        print(f"{name:17s} {method:8s} ACC {np.mean(runs['acc']):.3f} "
              f"NMI {np.mean(runs['nmi']):.3f} fit {np.mean(runs['fit_seconds']):7.2f} s "
              f"{np.round(runs['acc'], 3).tolist()}", flush=True)
        if done is not None:
            done(entry)
    return entry


def summarise(sets: dict) -> dict:
    """Mean ACC per method over the sets that have it, the published means on the same
    sets, the sets where ``st`` is below ``kmeans`` by more than the target, the fit-time
    ratio to DTW k-means, and whether each target is met: the mean ACC only where ``st``
    ran on every set, "none below k-means" only where both ran on every set (a set below
    is a miss at once), the speed where both speed sets have a ratio; None otherwise."""
    def mean_acc(entry, method):
        return float(np.mean(entry["methods"][method]["acc"]))

    names = list(sets)
    summary: dict = {"mean_acc": {}, "published_mean_acc": {}}
    for method in METHODS:
        have = [n for n in names if method in sets[n]["methods"]]
        if have:
            summary["mean_acc"][method] = {"value": float(np.mean(
                [mean_acc(sets[n], method) for n in have])), "sets": have}
    on = [n for n in names if n in PUBLISHED]
    # the measured means over the sets of the published ones (UnitTest has none)
    summary["mean_acc_published_sets"] = {
        method: float(np.mean([mean_acc(sets[n], method) for n in on]))
        for method in METHODS if on and all(method in sets[n]["methods"] for n in on)}
    if on:  # no published set measured: no published means (not NaN)
        for i, method in enumerate(PUBLISHED_METHODS):
            summary["published_mean_acc"][method] = float(np.mean([PUBLISHED[n][i]
                                                                   for n in on]))
        summary["published_mean_acc"]["best of eight"] = float(np.mean(
            [max(PUBLISHED[n]) for n in on]))
    both = [n for n in names if {"st", "kmeans"} <= set(sets[n]["methods"])]
    below = [n for n in both if mean_acc(sets[n], "st") < mean_acc(sets[n], "kmeans")
             - TARGETS["below_kmeans_by"]]
    speed = {}
    for n in names:
        methods = sets[n]["methods"]
        if {"st", "dtw"} <= set(methods):
            speed[n] = float(np.mean(methods["dtw"]["fit_seconds"])
                             / np.mean(methods["st"]["fit_seconds"]))
    st = summary["mean_acc"].get("st", {"value": None, "sets": []})
    everywhere = set(SOURCES)  # the mean and "none below" are judged on every set
    summary.update({
        "below_kmeans": below, "speedup_vs_dtw": speed,
        "met": {"mean_acc": None if not everywhere <= set(st["sets"])
                else st["value"] >= TARGETS["mean_acc"],
                "below_kmeans": False if below else (True if everywhere <= set(both)
                                                     else None),
                "speedup_vs_dtw": None if not set(SPEED_SETS) <= set(speed)
                else min(speed[n] for n in SPEED_SETS) >= TARGETS["speedup_vs_dtw"]}})
    return summary


def build_parser():
    """Command line of the benchmark."""
    parser = bench_parser(__doc__.splitlines()[0],
                          "GunPoint and ItalyPowerDemand, st and kmeans, two seeds")
    parser.add_argument("--sets", default=",".join([*SOURCES, *MULTIVARIATE]),
                        help="comma-separated data sets (default: all shipped ones)")
    parser.add_argument("--methods", default=",".join(METHODS),
                        help=f"comma-separated methods among {', '.join(METHODS)}")
    parser.add_argument("--seeds", type=int, default=5, help="seeds of st and kmeans")
    parser.add_argument("--peer-seeds", type=int, default=3,
                        help="seeds of the tslearn and aeon peers")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write its JSON; returns the exit status."""
    args = build_parser().parse_args(argv)
    missing = missing_packages()
    if missing:
        print(f"bench_timeseries needs {' and '.join(missing)} (pip install "
              "skxclust[timeseries]); nothing measured, nothing written.")
        return 0
    names = list(QUICK_SETS) if args.quick else [s for s in args.sets.split(",") if s]
    methods = list(QUICK_METHODS) if args.quick else [m for m in args.methods.split(",") if m]
    known = [*SOURCES, *MULTIVARIATE]
    unknown = sorted(set(names) - set(known)) + sorted(set(methods) - set(METHODS))
    if unknown:
        raise SystemExit(f"unknown set or method {unknown}; sets: {', '.join(known)}; "
                         f"methods: {', '.join(METHODS)}")
    if "kasba" in methods:
        try:
            from aeon.clustering import KASBA  # noqa: F401
        except ImportError:
            print("aeon has no KASBA: kasba left out")
            methods.remove("kasba")
    seeds = QUICK_SEEDS if args.quick else args.seeds
    set_threads(1)
    output = output_path(args, NAME)
    result = {"benchmark": "time series, train -> test", "quick": args.quick,
              "machine": machine_info(), "seeds": seeds, "peer_seeds": args.peer_seeds,
              "targets": TARGETS, "published": {"source": PUBLISHED_FILE,
                                                "methods": list(PUBLISHED_METHODS),
                                                "acc": {n: list(PUBLISHED[n]) for n in names
                                                       if n in PUBLISHED}},
              "sets": {}, "multivariate": {}}
    def write(entry: dict) -> None:  # after every method: a long run keeps what it measured
        result["multivariate" if name in MULTIVARIATE else "sets"][name] = entry
        result["machine"]["load_average_end"] = load_average()
        write_json(output, merged(result, read_json(output), args.quick))

    result["warmup_seconds"] = warm_up(methods)
    print("warm-up fits (untimed):", result["warmup_seconds"], flush=True)
    for name in names:
        run_set(name, methods, seeds, args.peer_seeds, done=write)
    return 0


def merged(result: dict, previous: dict, quick: bool) -> dict:
    """``result`` with the sets and methods of ``previous`` that it did not measure (not
    for quick runs), in the order of :data:`SOURCES` and :data:`METHODS`, summarised."""
    result = {**result, "sets": dict(result["sets"]),
              "multivariate": dict(result.get("multivariate", {}))}
    if not quick and not previous.get("quick") and "sets" in previous:
        for part in ("sets", "multivariate"):
            for name, entry in previous.get(part, {}).items():
                if name in result[part]:
                    entry = {**entry, "methods": {**entry["methods"],
                                                  **result[part][name]["methods"]}}
                result[part][name] = entry
        result["published"] = {**result["published"], "acc": {
            **previous.get("published", {}).get("acc", {}), **result["published"]["acc"]}}
    result["sets"] = {n: result["sets"][n] for n in SOURCES if n in result["sets"]}
    for entry in [*result["sets"].values(), *result["multivariate"].values()]:
        entry["methods"] = {m: entry["methods"][m] for m in METHODS if m in entry["methods"]}
    result["summary"] = summarise(result["sets"])
    return result


if __name__ == "__main__":
    sys.exit(main())
