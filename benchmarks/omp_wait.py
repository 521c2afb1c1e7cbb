"""OpenMP spin-wait stalls: an ST K-means fit on 2 torch threads, idle vs. next to a busy process.

``python benchmarks/omp_wait.py [--repeats 3] [--timeout 300] [--output FILE]``

Each run is a fresh process that fits ``SpatialTransformerKMeans(n_clusters=10,
random_state=0)`` (defaults) on scikit-learn's digits with ``torch.set_num_threads(2)``,
with ``OMP_WAIT_POLICY`` and ``GOMP_SPINCOUNT`` removed from its environment, in two orders
of import:

- ``torch first``: ``import torch`` before ``import skxclust``, so libgomp keeps its own
  default (idle threads spin before they sleep): what every user had before skxclust
  set the policy, and what a user who imports torch first still gets;
- ``skxclust first``: skxclust sets ``GOMP_SPINCOUNT=3000`` (a short spin) before torch
  loads.

Each order runs alone and next to one competing busy process (``while True: pass``), the
configurations interleaved. Wall and CPU seconds (user + system) of every fit are
printed, with the medians. Not part of ``python -m benchmarks`` (it is not a
``bench_*.py`` module): the numbers depend on what else the machine runs, so say how busy
it was when you quote them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

FIT = """
import os, time
{imports}
torch.set_num_threads(2)
from sklearn.datasets import load_digits
X = load_digits().data
t0, c0 = time.perf_counter(), os.times()
skxclust.SpatialTransformerKMeans(n_clusters=10, random_state=0).fit(X)
c1 = os.times()
print(time.perf_counter() - t0, (c1.user - c0.user) + (c1.system - c0.system),
      os.environ.get("OMP_WAIT_POLICY"), os.environ.get("GOMP_SPINCOUNT"))
"""
ORDERS = {
    "torch first": "import torch\nimport skxclust",
    "skxclust first": "import skxclust\nimport torch",
}


def run_fit(order: str, timeout: float) -> dict:
    """One fit in a fresh process; wall and CPU seconds (None when it timed out)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    code = FIT.format(imports=ORDERS[order])
    try:
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=timeout, check=True).stdout.split()
    except subprocess.TimeoutExpired:
        return {"wall_s": None, "cpu_s": None, "policy": None}
    return {"wall_s": float(out[0]), "cpu_s": float(out[1]), "policy": out[2],
            "spin_count": out[3]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds before a fit is given up (counted as a timeout)")
    parser.add_argument("--output", default=None, help="also write the runs as JSON here")
    args = parser.parse_args(argv)
    runs = []
    load_start = os.getloadavg()[0]
    for repeat in range(args.repeats):
        for busy in (False, True):
            for order in ORDERS:
                hog = (subprocess.Popen([sys.executable, "-c", "while True: pass"])
                       if busy else None)
                try:
                    time.sleep(0.5 if busy else 0.0)
                    result = run_fit(order, args.timeout)
                finally:
                    if hog is not None:
                        hog.kill()
                        hog.wait()
                result.update(order=order, busy=busy, repeat=repeat)
                runs.append(result)
                print(json.dumps(result), flush=True)
    print(f"load average (1 min): {load_start:.2f} at the start, "
          f"{os.getloadavg()[0]:.2f} at the end")
    print("| import order | competing busy process | wall s, median (min-max) | CPU s median |")
    print("|---|---|---|---|")
    for busy in (False, True):
        for order in ORDERS:
            sel = [r for r in runs if r["order"] == order and r["busy"] == busy]
            wall = [r["wall_s"] for r in sel if r["wall_s"] is not None]
            cpu = [r["cpu_s"] for r in sel if r["cpu_s"] is not None]
            timeouts = len(sel) - len(wall)
            span = (f"{statistics.median(wall):.1f} ({min(wall):.1f}-{max(wall):.1f})"
                    if wall else "-")
            if timeouts:
                span += f", {timeouts} over {args.timeout:.0f} s"
            cpu_s = f"{statistics.median(cpu):.1f}" if cpu else "-"
            print(f"| {order} | {'yes' if busy else 'no'} | {span} | {cpu_s} |")
    if args.output:
        with open(args.output, "w") as fh:
            json.dump({"runs": runs, "load_start": load_start,
                       "load_end": os.getloadavg()[0]}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
