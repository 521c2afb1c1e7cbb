"""Fingerprint of every fit path: SHA-256 of the fitted arrays and of the outputs.

``python -m benchmarks.fingerprint [--output PATH] [--check [PATH]] [--only NAME,...]``

A reshaping of the code that must not move behaviour (issue 21) is checked against this:
each case below fits one path of the estimators on small fixed data with a fixed
``random_state`` and hashes, bit for bit, ``cluster_centers_``, ``labels_``, ``inertia_``,
``n_iter_`` and the other fitted attributes, and the outputs of ``predict``,
``transform``, ``score``, ``decision_function`` and ``explain`` (and ``align`` for ST
K-means). Every case runs with one and with two torch intra-op threads: the project
promises results that do not depend on the thread count, so the two must agree too.

Without ``--check`` it prints the hashes and writes them to ``--output`` (default
``benchmarks/fingerprint_baseline.json``: record it from the unchanged code first). With
``--check`` it compares against that file (or PATH) and exits with status 1 when any hash
differs, is missing or is new, or when a case differs between one and two threads where
the baseline did not (differences the baseline records are printed, see its
``thread_differences``).

This is not a ``bench_*`` module, so ``python -m benchmarks`` does not run it; about a
minute on two cores (the fits alone about 40 s).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

from skxclust import ExplainableKMeans, SpatialTransformerKMeans

BASELINE = Path(__file__).resolve().parent / "fingerprint_baseline.json"
THREADS = (1, 2)


# ------------------------------------------------------------------------------ hashing
def digest(value) -> str:
    """SHA-256 of an array's dtype, shape and bytes (scalars as 0-d arrays)."""
    if sp.issparse(value):
        value = value.toarray()
    a = np.ascontiguousarray(np.asarray(value))
    h = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
    h.update(a.tobytes())
    return h.hexdigest()


FITTED = ("cluster_centers_", "labels_", "inertia_", "n_iter_", "n_steps_", "beta_",
          "noise_variance_", "image_shape_", "_counts")


def fitted(est) -> dict:
    """The hashes of the fitted attributes the estimator has."""
    return {name: digest(getattr(est, name)) for name in FITTED if hasattr(est, name)}


def outputs(est, X, rows: int = 64, explain: bool = True) -> dict:
    """The hashes of the inference outputs on X (explain and align on ``rows`` rows)."""
    out = {"predict": digest(est.predict(X)), "transform": digest(est.transform(X)),
           "score": digest(np.float64(est.score(X))),
           "decision_function": digest(est.decision_function(X))}
    head = X[:rows]
    if explain:
        out["explain"] = digest(est.explain(head))
    if hasattr(est, "align"):
        out["align"] = digest(est.align(head))
    return out


# ------------------------------------------------------------------------------ data
def digits(n=None, dtype=np.float64):
    from sklearn.datasets import load_digits

    X = load_digits().data / 16.0
    return (X if n is None else X[:n]).astype(dtype)


def blobs(n=600, d=16, k=5, seed=0):
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=4.0, size=(k, d))
    return means[rng.integers(0, k, n)] + rng.normal(size=(n, d))


def mnist_like(n=3000, d=784, seed=0):
    """Random rows shaped like MNIST (28 x 28 in [0, 1], mostly zero): above every
    size threshold of the Lloyd loop, the seeding and inference."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, d)) * (rng.random((n, d)) < 0.2)
    return X + 0.1 * (rng.random((10, d)) < 0.2)[rng.integers(0, 10, n)]


def images_28(n=160):
    """Digits upsampled to 28 x 28 (bilinear), for the coarse level and chunk threads."""
    X = torch.from_numpy(digits(n)).reshape(n, 1, 8, 8)
    X = torch.nn.functional.interpolate(X, size=(28, 28), mode="bilinear",
                                        align_corners=False)
    return X.reshape(n, 784).numpy()


def digits_levels(n=200, seed=0):
    """``bench_appearance_search``'s random-contrast digits (an ink gain and a background
    level of their own per row) on this module's 0-1 scale: a border that is not 0, where
    the warped centroids are padded with zeros."""
    from .bench_appearance_search import random_contrast

    return random_contrast(16.0 * digits(n), seed) / 16.0


def as_dask(X, chunks):
    import dask.array as da

    return da.from_array(X, chunks=(chunks, X.shape[1]))


# ------------------------------------------------------------------------------ cases
def ekm(**kw):
    return ExplainableKMeans(random_state=0, device="cpu", **kw)


ST_FAST = dict(n_steps=4, affine_steps=2, screen_steps=2, n_landmarks=4, max_iter=3,
               random_state=0, device="cpu")


def st(**kw):
    return SpatialTransformerKMeans(**{**ST_FAST, **kw})


def case_ekm_digits_f64():  # small: serial Lloyd in two restart groups, serial seeding
    X = digits()
    est = ekm(n_clusters=10, n_init=10).fit(X)
    return {**fitted(est), **outputs(est, X)}


def case_ekm_digits_f32():
    X = digits(dtype=np.float32)
    est = ekm(n_clusters=8, n_init=3).fit(X)
    return {**fitted(est), **outputs(est, X)}


def case_ekm_weighted():
    X = blobs()
    w = np.random.default_rng(1).uniform(0.1, 3.0, X.shape[0])
    est = ekm(n_clusters=5, n_init=4).fit(X, sample_weight=w)
    return {**fitted(est), **outputs(est, X), "score_weighted": digest(np.float64(
        est.score(X, sample_weight=w)))}


def case_ekm_sparse():
    X = sp.random(800, 200, density=0.05, format="csr", random_state=2, dtype=np.float64)
    est = ekm(n_clusters=6, n_init=3).fit(X)
    return {**fitted(est), **outputs(est, X)}


def case_ekm_large():  # above the serial thresholds of Lloyd, seeding and inference
    X = mnist_like()
    est = ekm(n_clusters=10, n_init=10, max_iter=15).fit(X)
    return {**fitted(est), **outputs(est, X, rows=700)}


def case_ekm_large_f32():
    X = mnist_like(seed=1).astype(np.float32)
    est = ekm(n_clusters=10, n_init=3, max_iter=15).fit(X)
    return {**fitted(est), **outputs(est, X, rows=700)}


def case_ekm_partial_fit():
    X = blobs(n=800, seed=3)
    est = ekm(n_clusters=5)
    out = {}
    for i, start in enumerate(range(0, 800, 200)):
        est.partial_fit(X[start:start + 200])
        out[f"step{i}_centers"] = digest(est.cluster_centers_)
    after_fit = ekm(n_clusters=5, n_init=2).fit(X[:400]).partial_fit(X[400:])
    return {**out, **fitted(est), **outputs(est, X),
            **{f"after_fit_{k}": v for k, v in fitted(after_fit).items()}}


def case_ekm_partial_fit_large():  # chunks above the serial size of a Lloyd pass
    X = mnist_like(n=18000, seed=4)
    est = ekm(n_clusters=10)
    for start in range(0, 18000, 9000):
        est.partial_fit(X[start:start + 9000])
    return {**fitted(est), "score": digest(np.float64(est.score(X)))}


def case_ekm_dask():
    X = digits()
    est = ekm(n_clusters=8, n_init=3, max_iter=30).fit(as_dask(X, 500))
    return {**fitted(est), **outputs(est, X),
            "dask_predict": digest(est.predict(as_dask(X, 500)).compute())}


def case_ekm_dask_large():
    X = mnist_like(n=18000, seed=5)  # blocks above the serial size of a Lloyd pass
    est = ekm(n_clusters=10, n_init=2, max_iter=4).fit(as_dask(X, 9000))
    return fitted(est)


def case_st_digits():  # split-merge moves, float32 warp fits, serial chunks
    X = digits(300)
    est = st(n_clusters=5).fit(X)
    return {**fitted(est), **outputs(est, X, rows=32)}


def case_st_digits_f32_subsample():  # above ``subsample``: subset fit + one pass over all
    X = digits(300, np.float32)
    est = st(n_clusters=5, subsample=150, n_init=2, init="k-means++").fit(X)
    return {**fitted(est), **outputs(est, X, rows=32)}


def case_st_digits_f64_warps():
    X = digits(200)
    est = st(n_clusters=4, warp_dtype="float64", update_steps=3, split_merge_moves=1,
             batch_size=16).fit(X)
    return {**fitted(est), **outputs(est, X, rows=32)}


def case_st_levels_thickness_contrast():  # a level per row, thickness, contrast noise
    X = digits_levels()
    est = st(n_clusters=4, appearance="intensity+thickness", noise="contrast").fit(X)
    return {**fitted(est), **outputs(est, X, rows=16)}


def case_st_28():  # the coarse level, chunks above the serial size (threaded chunks)
    X = images_28()
    est = st(n_clusters=4, split_merge_moves=1).fit(X)
    return {**fitted(est), **outputs(est, X, rows=16)}


def case_st_partial_fit():
    X = digits(240)
    est = st(n_clusters=4, update_steps=3)
    for start in range(0, 240, 80):
        est.partial_fit(X[start:start + 80])
    return {**fitted(est), **outputs(est, X, rows=16, explain=False)}


def case_st_dask():
    X = digits(160)
    est = st(n_clusters=4, update_steps=3, split_merge_moves=0,
             warp_dtype="float64").fit(as_dask(X, 80))
    return {**fitted(est), "predict": digest(est.predict(X))}


def case_st_signals():  # 1-D rows: shift search, monotone warps, the coarse level
    X = images_28(60).reshape(60, 28, 28)[:, 8:24:4].reshape(240, 28)  # rows 8, 12, 16, 20
    est = st(n_clusters=3, image_shape=(1, 28)).fit(X)
    return {**fitted(est), **outputs(est, X, rows=16)}


def case_st_signal_channels():  # (C, 1, L): one time warp shared by 4 channels
    X = images_28(60).reshape(60, 28, 28)[:, 8:24:4].reshape(60, 112)  # 4 rows, 4 channels
    est = st(n_clusters=3, image_shape=(4, 1, 28)).fit(X)
    return {**fitted(est), **outputs(est, X, rows=16)}


CASES = {name[len("case_"):]: fn for name, fn in globals().items() if name.startswith("case_")}


# ------------------------------------------------------------------------------ running
def run(names) -> tuple[dict, dict]:
    """Hashes ``{case@threads=N: {array: sha256}}`` and seconds per case run."""
    before = torch.get_num_threads()
    hashes, seconds = {}, {}
    try:
        for name in names:
            for threads in THREADS:
                torch.set_num_threads(threads)
                t0 = time.perf_counter()
                hashes[f"{name}@threads={threads}"] = CASES[name]()
                seconds[f"{name}@threads={threads}"] = round(time.perf_counter() - t0, 2)
                print(f"{name} threads={threads}: {len(hashes[f'{name}@threads={threads}'])} "
                      f"arrays, {seconds[f'{name}@threads={threads}']:.1f} s", flush=True)
    finally:
        torch.set_num_threads(before)
    return hashes, seconds


def thread_differences(hashes: dict) -> list[str]:
    """``case: array`` where one and two threads gave different bits."""
    out = []
    for key, arrays in hashes.items():
        name, _, threads = key.partition("@threads=")
        if threads != str(THREADS[0]):
            continue
        for other in THREADS[1:]:
            got = hashes.get(f"{name}@threads={other}", {})
            out += [f"{name}: {k} (threads {THREADS[0]} vs {other})"
                    for k in sorted(set(arrays) | set(got)) if arrays.get(k) != got.get(k)]
    return out


def compare(hashes: dict, baseline: dict) -> list[str]:
    """``case: array`` that differ from the baseline, are missing or are new."""
    out = []
    for key in sorted(set(hashes) | set(baseline)):
        a, b = baseline.get(key), hashes.get(key)
        if a is None or b is None:
            out.append(f"{key}: {'new' if a is None else 'missing'} case")
            continue
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                out.append(f"{key}: {k} {'differs' if k in a and k in b else 'missing/new'}")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=BASELINE)
    parser.add_argument("--check", nargs="?", type=Path, const=BASELINE, default=None,
                        metavar="PATH", help="compare with a recorded fingerprint")
    parser.add_argument("--only", default=None, help="comma-separated case names")
    args = parser.parse_args(argv)
    names = list(CASES) if args.only is None else args.only.split(",")
    unknown = set(names) - set(CASES)
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}; known: {', '.join(CASES)}")
    t0 = time.perf_counter()
    hashes, seconds = run(names)
    print(f"total {time.perf_counter() - t0:.1f} s")
    threads = thread_differences(hashes)
    n = sum(map(len, hashes.values()))
    if args.check is None:
        for line in threads:
            print(f"differs between thread counts: {line}")
        record = {"torch": torch.__version__, "numpy": np.__version__, "n_hashes": n,
                  "seconds": seconds, "thread_differences": threads, "hashes": hashes}
        args.output.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        print(f"wrote {n} hashes of {len(hashes)} case runs")
        return 0
    recorded = json.loads(args.check.read_text())
    baseline = {k: v for k, v in recorded["hashes"].items() if k.partition("@")[0] in names}
    diffs = compare(hashes, baseline)
    # a difference between thread counts that the baseline already had is known (reported,
    # not a failure); a new one fails
    known = set(recorded.get("thread_differences", []))
    for line in threads:
        print(f"differs between thread counts{' (as in the baseline)' if line in known else ''}"
              f": {line}")
    new_threads = [line for line in threads if line not in known]
    for line in diffs:
        print(f"DIFFERS FROM THE BASELINE: {line}")
    verdict = "all equal to the baseline" if not diffs else f"{len(diffs)} differ"
    if new_threads:
        verdict += f", {len(new_threads)} new differences between thread counts"
    print(f"{n} hashes of {len(hashes)} case runs: {verdict}")
    return 1 if diffs or new_threads else 0


if __name__ == "__main__":
    sys.exit(main())
