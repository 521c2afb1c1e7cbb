"""Speed and memory of SpatialTransformerKMeans, against a per-pair kornia TPS baseline.

Run ``python benchmarks/bench_st_speed.py`` (or ``python -m benchmarks --only st_speed``); it
prints a summary and writes ``benchmarks/results/st_speed.json`` with machine information and
parameters. ``--quick`` (a smoke run: ``benchmarks/results/quick/st_speed.json``) times a few
pairs, and fits and measures memory on small subsets with shortened fits (:data:`QUICK`).

1. Alignment: the warp of (MNIST sample, centroid) pairs, 28 x 28, 16 TPS landmarks, the
   same regularised energy on both sides (the estimator's):
   ``||x - S(delta) mu||^2 + lambda(x) * (warp_penalty * bending(delta) + affine_penalty *
   ||affine part of delta||^2)``, ``lambda(x) = ||x - mean(x)||^2``
   (:meth:`skxclust.nn.WarpModel.penalty_gram`).
   - ours: the estimator's warp fit (``WarpGeometry.pair_warps``, defaults: ``affine_steps``
     affine and ``coarse_steps`` full steps on the half-resolution images, the rest of the
     ``n_steps`` Levenberg–Marquardt steps at full resolution) on all pairs of
     ``batch_size`` samples x K centroids at once (TPS system inverted once), without and
     with the default screening (only the centroids within ``screen_ratio`` of a sample's
     lowest energy run the steps after ``screen_steps``);
   - baseline: a first-order per-pair fit, the way a kornia user would write it: one pair at
     a time, kornia's ``get_tps_transform`` (solves the TPS system at every step) +
     ``warp_image_tps``, ``torch.optim.Adam`` on the landmark offsets (:data:`KORNIA`), timed
     on a few pairs and extrapolated per pair.
   The energy each side reaches on the timed pairs is reported too (kornia's offsets also
   evaluated in our map), so the speed-up is not bought with a worse fit. Both warps are
   first checked to be the same map: for the same landmark offsets, ours
   (``grid = p + basis @ delta``) and kornia's TPS through the same landmarks.
2. Where the time of one pair goes (:func:`benchmarks.st_scaling.per_pair_costs`): the
   default warp fit per (sample, centroid) pair as the estimator runs it on float64 rows,
   beside its floor (one full-resolution float32 step: ``grid_sample`` forward and
   backward and the normal-equation GEMM), the coarse phase and the full-resolution phase,
   and the float64 solve (the float64 / float32 ratio).
3. The default ``fit`` on the 4,000 training rows of a stratified 4,000 / 1,000 split of
   MNIST-5k, float64 as users load it, against scikit-learn's ``KMeans(n_init=10)`` on the
   same rows in the same run (wall-time ratio), with the held-out ACC of ``predict``.
4. The same 4,000 rows plus 4 elastic copies of each (20,000 rows,
   ``skxclust.datasets.make_elastic(alpha=1.5, sigma=3.0)``): fit time over the 4,000-row
   fit's, and ACC on the 1,000 untouched held-out rows.
5. Peak memory of ``fit`` (default parameters, ``max_iter=2``) at N = 5000 vs N = 1000, each in
   a fresh process: peak resident set size during ``fit`` (the peak counter is reset after
   loading the data), and its increase over the resident size just before ``fit``.

All with ``torch.set_num_threads(2)`` (section 2 with one thread).
"""

from __future__ import annotations

import skxclust

# skxclust first, as a user's script imports it: its OpenMP spin setting applies before
# torch loads OpenMP (skxclust._openmp), so the benchmark runs what users run.
SHORT_SPIN = skxclust._openmp.SPIN_SET_BY_SKXCLUST  # False: the user chose a policy

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

if __package__ in (None, ""):  # run as a script: make the ``benchmarks`` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from benchmarks import st_scaling  # noqa: E402
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
from skxclust._shapes import resolve_n_landmarks  # noqa: E402
from skxclust.nn import make_warp_model  # noqa: E402
from skxclust.nn.pair_batch import warp_energy  # noqa: E402
from skxclust.nn.tps import control_points  # noqa: E402
from skxclust.nn.warps import warp_grids  # noqa: E402

NAME = "st_speed"
TARGETS = {"alignment_speedup": 100.0, "fit_ratio_to_kmeans": 25.0,
           "ratio_20k_to_4000": 3.0, "acc_20k": 0.91, "memory_ratio": 1.3}
_DEFAULTS = SpatialTransformerKMeans().get_params()
# Ours: the estimator's warp fit (WarpGeometry.pair_warps), with its defaults.
ALIGN = {"n_landmarks": resolve_n_landmarks(_DEFAULTS["n_landmarks"], (28, 28)), "n_clusters": 10,
         **{k: _DEFAULTS[k] for k in ("warp_penalty", "affine_penalty", "affine_steps",
                                      "n_steps", "coarse_steps", "screen_ratio",
                                      "screen_steps", "warp_dtype")},
         "damping": 1e-4 / _DEFAULTS["learning_rate"]}
# The kornia baseline: per-pair Adam on the landmark offsets, as before the LM solver.
KORNIA = {"optimizer": "torch.optim.Adam", "n_steps": 40, "learning_rate": 0.01}
# --quick: baseline pairs, batch size, fit rows, memory sizes, shortened ST parameters.
QUICK = {"baseline_pairs": 2, "batch_size": 16, "fit_rows": 500, "memory_sizes": [200, 600],
         "st_params": {"max_iter": 1, "n_steps": 5, "update_steps": 3},
         "scaling_params": {"max_iter": 1, "n_steps": 5, "subsample": 800}}
MEMORY_PARAMS = {"max_iter": 2}


def contrast(x: torch.Tensor) -> torch.Tensor:
    """``||x - mean(x)||^2`` per row: the estimator's penalty weight of a sample."""
    centred = x - x.mean(dim=-1, keepdim=True)
    return (centred * centred).sum(dim=-1)


def kornia_pair(sample, centroid, centers, gram, n_steps, lr):
    """Fit one pair with kornia's TPS and Adam (solving the TPS system at every step).

    The energy is ours: ``||x - warp(mu)||^2 + lambda(x) * vec(delta)^T G vec(delta)`` with
    ``G`` = ``model.penalty_gram`` (for ``"tps"`` the parameters are the landmark offsets).
    Returns the final energy (kornia's map) and the final offsets (L, 2).
    """
    from kornia.geometry.transform import get_tps_transform, warp_image_tps

    delta = torch.zeros(1, centers.shape[0], 2, requires_grad=True)
    opt = torch.optim.Adam([delta], lr=lr)
    src = centers[None]
    side = int(round(sample.numel() ** 0.5))
    image, target = centroid.reshape(1, 1, side, side), sample.reshape(1, 1, side, side)
    weight = float(contrast(sample))

    def energy():
        # f(c) = c + delta: the sampling grid moves landmark c to c + delta (as ours).
        kernel, affine = get_tps_transform(src, src + delta)
        warped = warp_image_tps(image, src + delta, kernel, affine, align_corners=True)
        flat = delta.reshape(-1)
        return ((warped - target) ** 2).sum() + weight * (flat @ gram @ flat)

    for _ in range(n_steps):
        loss = energy()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        return float(energy()), delta.detach()[0]


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
    centers = control_points(int(round(cfg["n_landmarks"] ** 0.5)), 2, torch.float32)
    gram = model.penalty_gram(cfg["warp_penalty"], cfg["affine_penalty"])
    Xt = torch.as_tensor(X)
    centroids = Xt[: cfg["n_clusters"] * 50 : 50].clone()
    samples = Xt[1000 : 1000 + batch_size]
    warp_check = compare_warps(model, centers)

    kornia_pair(samples[0], centroids[0], centers, gram, 2,
                KORNIA["learning_rate"])  # warm-up (imports, first calls), as for ours below
    t0 = time.perf_counter()
    kornia_energy, kornia_delta = [], []
    pairs = [(i % batch_size, i % cfg["n_clusters"]) for i in range(n_baseline_pairs)]
    for i, k in pairs:
        e, d = kornia_pair(samples[i], centroids[k], centers, gram, KORNIA["n_steps"],
                           KORNIA["learning_rate"])
        kornia_energy.append(e)
        kornia_delta.append(d)
    kornia_per_pair = (time.perf_counter() - t0) / n_baseline_pairs

    def geometry(**params):
        """The estimator's warp fits (defaults but ``params``) for these samples."""
        return SpatialTransformerKMeans(cfg["n_clusters"], batch_size=batch_size,
                                        **params)._make_geometry(784)

    def ours(screen: bool):
        fits = geometry(screen_ratio=cfg["screen_ratio"] if screen else None)
        fits.pair_warps(samples[:4], centroids)
        t = time.perf_counter()  # after a warm-up on 4 samples
        energies, _ = fits.pair_warps(samples, centroids)
        return (time.perf_counter() - t) / (batch_size * cfg["n_clusters"]), energies

    ours_per_pair, energies = ours(screen=False)
    screened_per_pair, screened = ours(screen=True)
    rows, cols = torch.tensor([i for i, _ in pairs]), torch.tensor([k for _, k in pairs])
    ours_same = energies[rows, cols].double()
    ours_screened_same = screened[rows, cols].double()
    kornia_same = torch.tensor(kornia_energy, dtype=torch.float64)
    # kornia's fitted offsets in our map (the same energy function as ours, exactly)
    delta = torch.stack(kornia_delta)[:, None]  # (n, 1, L, 2)
    kornia_in_ours = torch.stack([
        warp_energy(samples[i][None], centroids[k][None], model, delta[j][None],
                    contrast(samples[i][None]), cfg["warp_penalty"], cfg["affine_penalty"])[0, 0]
        for j, (i, k) in enumerate(pairs)]).double()
    identity = ((samples[rows] - centroids[cols]) ** 2).sum(1).double()
    # Convergence of ours: the same unscreened fit with every step count doubled (not timed)
    doubled, _ = geometry(screen_ratio=None, **{k: 2 * cfg[k] for k in (
        "n_steps", "affine_steps", "coarse_steps", "screen_steps")}).pair_warps(samples,
                                                                              centroids)
    doubled_same = doubled[rows, cols].double()

    def at_or_below(theirs):
        return int((ours_same <= theirs * (1 + 1e-5)).sum())

    def mean(t):
        return float(t.mean())

    return {
        "config": {"image": [28, 28], "n_landmarks": cfg["n_landmarks"],
                   "n_clusters": cfg["n_clusters"], "batch_size": batch_size,
                   "baseline_pairs_timed": n_baseline_pairs,
                   "energy": "||x - S(delta) mu||^2 + ||x - mean x||^2 * (warp_penalty * "
                             "bending energy + affine_penalty * ||affine part||^2)",
                   "warp_penalty": cfg["warp_penalty"], "affine_penalty": cfg["affine_penalty"],
                   "ours": {"solver": "the estimator's WarpGeometry.pair_warps "
                                      "(Levenberg-Marquardt, coarse to fine), all pairs "
                                      "of a chunk at once",
                            **{k: cfg[k] for k in ("affine_steps", "n_steps", "damping",
                                                   "coarse_steps", "screen_ratio",
                                                   "screen_steps", "warp_dtype")}},
                   "kornia": {"solver": "first-order per-pair fit, one pair at a time, as a "
                                        "kornia user would write it: get_tps_transform + "
                                        "warp_image_tps, Adam on the landmark offsets",
                              **KORNIA}},
        "kornia_vs_ours_same_offsets": warp_check,
        "kornia_seconds_per_pair": kornia_per_pair,
        "ours_seconds_per_pair": ours_per_pair,
        "ours_screened_seconds_per_pair": screened_per_pair,
        "speedup": kornia_per_pair / ours_per_pair,
        "speedup_screened": kornia_per_pair / screened_per_pair,
        "energy_on_timed_pairs": {
            "n_pairs": len(pairs),
            "mean_identity": mean(identity),
            "mean_kornia": mean(kornia_same),
            "mean_kornia_offsets_in_our_map": mean(kornia_in_ours),
            "mean_ours": mean(ours_same),
            "mean_ours_screened": mean(ours_screened_same),
            "mean_ours_double_steps": mean(doubled_same),
            "pairs_ours_at_or_below_kornia": at_or_below(kornia_same),
            "pairs_ours_at_or_below_kornia_offsets_in_our_map": at_or_below(kornia_in_ours),
            "max_ours_over_kornia": float((ours_same / kornia_same).max()),
            "max_relative_drop_double_steps": float(((ours_same - doubled_same)
                                                     / ours_same).max()),
        },
    }


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
        "params": st_scaling.described({"random_state": 0, **(QUICK["st_params"] if quick
                                                               else MEMORY_PARAMS)}),
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
    parser.add_argument("--skip-per-pair", action="store_true")
    parser.add_argument("--skip-fit", action="store_true",
                        help="skip the 4,000-row and the 20,000-row fits")
    parser.add_argument("--skip-20k", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
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
    X_train, X_test, y_train, y_test = st_scaling.mnist_split(
        *((X[:QUICK["fit_rows"] + 200], y[:QUICK["fit_rows"] + 200]) if args.quick
          else (X, y)), n_test=200 if args.quick else 1000)
    if not args.skip_per_pair:
        result["per_pair"] = {"recorded_at": info["date_utc"], **st_scaling.per_pair_costs(
            X_train, batch_size=args.batch_size, repeats=1 if args.quick else 3)}
        print(json.dumps(result["per_pair"], indent=1), flush=True)
    params = QUICK["scaling_params"] if args.quick else None
    if not args.skip_fit:
        result["fit_4000"] = {"recorded_at": info["date_utc"], **st_scaling.fit_against_kmeans(
            X_train, y_train, X_test, y_test, params=params)}
        result.pop("fit_mnist5k", None)  # the full-data fit of earlier versions
        print(json.dumps(result["fit_4000"], indent=1), flush=True)
        if not args.skip_20k:
            result["fit_20000"] = {"recorded_at": info["date_utc"],
                                   **st_scaling.fit_elastic_20k(
                                       X_train, X_test, y_test,
                                       result["fit_4000"]["seconds"], params=params)}
            print(json.dumps(result["fit_20000"], indent=1), flush=True)
    if not args.skip_memory:
        sizes = QUICK["memory_sizes"] if args.quick else (1000, 5000)
        result["memory"] = {"recorded_at": info["date_utc"],
                            **bench_memory(sizes, args.quick)}
        print(json.dumps(result["memory"], indent=1), flush=True)
    info["load_average_end"] = load_average()
    result.pop("load_average_at_end", None)  # older files kept it outside "machine"
    result["sections_run"] = [k for k, skip in (
        ("alignment", args.skip_alignment), ("per_pair", args.skip_per_pair),
        ("fit_4000", args.skip_fit), ("fit_20000", args.skip_fit or args.skip_20k),
        ("memory", args.skip_memory)) if not skip]
    write_json(output, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
