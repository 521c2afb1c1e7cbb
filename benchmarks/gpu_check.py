"""One-command GPU check: CUDA tests, CPU vs CUDA timings and agreement, portable pickles.

``python benchmarks/gpu_check.py --output benchmarks/results/gpu.json`` on a CUDA machine
(about 3 to 8 minutes; the CPU side dominates):

1. runs the CUDA-marked tests (``pytest -m cuda tests``);
2. times ``fit``, ``predict`` and ``explain`` of both estimators on MNIST-5k (float32) on
   the CPU and on the GPU in one process: ExplainableKMeans on all 5000 images, ST K-means
   on a stratified 1000-image subset (``max_iter=10``, other parameters default: float32
   warp fits, the half-resolution coarse level and ratio screening);
3. checks that CPU and GPU agree: adjusted Rand index of the two fits' labels, and the
   labels of one model predicted on either device; that ``explain`` on the GPU conserves
   (rows sum to the explained evidence); and that the GPU-fitted models unpickle and predict
   in a fresh process where CUDA is hidden (``CUDA_VISIBLE_DEVICES=""``);
4. measures the speed targets of ``bench_explainable`` with ``explain`` on the device, in
   float64 as there: ``explain`` time / ``predict`` time, and the per-sample NEON loop
   (numpy, on the CPU, 300 images) time / ``explain`` time per sample (reported with their
   targets, not counted as checks);
5. writes the figures, the checks and the machine to the JSON file.

Without CUDA it prints that it was skipped, writes nothing and exits 0. ``--dry-run`` runs
the whole sequence on small data (MNIST 1000 / 200 images, ``max_iter=2``) with the CPU
standing in for the GPU when CUDA is missing, and writes only with ``--output``;
``--device cpu`` does the same at full size. The exit status is 1 when a test or a check
fails.
"""

from __future__ import annotations

import skxclust

# skxclust first, as a user's script imports it: its OpenMP spin setting applies before
# torch loads OpenMP (skxclust._openmp), so the benchmark runs what users run.
SHORT_SPIN = skxclust._openmp.SPIN_SET_BY_SKXCLUST  # False: the user chose a policy

import argparse  # noqa: E402
import os  # noqa: E402
import pickle  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

if __package__ in (None, ""):  # run as a script: make the ``benchmarks`` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.metrics import adjusted_rand_score  # noqa: E402

from benchmarks._common import (  # noqa: E402
    ROOT,
    load_average,
    machine_info,
    write_json,
)
from skxclust import ExplainableKMeans, SpatialTransformerKMeans  # noqa: E402
from skxclust.datasets import load_mnist_5k, stratified_subset  # noqa: E402

SIZES = {"full": {"explainable": 5000, "st": 1000}, "dry": {"explainable": 1000, "st": 200}}
ST_MAX_ITER = {"full": 10, "dry": 2}
# Pass marks: one model predicts the same labels on both devices; two fits (float32
# rounding differs) find nearly the same partition; explain conserves to float32 rounding.
MIN_PREDICT_AGREEMENT = 0.999
MIN_FIT_ARI = 0.8
MAX_CONSERVATION_ERROR = 1e-4
TEST_TIMEOUT_S = 300

LOAD_WITHOUT_CUDA = """
import pickle, sys
import numpy as np
import torch
est = pickle.load(open(sys.argv[1], "rb"))
X = np.load(sys.argv[2])
np.save(sys.argv[3], est.set_params(device="cpu").predict(X))
print(torch.cuda.is_available())
"""


def build_parser() -> argparse.ArgumentParser:
    """The command line: ``--output``, ``--device``, ``--dry-run`` and ``--skip-tests``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=None,
                        help="JSON file to write (default: benchmarks/results/gpu.json; "
                             "with --dry-run nothing unless given)")
    parser.add_argument("--device", default="cuda",
                        help="the device compared with the CPU (default: cuda)")
    parser.add_argument("--dry-run", action="store_true",
                        help="small data; the CPU stands in for a missing GPU")
    parser.add_argument("--skip-tests", action="store_true",
                        help="do not run the CUDA-marked tests")
    return parser


def resolve_target(args) -> str | None:
    """The device to compare with the CPU, or None when the check must be skipped."""
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        return "cpu" if args.dry_run else None
    return str(device)


# ----------------------------------------------------------------------------- steps
def run_cuda_tests() -> dict:
    """``pytest -m cuda tests`` in a subprocess: exit status, summary line and seconds."""
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider",
           "tests"]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                              timeout=TEST_TIMEOUT_S, check=False)
        lines = proc.stdout.strip().splitlines()
        summary = next((ln for ln in reversed(lines)
                        if re.search(r"passed|failed|skipped|error|deselected", ln)), "")
        status, tail = proc.returncode, "\n".join(lines[-30:])
    except subprocess.TimeoutExpired:
        summary, status, tail = f"timed out after {TEST_TIMEOUT_S} s", -1, ""
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|error|errors)",
                                               summary)}
    print(f"pytest -m cuda: {summary.strip('= ')}", flush=True)
    result = {"command": "pytest -m cuda tests", "exit_status": status,
              "summary": summary.strip("= "), "counts": counts,
              "seconds": time.perf_counter() - start}
    if status not in (0, 5):  # 5: nothing collected
        result["output_tail"] = tail
    return result


def _timed(call):
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    out = call()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return out, time.perf_counter() - start


def make(kind: str, device: str, mode: str):
    """The estimator timed for ``kind`` on ``device``."""
    if kind == "explainable":
        return ExplainableKMeans(n_clusters=10, random_state=0, device=device)
    return SpatialTransformerKMeans(n_clusters=10, random_state=0, device=device,
                                    max_iter=ST_MAX_ITER[mode])


def conservation_error(est, X, relevance, labels) -> float:
    """max |sum_i R_i - f_c(x)| / mean |f_c(x)| for the assigned clusters."""
    f = est.decision_function(X)[np.arange(len(X)), labels].astype(np.float64)
    sums = relevance.astype(np.float64).sum(axis=1)
    return float(np.abs(sums - f).max() / max(np.abs(f).mean(), np.finfo(np.float64).tiny))


def time_one(kind: str, X: np.ndarray, device: str, mode: str) -> tuple[dict, object]:
    """Fit, predict and explain on ``device`` (after a small warm-up); figures and model."""
    make(kind, device, mode).set_params(max_iter=1).fit(X[:100]).predict(X[:100])  # warm-up
    est = make(kind, device, mode)
    _, fit_s = _timed(lambda: est.fit(X))
    labels, predict_s = _timed(lambda: est.predict(X))
    relevance, explain_s = _timed(lambda: est.explain(X))
    figures = {"fit_seconds": fit_s, "predict_seconds": predict_s, "explain_seconds": explain_s,
               "n_iter": int(est.n_iter_), "inertia": float(est.inertia_),
               "explain_conservation_error": conservation_error(est, X, relevance, labels)}
    print(f"  {kind:11s} {device:7s} fit {fit_s:7.2f} s  predict {predict_s:6.2f} s  "
          f"explain {explain_s:6.2f} s  conservation {figures['explain_conservation_error']:.1e}",
          flush=True)
    return figures, est


def loads_without_cuda(est, X) -> dict:
    """Pickle ``est``, load it in a process with CUDA hidden and predict there on the CPU."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        with open(tmp / "model.pkl", "wb") as f:
            pickle.dump(est, f)
        np.save(tmp / "X.npy", X)
        proc = subprocess.run(
            [sys.executable, "-c", LOAD_WITHOUT_CUDA, str(tmp / "model.pkl"),
             str(tmp / "X.npy"), str(tmp / "labels.npy")],
            env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, capture_output=True, text=True,
            check=False, timeout=600)
        if proc.returncode != 0:
            return {"loaded": False, "error": proc.stderr.strip().splitlines()[-1:]}
        labels = np.load(tmp / "labels.npy")
    agreement = float(np.mean(labels == est.predict(X)))
    return {"loaded": True, "cuda_visible_in_loader": proc.stdout.strip() == "True",
            "predict_agreement_with_original": agreement}


def compare(kind: str, X: np.ndarray, target: str, mode: str) -> dict:
    """CPU and ``target`` figures for one estimator, their agreement and portability."""
    cpu, cpu_est = time_one(kind, X, "cpu", mode)
    dev, dev_est = time_one(kind, X, target, mode)
    model_on_cpu = dev_est.set_params(device="cpu").predict(X)
    dev_est.set_params(device=target)
    return {
        "n_samples": int(X.shape[0]), "params": dev_est.get_params(),
        "cpu": cpu, "device": dev,
        "speedup": {k: cpu[f"{k}_seconds"] / max(dev[f"{k}_seconds"], 1e-9)
                    for k in ("fit", "predict", "explain")},
        "fit_labels_ari_cpu_vs_device": float(adjusted_rand_score(cpu_est.labels_,
                                                                  dev_est.labels_)),
        "same_model_predict_agreement_cpu_vs_device": float(
            np.mean(model_on_cpu == dev_est.predict(X))),
        "pickle_load_without_cuda": loads_without_cuda(dev_est, X[:500]),
    }


def explain_targets(X: np.ndarray, target: str, n_loop: int) -> dict:
    """``bench_explainable``'s explain targets with ``explain`` on ``target`` (float64)."""
    from benchmarks.bench_explainable import TARGETS, neon_loop

    X = np.ascontiguousarray(X, dtype=np.float64)
    est = ExplainableKMeans(n_clusters=10, n_init=10, random_state=0, device=target).fit(X)
    est.explain(X[:100])  # warm-up
    explain_s = min(_timed(lambda: est.explain(X))[1] for _ in range(5))
    predict_s = min(_timed(lambda: est.predict(X))[1] for _ in range(5))
    subset = X[np.random.default_rng(0).choice(len(X), size=min(n_loop, len(X)),
                                               replace=False)]
    reference, loop_s = _timed(lambda: neon_loop(subset, est.cluster_centers_, est.beta_))
    loop_per_sample = loop_s / len(subset)
    speedup = loop_per_sample / (explain_s / len(X))
    ratio = explain_s / predict_s
    return {"n_samples": int(len(X)), "explain_seconds": explain_s,
            "predict_seconds": predict_s, "explain_vs_predict": ratio,
            "explain_vs_predict_met": bool(ratio <= TARGETS["explain_vs_predict"]),
            "loop_per_sample_seconds": loop_per_sample, "loop_speedup": speedup,
            "loop_speedup_met": bool(speedup >= TARGETS["loop_speedup"]),
            "max_abs_diff_vs_loop": float(np.abs(est.explain(subset) - reference).max())}


def checks_of(result: dict) -> dict:
    """Named pass/fail checks of a run."""
    checks = {}
    tests = result.get("cuda_tests")
    if tests is not None:
        checks["cuda_tests_pass"] = tests["exit_status"] in (0, 5)
    for kind in ("explainable", "st"):
        r = result[kind]
        checks[f"{kind}_fit_ari"] = r["fit_labels_ari_cpu_vs_device"] >= MIN_FIT_ARI
        checks[f"{kind}_predict_agreement"] = (
            r["same_model_predict_agreement_cpu_vs_device"] >= MIN_PREDICT_AGREEMENT)
        checks[f"{kind}_explain_conserves_on_device"] = (
            r["device"]["explain_conservation_error"] <= MAX_CONSERVATION_ERROR)
        portable = r["pickle_load_without_cuda"]
        checks[f"{kind}_pickle_loads_without_cuda"] = bool(
            portable["loaded"] and not portable["cuda_visible_in_loader"]
            and portable["predict_agreement_with_original"] >= MIN_PREDICT_AGREEMENT)
    return checks


def summary_rows(result: dict) -> list[dict]:
    """One row per estimator: samples, times on both devices, speed-ups and agreement."""
    rows = []
    for kind in ("explainable", "st"):
        r = result[kind]
        row = {"estimator": kind, "samples": r["n_samples"]}
        for step in ("fit", "predict", "explain"):
            row[f"{step} s (cpu / device)"] = (f"{r['cpu'][f'{step}_seconds']:.3g} / "
                                               f"{r['device'][f'{step}_seconds']:.3g}")
        row["fit ARI cpu vs device"] = round(r["fit_labels_ari_cpu_vs_device"], 4)
        row["explain conservation on device"] = float(
            f"{r['device']['explain_conservation_error']:.2g}")
        row["checks"] = all(ok for name, ok in result["checks"].items()
                            if name.startswith(kind))
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the check (or report that it is skipped).

    Parameters
    ----------
    argv : list of str or None, default=None
        Arguments (``sys.argv[1:]`` when None).

    Returns
    -------
    int
        0 when skipped or when every test and check passed, 1 otherwise.
    """
    args = build_parser().parse_args(argv)
    target = resolve_target(args)
    if target is None:
        print(f"gpu_check: skipped, CUDA is not available (torch {torch.__version__}); "
              "nothing written. Use --dry-run or --device cpu to exercise the script.")
        return 0
    mode = "dry" if args.dry_run else "full"
    output = args.output
    if output is None and not args.dry_run:
        output = ROOT / "benchmarks" / "results" / "gpu.json"
    start = time.perf_counter()
    info = machine_info()
    result = {"benchmark": f"CPU vs {target}, MNIST-5k float32 (benchmarks/gpu_check.py)",
              "quick": args.dry_run, "mode": mode, "target_device": target, "machine": info,
              "dtype": "float32", "thresholds": {
                  "min_predict_agreement": MIN_PREDICT_AGREEMENT, "min_fit_ari": MIN_FIT_ARI,
                  "max_conservation_error": MAX_CONSERVATION_ERROR}}
    if not args.skip_tests:
        result["cuda_tests"] = run_cuda_tests()
    X_all, y_all = load_mnist_5k()
    for kind in ("explainable", "st"):
        n = SIZES[mode][kind]
        X = X_all if n == len(X_all) else stratified_subset(X_all, y_all, n, random_state=0)[0]
        print(f"{kind}: {n} MNIST images, cpu vs {target}", flush=True)
        result[kind] = compare(kind, np.ascontiguousarray(X, dtype=np.float32), target, mode)
        if kind == "explainable":
            X_explainable = X
    print(f"explain targets of bench_explainable on {target} (float64) ...", flush=True)
    result["explain_targets_float64"] = explain_targets(X_explainable, target,
                                                        n_loop=50 if args.dry_run else 300)
    result["checks"] = checks_of(result)
    result["summary"] = summary_rows(result)
    result["seconds"] = time.perf_counter() - start
    info["load_average_end"] = load_average()
    failed = [name for name, ok in result["checks"].items() if not ok]
    for kind in ("explainable", "st"):
        r = result[kind]
        print(f"{kind}: speedup fit {r['speedup']['fit']:.1f}x, predict "
              f"{r['speedup']['predict']:.1f}x, explain {r['speedup']['explain']:.1f}x; "
              f"fit ARI {r['fit_labels_ari_cpu_vs_device']:.3f}")
    t = result["explain_targets_float64"]
    print(f"explain on {target} (float64): explain/predict {t['explain_vs_predict']:.2f}x "
          f"(target <= 3), per-sample loop / explain {t['loop_speedup']:.0f}x (target >= 100)")
    print(f"checks: {len(result['checks']) - len(failed)}/{len(result['checks'])} passed"
          + (f"; failed: {', '.join(failed)}" if failed else "")
          + f" ({result['seconds']:.0f} s)")
    if output is not None:
        write_json(output, result)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
