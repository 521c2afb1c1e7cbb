"""Faithfulness of cluster explanations by pixel flipping, on digits and MNIST-5k.

Run ``python benchmarks/bench_faithfulness.py`` (or ``python -m benchmarks --only faithfulness``);
it writes ``benchmarks/results/faithfulness.json`` and, next to it, ``faithfulness.png``
(``--quick``, a smoke run on small subsets: into ``benchmarks/results/quick/``).

Each model is fitted on 80 % of the rows (stratified split, ``random_state=0``) and explains
held-out rows. For each explained sample ``x`` with assigned cluster ``c`` (arg-max of
``decision_function``), the features are removed in order of decreasing relevance,
a ``1 / --n-steps`` share of them per step (20 steps of 5 % by default), each removed feature
being replaced by its training mean. After each step the cluster evidence
``f_c(x_perturbed) = decision_function(x_perturbed)[:, c]`` is divided by the unperturbed
``f_c(x)``; the curve is averaged over the explained samples and its area over the
fraction removed (trapezoid on ``[0, 1]``) is reported: lower = the ordering finds the
features the assignment depends on faster = more faithful.

Orderings (methods):

- ``explain``: the estimator's default NEON relevance (signed, most positive first):
  the midpoint rule for ExplainableKMeans, the reference rule from the fitted mean
  ``reference_`` (the mean of up to 512 training rows) for SpatialTransformerKMeans;
- ``explain_midpoint``: ``explain(..., reference=None)``, the midpoint rule, where that is
  not the default (SpatialTransformerKMeans);
- ``explain_reference``: ``explain(..., reference=baseline)``, NEON with the reference
  rule (root points: the removal baseline projected onto each decision hyperplane), given
  the same baseline as gradient x input and occlusion;
- ``gradient_x_input``: gradient of ``f_c`` times ``(x - baseline)`` (gradient x input
  measured from the removal baseline);
- ``gradient``: saliency, absolute value of the gradient; ExplainableKMeans only;
- ``occlusion``: ``f_c(x) - f_c(x with feature i set to its baseline)`` per feature;
- ``random``: a random order, mean curve over 3 seeds.

Gradients of ExplainableKMeans are taken by torch autograd through
``as_module("neuralized", beta=beta_)`` (the LogMeanExp head, whose hard limit is
``decision_function``) on the target column. For SpatialTransformerKMeans the gradient of
the same LogMeanExp head is taken with the fitted warps and appearance coefficients held
fixed (``sum_k p_k 2 (a_c - a_k)``, ``a`` the effective centroids of ``explain``): by the
envelope theorem a warp that minimises the pair's energy has no first-order effect, so this
is the gradient of the warped evidence up to the contrast-scaled penalties, which are held
fixed; ``gradient`` (saliency) is reported for ExplainableKMeans only. Every ST
``decision_function`` call re-optimises the warps of every row, so all perturbed rows are
evaluated in one call.

Summary per (data, model): the gain of each method over random (area of random minus its
area) and the gains of ``explain`` (and ``explain_midpoint``, ``explain_reference``) as a
ratio to the best of gradient x input and occlusion (issue 22's measure: at least 1.0 for
ST on digits), with the cost of each explanation relative to ``predict`` on the same rows
(at most 3x).
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
import torch  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from benchmarks._common import (  # noqa: E402
    bench_parser,
    load_average,
    machine_info,
    output_path,
    set_threads,
    write_json,
)
from skxclust import ExplainableKMeans, SpatialTransformerKMeans  # noqa: E402
from skxclust.datasets import load_mnist_5k, stratified_subset  # noqa: E402

NAME = "faithfulness"
N_RANDOM = 3
BASELINES = ("gradient_x_input", "occlusion")  # the reference methods of the ratio
TARGETS = {"ratio_st_digits": 1.0, "cost_vs_predict": 3.0}


# ---------------------------------------------------------------------------- helpers
def _select(n_rows: int, n: int, seed: int) -> np.ndarray:
    """``n`` distinct row indices, drawn at random (the data sets are shuffled anyway)."""
    return np.sort(np.random.default_rng(seed).choice(n_rows, size=min(n, n_rows),
                                                      replace=False))


def _counts(n_features: int, n_steps: int) -> np.ndarray:
    """Number of features removed after each step, 0 .. n_features."""
    return np.round(np.linspace(0, n_features, n_steps + 1)).astype(np.int64)


def _perturbed(X: np.ndarray, order: np.ndarray, baseline: np.ndarray,
               counts: np.ndarray) -> np.ndarray:
    """Rows ``(n * (n_steps + 1), D)``: X with its first ``counts[s]`` ordered features
    replaced by the baseline, step ``s`` fastest varying within each sample."""
    n, d = X.shape
    rank = np.empty_like(order)
    rank[np.arange(n)[:, None], order] = np.arange(d)[None, :]
    removed = rank[:, None, :] < counts[None, :, None]  # (n, S, D)
    out = np.where(removed, baseline[None, None, :], X[:, None, :])
    return out.reshape(-1, d).astype(X.dtype, copy=False)


def _order(relevance: np.ndarray) -> np.ndarray:
    """Feature indices by decreasing relevance (stable)."""
    return np.argsort(-relevance, axis=1, kind="stable")


def _gradient(est: ExplainableKMeans, X: np.ndarray, target: np.ndarray) -> np.ndarray:
    """d f_target / dx through the LogMeanExp-neuralized head, per row."""
    module = est.as_module("neuralized", beta=est.beta_)
    dtype = torch.as_tensor(np.asarray(est.cluster_centers_)).dtype
    x = torch.as_tensor(X, dtype=dtype).clone().requires_grad_(True)
    out = module(x)
    out.gather(1, torch.as_tensor(target)[:, None]).sum().backward()
    return x.grad.numpy()


def _st_gradient(est: SpatialTransformerKMeans, X: np.ndarray, target: np.ndarray
                 ) -> np.ndarray:
    """Gradient of the LogMeanExp head (``beta_``) of the warped evidence with the fitted
    warps and appearance coefficients fixed: ``sum_k p_k 2 (a_c - a_k)``."""
    Xt, centers, geometry, _ = est._prepare(X, "explain")
    losses, warps = geometry.pair_warps(Xt, centers)
    effective = geometry.effective_centroids(Xt, centers, warps)  # (B, K, D)
    rows = torch.arange(Xt.shape[0])
    tgt = torch.as_tensor(target)
    h = (losses - losses[rows, tgt][:, None]).to(torch.float64)
    h[rows, tgt] = torch.inf
    p = torch.softmax(-est.beta_ * (h - h.amin(dim=1, keepdim=True)), dim=1)
    a_c = effective[rows, tgt]
    grad = 2.0 * (p.to(Xt.dtype)[:, :, None] * (a_c[:, None, :] - effective)).sum(dim=1)
    return grad.numpy()


def _occlusion(est, X: np.ndarray, target: np.ndarray, f0: np.ndarray,
               baseline: np.ndarray) -> np.ndarray:
    """``f_c(x) - f_c(x with feature i at baseline)``, all rows in one call."""
    n, d = X.shape
    rows = np.repeat(X[:, None, :], d, axis=1)
    idx = np.arange(d)
    rows[:, idx, idx] = baseline[idx]
    f = est.decision_function(rows.reshape(-1, d)).reshape(n, d, -1)
    return f0[:, None] - f[np.arange(n), :, target]


def _area(curve: np.ndarray) -> float:
    return float(np.trapezoid(curve, dx=1.0 / (len(curve) - 1)))


def evaluate(est, X: np.ndarray, baseline: np.ndarray, n_steps: int, gradients: bool,
             seed: int) -> dict:
    """Pixel-flipping curves of every method for the rows X (one batched call)."""
    n, d = X.shape
    counts = _counts(d, n_steps)
    timings = {}
    t0 = time.perf_counter()
    f_all = est.decision_function(X)
    timings["decision_function"] = time.perf_counter() - t0
    target = f_all.argmax(axis=1)
    f0 = f_all[np.arange(n), target]

    orders: dict[str, list[np.ndarray]] = {}
    t0 = time.perf_counter()
    orders["explain"] = [_order(est.explain(X, target=target))]
    timings["explain"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    orders["explain_reference"] = [_order(est.explain(X, target=target, reference=baseline))]
    timings["explain_reference"] = time.perf_counter() - t0
    if isinstance(est, SpatialTransformerKMeans):  # its default is the reference rule
        t0 = time.perf_counter()
        orders["explain_midpoint"] = [_order(est.explain(X, target=target, reference=None))]
        timings["explain_midpoint"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    grad = _gradient(est, X, target) if gradients else _st_gradient(est, X, target)
    timings["gradient"] = time.perf_counter() - t0
    orders["gradient_x_input"] = [_order(grad * (X - baseline[None, :]))]
    if gradients:
        orders["gradient"] = [_order(np.abs(grad))]
    t0 = time.perf_counter()
    orders["occlusion"] = [_order(_occlusion(est, X, target, f0, baseline))]
    timings["occlusion"] = time.perf_counter() - t0
    rng = np.random.default_rng(seed)
    orders["random"] = [np.stack([rng.permutation(d) for _ in range(n)]) for _ in range(N_RANDOM)]

    blocks = [(name, k) for name, lst in orders.items() for k in range(len(lst))]
    rows = np.concatenate([_perturbed(X, orders[name][k], baseline, counts)
                           for name, k in blocks])
    t0 = time.perf_counter()
    f = est.decision_function(rows)
    timings["flipping_decision_function"] = time.perf_counter() - t0
    per_block = f.reshape(len(blocks), n, n_steps + 1, -1)
    out = {}
    for b, (name, _) in enumerate(blocks):
        fc = np.take_along_axis(per_block[b], target[:, None, None].repeat(n_steps + 1, 1),
                                axis=2)[..., 0]
        out.setdefault(name, []).append(fc / f0[:, None])
    methods = {}
    for name, ratios in out.items():
        curves = [r.mean(axis=0) for r in ratios]
        curve = np.mean(curves, axis=0)
        median = np.mean([np.median(r, axis=0) for r in ratios], axis=0)
        entry = {"area": _area(curve), "area_median_curve": _area(median),
                 "curve": [round(float(v), 5) for v in curve]}
        if name == "random":
            entry["area_per_seed"] = [_area(c) for c in curves]
        methods[name] = entry
    return {"methods": methods, "n_explained": int(n), "n_perturbed_rows": int(rows.shape[0]),
            "mean_f_c": float(f0.mean()), "timings_seconds": timings}


# ------------------------------------------------------------------------------ main
def _datasets(quick: bool) -> dict:
    """``{name: (X_train, X_test)}``: 80/20 stratified splits (``random_state=0``)."""
    Xd, yd = load_digits(return_X_y=True)
    Xm, ym = load_mnist_5k()
    n_mnist = 200 if quick else 1000
    Xm, ym = stratified_subset(Xm, ym, n_mnist, random_state=0)
    if quick:
        Xd, yd = stratified_subset(Xd, yd, 300, random_state=0)
    out = {}
    for name, X, y in (("digits", Xd, yd), ("mnist5k", Xm, ym)):
        X_train, X_test = train_test_split(X.astype(np.float32), test_size=0.2, stratify=y,
                                           random_state=0)
        out[name] = (X_train, X_test)
    return out


def _settings(quick: bool) -> dict:
    st = dict(n_clusters=10, random_state=0, device="cpu")
    if quick:
        st.update(n_steps=5, max_iter=1, update_steps=2)
    return {
        "digits": {"ekm": dict(n_clusters=10, n_init=1 if quick else 10, random_state=0,
                               device="cpu"),
                   "st": st, "n_explain_ekm": 20 if quick else 150,
                   "n_explain_st": 3 if quick else 150},
        "mnist5k": {"ekm": dict(n_clusters=10, n_init=1 if quick else 10, random_state=0,
                                device="cpu"),
                    "st": st, "n_explain_ekm": 10 if quick else 150,
                    "n_explain_st": 2 if quick else 40},
    }


def _gains(results: list[dict], timings: dict) -> list[dict]:
    """Per (data, model): each method's gain over random, explain's and
    explain_reference's gain as a ratio to the best of :data:`BASELINES`, and the cost of
    each explanation relative to ``decision_function`` (predict's pass) on the same rows."""
    groups: dict[tuple, dict] = {}
    for r in results:
        groups.setdefault((r["dataset"], r["model"]), {})[r["method"]] = r["area"]
    out = []
    for (dataset, model), areas in groups.items():
        gain = {m: areas["random"] - a for m, a in areas.items() if m != "random"}
        best = max((m for m in BASELINES if m in gain), key=gain.get)
        t = timings[f"{dataset}/{model}"]
        out.append({"dataset": dataset, "model": model, "gain_over_random": gain,
                    "best_baseline": best,
                    "ratio_explain": gain["explain"] / gain[best],
                    "ratio_explain_reference": gain["explain_reference"] / gain[best],
                    **({"ratio_explain_midpoint": gain["explain_midpoint"] / gain[best]}
                       if "explain_midpoint" in gain else {}),
                    "cost_vs_predict": {m: t[m] / t["decision_function"] for m in
                                        ("explain", "explain_midpoint", "explain_reference",
                                         "gradient", "occlusion") if m in t}})
    return out


def _summary(results: list[dict]) -> list[str]:
    lines = []
    groups: dict[tuple, dict] = {}
    medians: dict[tuple, dict] = {}
    n_explained: dict[tuple, int] = {}
    for r in results:
        key = (r["dataset"], r["model"])
        groups.setdefault(key, {})[r["method"]] = r["area"]
        medians.setdefault(key, {})[r["method"]] = r["area_median_curve"]
        n_explained[key] = r["n_explained"]
    for key, areas in groups.items():
        dataset, model = key
        ranked = sorted(areas, key=areas.get)
        best = ranked[0]
        best_median = min(medians[key], key=medians[key].get)
        table = ", ".join(f"{m} {areas[m]:.3f}" for m in ranked)
        tail = (f" On the median curve the best is {best_median}. "
                f"n_explained={n_explained[key]}.")
        if best == "explain":
            second = ranked[1]
            lines.append(f"{dataset} / {model}: explain is the best (lowest area) of "
                         f"{len(areas)} methods, ahead of {second} by "
                         f"{areas[second] - areas['explain']:.3f} ({table}).{tail}")
        else:
            lines.append(f"{dataset} / {model}: explain is NOT the best: {best} has the "
                         f"lowest area, {areas['explain'] - areas[best]:.3f} below explain; "
                         f"explain ranks {ranked.index('explain') + 1} of {len(areas)} "
                         f"({table}).{tail}")
    return lines


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from skxclust.plotting import plot_pixel_flipping

    fig = plot_pixel_flipping(results)
    fig.savefig(path, dpi=110, bbox_inches="tight")


def build_parser():
    """The command line: ``--quick``, ``--output``, data sets, models and steps."""
    parser = bench_parser(__doc__.splitlines()[0],
                          "tiny smoke run (small subsets, few samples, shortened ST fits)")
    parser.add_argument("--datasets", nargs="+", default=["digits", "mnist5k"])
    parser.add_argument("--models", nargs="+", default=["ExplainableKMeans",
                                                        "SpatialTransformerKMeans"])
    parser.add_argument("--n-steps", type=int, default=20)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, write its JSON and figure; returns the exit status."""
    args = build_parser().parse_args(argv)
    output = output_path(args, NAME)
    set_threads()
    start = time.perf_counter()
    info = machine_info()
    data = _datasets(args.quick)
    settings = _settings(args.quick)
    results, fits = [], {}
    for dataset in args.datasets:
        X, X_test = data[dataset]
        baseline = X.mean(axis=0)
        for model in args.models:
            ekm = model == "ExplainableKMeans"
            params = settings[dataset]["ekm" if ekm else "st"]
            t0 = time.perf_counter()
            est = (ExplainableKMeans if ekm else SpatialTransformerKMeans)(**params).fit(X)
            fit_s = time.perf_counter() - t0
            n_explain = settings[dataset]["n_explain_ekm" if ekm else "n_explain_st"]
            idx = _select(X_test.shape[0], n_explain, seed=1)
            t0 = time.perf_counter()
            ev = evaluate(est, X_test[idx], baseline, args.n_steps, gradients=ekm, seed=2)
            eval_s = time.perf_counter() - t0
            fits[f"{dataset}/{model}"] = {
                "params": params, "n_train": int(X.shape[0]), "fit_seconds": fit_s,
                "evaluation_seconds": eval_s, "beta_": float(est.beta_),
                "n_explained": ev["n_explained"], "n_perturbed_rows": ev["n_perturbed_rows"],
                "mean_f_c_explained": ev["mean_f_c"], "timings_seconds": ev["timings_seconds"],
            }
            for method, entry in ev["methods"].items():
                results.append({"dataset": dataset, "model": model, "method": method,
                                "n_explained": ev["n_explained"], **entry})
                print(f"{dataset:8s} {model:25s} {method:17s} area {entry['area']:.4f}",
                      flush=True)
            print(f"  fit {fit_s:.1f}s, evaluation {eval_s:.1f}s", flush=True)
    fractions = (_counts(1000, args.n_steps) / 1000).tolist()
    report = {
        "benchmark": "pixel flipping (remove most relevant features first; lower area = "
                     "more faithful)",
        "quick": args.quick,
        "machine": info,
        "settings": {
            "baseline": "per-feature training mean (of the data the model was fitted on)",
            "n_steps": args.n_steps,
            "step_fraction": 1.0 / args.n_steps,
            "fraction_removed": fractions,
            "curve": "mean over explained samples of f_c(x_perturbed) / f_c(x), c = "
                     "argmax decision_function(x); one value per step, step 0 = unperturbed",
            "area": "trapezoid of the mean curve over the fraction removed in [0, 1]; "
                    "f_c turns negative once the evidence for c is removed, so areas can be "
                    "negative, and samples with a small f_c(x) weigh more in the mean",
            "area_median_curve": "same on the per-step median over samples (robustness "
                                 "check; the summary ranks by area)",
            "random": f"mean curve over {N_RANDOM} random orders (seeded)",
            "gradient_x_input": "autograd gradient of the LogMeanExp-neuralized f_c "
                                "(beta = beta_) times (x - baseline)",
            "gradient": "absolute value of that gradient (saliency)",
            "occlusion": "f_c(x) - f_c(x with feature i set to its baseline)",
            "explain": "estimator.explain(X, target=c), signed: NEON, midpoint rule "
                       "(ExplainableKMeans), reference rule from reference_ "
                       "(SpatialTransformerKMeans)",
            "explain_midpoint": "estimator.explain(X, target=c, reference=None) (NEON, "
                                "midpoint rule), SpatialTransformerKMeans only",
            "explain_reference": "estimator.explain(X, target=c, reference=baseline) (NEON, "
                                 "reference rule)",
            "gradient_x_input_SpatialTransformerKMeans": "the LogMeanExp head's gradient with "
                "the fitted warps and appearance coefficients fixed (envelope theorem), "
                "times (x - baseline); saliency not reported",
            "split": "fitted on 80 % of the rows (stratified, random_state=0), explained rows "
                     "drawn from the held-out 20 %",
            "gains": "gain = area(random) - area(method); ratio = gain / gain of the best of "
                     f"{BASELINES}; cost = seconds / decision_function seconds, same rows",
            "data": {"digits": "sklearn load_digits, raw 0..16" +
                     (" (300-row stratified subset in quick mode)" if args.quick else ""),
                     "mnist5k": "load_mnist_5k scaled to [0, 1], stratified_subset of "
                                f"{sum(map(len, data['mnist5k']))} rows (random_state=0)"},
            "models": fits,
        },
        "results": results,
        "gains": _gains(results, {k: v["timings_seconds"] for k, v in fits.items()}),
        "targets": TARGETS,
        "summary": _summary(results) + [
            f"{g['dataset']} / {g['model']}: gain over random as a ratio to {g['best_baseline']}"
            f": explain {g['ratio_explain']:.3f}, "
            + (f"explain_midpoint {g['ratio_explain_midpoint']:.3f}, "
               if "ratio_explain_midpoint" in g else "")
            + f"explain_reference "
            f"{g['ratio_explain_reference']:.3f}; cost vs predict: explain "
            f"{g['cost_vs_predict']['explain']:.2f}x, explain_reference "
            f"{g['cost_vs_predict']['explain_reference']:.2f}x, occlusion "
            f"{g['cost_vs_predict']['occlusion']:.0f}x"
            for g in _gains(results, {k: v["timings_seconds"] for k, v in fits.items()})],
        "total_wall_seconds": time.perf_counter() - start,
    }
    info["load_average_end"] = load_average()
    write_json(output, report)
    plot(results, output.with_suffix(".png"))
    for line in report["summary"]:
        print(line)
    print(f"figure {output.with_suffix('.png').name}, {report['total_wall_seconds']:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
