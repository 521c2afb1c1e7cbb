"""Speed and memory of SpatialTransformerKMeans, against a per-pair kornia TPS baseline.

Run ``python benchmarks/bench_st_speed.py`` (or ``python -m benchmarks --only st_speed``); it
prints a summary and writes ``benchmarks/results/st_speed.json`` with machine information and
parameters. ``--quick`` (a smoke run: ``benchmarks/results/quick/st_speed.json``) times a few
pairs, and fits and measures memory on small subsets with shortened fits (:data:`QUICK`).

1. Alignment step: warp optimisation of (MNIST sample, centroid) pairs, 28 x 28, 16 TPS
   landmarks, the same Adam steps, learning rate and penalty on both sides.
   - baseline: one pair at a time with kornia's ``get_tps_transform`` (solves the TPS system
     at every step) + ``warp_image_tps`` and ``torch.optim.Adam`` (timed on a few pairs,
     extrapolated per pair);
   - ours: :func:`skxclust.nn.optimize_warps` on all pairs of ``batch_size`` samples x K
     centroids at once (TPS system inverted once), every pair running every step; and with
     the estimator's default screening (only the 3 best centroids of a sample run all steps).
   Both warps are checked to be the same map first.
2. Full ``fit`` of the default estimator on MNIST-5k (10 clusters), wall time.
3. Peak memory of ``fit`` (default parameters, ``max_iter=2``) at N = 5000 vs N = 1000, each in
   a fresh process: peak resident set size during ``fit`` (the peak counter is reset after
   loading the data), and its increase over the resident size just before ``fit``.

All with ``torch.set_num_threads(2)``.
"""

from __future__ import annotations

import os

# Before torch loads OpenMP: idle workers sleep instead of spinning (see _common).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

if __package__ in (None, ""):  # run as a script: make the ``benchmarks`` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from benchmarks._common import (  # noqa: E402
    bench_parser,
    load_average,
    load_mnist5k,
    machine_info,
    output_path,
    read_json,
    set_threads,
    write_json,
)
from skxclust import SpatialTransformerKMeans  # noqa: E402
from skxclust.metrics import clustering_accuracy  # noqa: E402
from skxclust.nn import control_points, make_warp_model, optimize_warps, warp_grids  # noqa: E402

NAME = "st_speed"
TARGETS = {"alignment_speedup": 10.0, "fit_seconds": 300.0, "memory_ratio": 1.3}
ALIGN = {"n_landmarks": 16, "n_steps": 40, "learning_rate": 0.01, "penalty": 0.05,
         "n_clusters": 10}
# --quick: baseline pairs, batch size, fit rows, memory sizes, shortened ST parameters.
QUICK = {"baseline_pairs": 2, "batch_size": 16, "fit_rows": 500, "memory_sizes": [200, 600],
         "st_params": {"max_iter": 1, "n_steps": 10, "update_steps": 3}}
MEMORY_PARAMS = {"max_iter": 2}


def kornia_pair(sample, centroid, centers, n_steps, lr, penalty):
    """Optimise one pair with kornia's TPS, solving the TPS system at every step."""
    from kornia.geometry.transform import get_tps_transform, warp_image_tps

    delta = torch.zeros(1, centers.shape[0], 2, requires_grad=True)
    opt = torch.optim.Adam([delta], lr=lr)
    src = centers[None]
    side = int(round(sample.numel() ** 0.5))
    image, target = centroid.reshape(1, 1, side, side), sample.reshape(1, 1, side, side)
    for _ in range(n_steps):
        # f(c) = c + delta: the sampling grid moves landmark c to c + delta (as ours).
        kernel, affine = get_tps_transform(src, src + delta)
        warped = warp_image_tps(image, src + delta, kernel, affine, align_corners=True)
        loss = ((warped - target) ** 2).sum() + penalty * (delta**2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        kernel, affine = get_tps_transform(src, src + delta)
        warped = warp_image_tps(image, src + delta, kernel, affine, align_corners=True)
        return float(((warped - target) ** 2).sum() + penalty * (delta**2).sum())


def compare_warps(model, centers, scale=0.05) -> dict:
    """Sampling grids of kornia's TPS and ours for the same landmark offsets.

    Both send landmark c to c + delta. Between landmarks they differ to second order:
    kornia centres its kernels on the displaced landmarks, ours on the rest positions.
    """
    from kornia.geometry.transform import get_tps_transform, warp_points_tps

    gen = torch.Generator().manual_seed(0)
    delta = scale * torch.randn(3, centers.shape[0], 2, generator=gen, dtype=torch.float64)
    src = centers.to(torch.float64).expand(3, -1, -1)
    kernel, affine = get_tps_transform(src, src + delta)
    points = model.points.to(torch.float64).expand(3, -1, -1)
    theirs = warp_points_tps(points, src + delta, kernel, affine)
    model64 = make_warp_model(model.shape, centers.shape[0], "tps", torch.float64)
    ours = warp_grids(model64, delta).reshape(3, -1, 2)
    at_landmarks = warp_points_tps(src, src + delta, kernel, affine)
    return {"offset_scale": scale,
            "max_grid_difference_at_landmarks": float((at_landmarks - src - delta).abs().max()),
            "max_grid_difference_in_pixels": float((theirs - ours).abs().max()
                                                   * (model.shape[1] - 1) / 2)}


def bench_alignment(X, n_baseline_pairs, batch_size) -> dict:
    cfg = ALIGN
    model = make_warp_model((28, 28), cfg["n_landmarks"], "tps", torch.float32)
    centers = control_points(4, 2, torch.float32)
    Xt = torch.as_tensor(X)
    centroids = Xt[: cfg["n_clusters"] * 50 : 50].clone()
    samples = Xt[1000 : 1000 + batch_size]
    warp_check = compare_warps(model, centers)

    kornia_pair(samples[0], centroids[0], centers, 2, cfg["learning_rate"],
                cfg["penalty"])  # warm-up (imports, first calls), as for ours below
    t0 = time.perf_counter()
    kornia_losses = []
    pairs = [(i % batch_size, i % cfg["n_clusters"]) for i in range(n_baseline_pairs)]
    for i, k in pairs:
        kornia_losses.append(kornia_pair(samples[i], centroids[k], centers, cfg["n_steps"],
                                         cfg["learning_rate"], cfg["penalty"]))
    kornia_per_pair = (time.perf_counter() - t0) / n_baseline_pairs

    def ours(**kw):
        optimize_warps(samples[:4], centroids, model, n_steps=2)  # warm-up
        t = time.perf_counter()
        losses, _ = optimize_warps(samples, centroids, model, n_steps=cfg["n_steps"],
                                   learning_rate=cfg["learning_rate"],
                                   penalty=cfg["penalty"], **kw)
        return (time.perf_counter() - t) / (batch_size * cfg["n_clusters"]), losses

    ours_per_pair, losses = ours()
    screened_per_pair, _ = ours(n_candidates=3, screen_steps=cfg["n_steps"] // 4)
    ours_same = [float(losses[i, k]) for i, k in pairs]
    return {
        "config": {**cfg, "image": [28, 28], "batch_size": batch_size,
                   "baseline_pairs_timed": n_baseline_pairs},
        "kornia_vs_ours_same_offsets": warp_check,
        "kornia_seconds_per_pair": kornia_per_pair,
        "ours_seconds_per_pair": ours_per_pair,
        "ours_screened_seconds_per_pair": screened_per_pair,
        "speedup": kornia_per_pair / ours_per_pair,
        "speedup_screened": kornia_per_pair / screened_per_pair,
        "mean_final_loss_kornia": float(np.mean(kornia_losses)),
        "mean_final_loss_ours_same_pairs": float(np.mean(ours_same)),
    }


def _described(params: dict) -> str:
    return ", ".join(["defaults, n_clusters=10, random_state=0",
                      *(f"{k}={v}" for k, v in params.items())])


def bench_fit(X, y, **params) -> dict:
    est = SpatialTransformerKMeans(n_clusters=10, random_state=0, verbose=1, **params)
    t0 = time.perf_counter()
    est.fit(X)
    seconds = time.perf_counter() - t0
    described = _described(params)
    return {"n_samples": int(X.shape[0]), "params": described,
            "seconds": seconds, "n_iter": int(est.n_iter_),
            "mean_seconds_per_iteration_including_init": seconds / est.n_iter_,
            "accuracy": float(clustering_accuracy(y, est.labels_))}


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def memory_child(n: int, params: dict) -> None:
    """Run in a fresh process: fit on n samples and print the memory figures as JSON.

    The kernel's peak-RSS counter is reset after the data are loaded (``clear_refs``), so
    the peak is that of ``fit`` alone (the baseline of the process included).
    """
    set_threads()
    X, _ = load_mnist5k(n)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _status_kib("VmRSS") * 1024
    SpatialTransformerKMeans(n_clusters=10, random_state=0, **params).fit(X)
    peak = _status_kib("VmHWM") * 1024
    print(json.dumps({"n_samples": n, "rss_before_fit": before, "peak_rss_during_fit": peak}))


def bench_memory(sizes=(1000, 5000), quick: bool = False) -> dict:
    out = {}
    for n in sizes:
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--memory-child",
                               str(n), *(["--quick"] if quick else [])],
                              capture_output=True, text=True, check=True)
        out[n] = json.loads(proc.stdout.strip().splitlines()[-1])
    small, large = out[sizes[0]], out[sizes[1]]
    inc = {n: v["peak_rss_during_fit"] - v["rss_before_fit"] for n, v in out.items()}
    return {
        "runs": list(out.values()),
        "params": _described(QUICK["st_params"] if quick else MEMORY_PARAMS),
        "peak_rss_ratio": large["peak_rss_during_fit"] / small["peak_rss_during_fit"],
        "fit_increase_ratio": inc[sizes[1]] / inc[sizes[0]],
        "fit_increase_mib": {str(n): v / 2**20 for n, v in inc.items()},
        "data_mib": {str(n): n * 784 * 4 / 2**20 for n in sizes},
    }


def build_parser():
    """The command line: ``--quick``, ``--output`` and the section switches."""
    parser = bench_parser(__doc__.splitlines()[0], f"small sizes: {QUICK}")
    parser.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--baseline-pairs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--skip-alignment", action="store_true")
    parser.add_argument("--skip-fit", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print its sections and write its JSON; returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.memory_child:
        memory_child(args.memory_child, QUICK["st_params"] if args.quick else MEMORY_PARAMS)
        return 0
    output = output_path(args, NAME)
    if args.quick:
        args.baseline_pairs, args.batch_size = QUICK["baseline_pairs"], QUICK["batch_size"]
    set_threads()
    info = machine_info()
    X, y = load_mnist5k()
    # A partial run keeps the sections it skips from the previous results file.
    previous = read_json(output)
    result = previous if previous.get("quick", False) == args.quick else {}
    result.update({"quick": args.quick, "machine": info, "targets": TARGETS})
    if args.quick:
        result["quick_settings"] = QUICK
    if not args.skip_alignment:
        result["alignment"] = {"recorded_at": info["date_utc"],
                               **bench_alignment(X, args.baseline_pairs, args.batch_size)}
        print(json.dumps(result["alignment"], indent=1), flush=True)
    if not args.skip_fit:
        if args.quick:
            fit = bench_fit(*load_mnist5k(QUICK["fit_rows"]), **QUICK["st_params"])
        else:
            fit = bench_fit(X, y)
        result["fit_mnist5k"] = {"recorded_at": info["date_utc"], **fit}
        print(json.dumps(result["fit_mnist5k"], indent=1), flush=True)
    sizes = QUICK["memory_sizes"] if args.quick else (1000, 5000)
    result["memory"] = {"recorded_at": info["date_utc"], **bench_memory(sizes, args.quick)}
    print(json.dumps(result["memory"], indent=1), flush=True)
    info["load_average_end"] = load_average()
    result.pop("load_average_at_end", None)  # older files kept it outside "machine"
    result["sections_run"] = [k for k, skip in (("alignment", args.skip_alignment),
                                                ("fit_mnist5k", args.skip_fit)) if not skip]
    result["sections_run"].append("memory")
    write_json(output, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
