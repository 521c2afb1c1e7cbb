"""Peak memory of inference (predict, transform, explain, ...) against the number of rows.

Run ``python benchmarks/bench_memory.py`` (or ``python -m benchmarks --only memory``); it
prints a table and writes ``benchmarks/results/memory.json``. ``--quick`` measures three methods
at one size only (``benchmarks/results/quick/memory.json``).

For every (estimator, method, N) a fresh process builds ``N x 784`` float64 rows (uniform
noise), fits the estimator on a small subset, calls the method once on a few rows (so that
libraries, thread pools and kernels are loaded), resets the kernel's peak resident-set
counter (``/proc/self/clear_refs``) and calls the method on all N rows. The *peak increase*
is the peak resident set during that call minus the resident set just before it; it
includes the returned array, which is still alive when the peak is read. Reported against
the size of the output (the target: ``explain`` on 40 000 rows adds at most about twice
its output) and of the input.

Where ``clear_refs`` cannot be written, ``ru_maxrss`` before and after the call is used
instead (``"counter": "ru_maxrss"``); it only sees peaks above the earlier maximum of the
process, which here is reached while building the data, so small increases read as 0.
"""

from __future__ import annotations

import skxclust

# skxclust first, as a user's script imports it: its OpenMP spin setting applies before
# torch loads OpenMP (skxclust._openmp), so the benchmark runs what users run.
SHORT_SPIN = skxclust._openmp.SPIN_SET_BY_SKXCLUST  # False: the user chose a policy

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

if __package__ in (None, ""):  # run as a script: make the ``benchmarks`` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import (  # noqa: E402
    bench_parser,
    load_average,
    machine_info,
    output_path,
    set_threads,
    write_json,
)

NAME = "memory"
N_FEATURES = 784
SIZES = (5000, 10000, 20000, 40000)
QUICK_SIZES = (8000,)
# --quick: the explain target's method and the two inference paths most likely to regress.
QUICK_METHODS = "explainable.explain,explainable.predict,st.explain"
FIT_ROWS = {"explainable": 2000, "st": 300}
METHODS = {
    "explainable": ("predict", "transform", "decision_function", "predict_proba", "explain"),
    "st": ("predict", "transform", "decision_function", "explain", "align"),
}
# ST K-means with few, short warp optimisations: memory does not depend on the number of
# Adam steps, and 40 000 rows x all centroids still take a minute per call on 2 cores.
ESTIMATORS = {
    "explainable": {"n_clusters": 10, "random_state": 0, "device": "cpu"},
    "st": {"n_clusters": 4, "n_landmarks": 4, "n_steps": 2, "update_steps": 1, "max_iter": 2,
           "init": "k-means++", "random_state": 0, "device": "cpu"},
}
TARGET_EXPLAIN_RATIO = 2.0  # peak increase / output size, explain of 40 000 rows


# --------------------------------------------------------------------- one measurement
def _status_bytes(field: str) -> int:
    """A ``/proc/self/status`` memory field (``VmRSS``, ``VmHWM``) in bytes."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))


def _reset_peak() -> bool:
    """Reset the peak resident-set counter to the current resident set; False if refused."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _max_rss_bytes() -> int:
    """``ru_maxrss`` of this process in bytes (kilobytes on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def make_estimator(kind: str):
    """The estimator ``kind`` ("explainable" or "st") with the benchmark's settings."""
    from skxclust import ExplainableKMeans, SpatialTransformerKMeans

    cls = ExplainableKMeans if kind == "explainable" else SpatialTransformerKMeans
    return cls(**ESTIMATORS[kind])


def measure(kind: str, method: str, n: int) -> dict:
    """Peak resident-set increase of one call of ``method`` on ``n`` rows (this process).

    Parameters
    ----------
    kind : {"explainable", "st"}
    method : str
        An inference method of the estimator, called with X only.
    n : int
        Number of rows.

    Returns
    -------
    dict
        Sizes and the peak increase in bytes, the counter used and the call's wall time.
    """
    import numpy as np

    set_threads()
    rng = np.random.default_rng(0)
    X = rng.random((n, N_FEATURES))  # float64, allocated once (no temporary)
    est = make_estimator(kind).fit(X[: FIT_ROWS[kind]])
    call = getattr(est, method)
    call(X[:100])  # warm-up: libraries, thread pools, kernels
    gc.collect()
    counter = "VmHWM" if _reset_peak() else "ru_maxrss"
    before = _status_bytes("VmRSS")
    max_before = _max_rss_bytes()
    start = time.perf_counter()
    out = call(X)
    seconds = time.perf_counter() - start
    if counter == "VmHWM":
        increase = _status_bytes("VmHWM") - before
    else:
        increase = max(0, _max_rss_bytes() - max(before, max_before))
    return {"estimator": kind, "method": method, "n": n, "input_bytes": int(X.nbytes),
            "output_bytes": int(out.nbytes), "peak_increase_bytes": int(increase),
            "counter": counter, "seconds": seconds}


def run_isolated(kind: str, method: str, n: int) -> dict:
    """:func:`measure` in a fresh Python process (nothing allocated before counts)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", f"{kind}:{method}:{n}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          env=dict(os.environ))
    if proc.returncode != 0:
        raise RuntimeError(f"{kind}.{method}(N={n}) failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------ report
def summarise(row: dict) -> dict:
    """Add MiB figures and the peak-increase / output and / input ratios to a row."""
    mib = 2.0**20
    return {**row, "input_mib": row["input_bytes"] / mib, "output_mib": row["output_bytes"] / mib,
            "peak_increase_mib": row["peak_increase_bytes"] / mib,
            "ratio_to_output": row["peak_increase_bytes"] / max(row["output_bytes"], 1),
            "ratio_to_input": row["peak_increase_bytes"] / row["input_bytes"]}


def table(rows: list[dict]) -> str:
    """The results as a fixed-width text table."""
    lines = [f"{'estimator':11s} {'method':17s} {'N':>6s} {'output MiB':>10s} "
             f"{'peak +MiB':>9s} {'/output':>8s} {'/input':>7s} {'s':>6s}"]
    for r in rows:
        lines.append(f"{r['estimator']:11s} {r['method']:17s} {r['n']:6d} "
                     f"{r['output_mib']:10.1f} {r['peak_increase_mib']:9.1f} "
                     f"{r['ratio_to_output']:8.2f} {r['ratio_to_input']:7.2f} "
                     f"{r['seconds']:6.1f}")
    return "\n".join(lines)


def summary_rows(rows: list[dict]) -> list[dict]:
    """One row per (estimator, method) at the largest N measured, for the README."""
    largest = max(r["n"] for r in rows)
    out = []
    for r in rows:
        if r["n"] != largest:
            continue
        row = {"estimator": r["estimator"], "method": r["method"], "N": r["n"],
               "output MiB": round(r["output_mib"], 1),
               "peak increase MiB": round(r["peak_increase_mib"], 1),
               "peak / output": round(r["ratio_to_output"], 2),
               "peak / input": round(r["ratio_to_input"], 2)}
        if r["estimator"] == "explainable" and r["method"] == "explain":
            row["target"] = f"<= {TARGET_EXPLAIN_RATIO} x output"
            row["met"] = r["ratio_to_output"] <= TARGET_EXPLAIN_RATIO
        out.append(row)
    return out


def build_parser() -> argparse.ArgumentParser:
    """The command line: ``--quick``, ``--output``, ``--sizes`` and ``--methods``."""
    parser = bench_parser(__doc__.splitlines()[0], f"sizes {QUICK_SIZES} instead of {SIZES}")
    parser.add_argument("--sizes", type=lambda s: tuple(int(v) for v in s.split(",")),
                        default=None, help="comma-separated row counts")
    parser.add_argument("--methods", default=None,
                        help="comma-separated estimator.method, e.g. explainable.explain,st.align")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    return parser


def selected_methods(spec: str | None) -> list[tuple[str, str]]:
    """(estimator, method) pairs from ``--methods`` (all when None)."""
    pairs = [(kind, method) for kind, methods in METHODS.items() for method in methods]
    if spec is None:
        return pairs
    wanted = [tuple(item.strip().split(".", 1)) for item in spec.split(",") if item.strip()]
    unknown = [".".join(w) for w in wanted if w not in pairs]
    if unknown:
        raise SystemExit(f"unknown method(s) {', '.join(unknown)}")
    return [p for p in pairs if p in wanted]


def main(argv: list[str] | None = None) -> int:
    """Measure every (method, N) in its own process, print a table and write the JSON.

    Parameters
    ----------
    argv : list of str or None, default=None
        Arguments (``sys.argv[1:]`` when None).

    Returns
    -------
    int
        0 (a missed target is recorded in the JSON, not an error).
    """
    args = build_parser().parse_args(argv)
    if args.worker:
        kind, method, n = args.worker.split(":")
        print(json.dumps(measure(kind, method, int(n))))
        return 0
    sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    info = machine_info()
    rows = []
    methods = args.methods or (QUICK_METHODS if args.quick else None)
    for kind, method in selected_methods(methods):
        for n in sizes:
            rows.append(summarise(run_isolated(kind, method, n)))
            print(table(rows[-1:]).splitlines()[1], flush=True)
    info["load_average_end"] = load_average()
    explain = [r for r in rows if r["estimator"] == "explainable" and r["method"] == "explain"
               and r["n"] == max(sizes)]
    verdict = None
    if explain:
        verdict = {"n": explain[0]["n"], "ratio_to_output": explain[0]["ratio_to_output"],
                   "target": TARGET_EXPLAIN_RATIO,
                   "met": explain[0]["ratio_to_output"] <= TARGET_EXPLAIN_RATIO}
    print("\n" + table(rows))
    write_json(output_path(args, NAME), {
        "benchmark": f"Peak memory of inference, N x {N_FEATURES} float64 (fresh process "
                     "per call; peak resident-set increase during the call)",
        "summary": summary_rows(rows),
        "quick": args.quick, "machine": info, "n_features": N_FEATURES, "dtype": "float64",
        "fit_rows": FIT_ROWS, "estimators": ESTIMATORS, "sizes": list(sizes),
        "explain_target": verdict, "results": rows,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
