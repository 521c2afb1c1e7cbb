"""One markdown section per benchmark result file, for the README's results section.

Every number comes from the JSON the benchmark wrote, mostly as ratios to the peer measured
in the same run, with the targets and whether they were met where the JSON has them. Files
with a section of their own are listed in :data:`SECTIONS`, in README order; any other
``*.json`` gets :func:`generic_section` (its ``"summary"`` as a table or list), so a new
benchmark shows up without editing this module.
"""

from __future__ import annotations

import json

from benchmarks.report_ceiling import ceiling_section
from benchmarks.report_format import (
    DATA_NAMES,
    data_label,
    is_quick,
    met,
    ratio,
    seconds,
    table,
)
from benchmarks.report_timeseries import timeseries_section


def explainable_section(data: dict) -> str:
    """ExplainableKMeans vs sklearn KMeans, explain vs predict, vs a per-sample loop."""
    results, settings = data["results"], data.get("settings", {})
    targets = {(r["data"], r["measure"].split(" ")[0]): r for r in data.get("summary", [])}
    names = list(results)

    def target(kind: str) -> str:
        row = targets.get((names[0], kind))
        return row["target"].replace("<=", "≤").replace(">=", "≥") if row else "–"

    rows = {"fit": [], "inertia": [], "acc": [], "nmi": [], "ari": [], "explain": [],
            "per-sample": [], "floor": []}
    for name in names:
        f, p, lp = (results[name][k] for k in ("fit", "explain_vs_predict", "explain_vs_loop"))
        rows["fit"].append(f"{ratio(f['time_ratio'])} ({seconds(f['skxclust_s'])} vs "
                           f"{seconds(f['sklearn_s'])}): {met(f.get('met'))}")
        rows["inertia"].append(f"{f['inertia_ratio']:.5f} "
                               f"({(f['inertia_ratio'] - 1) * 100:+.2g} %)")
        quality = f.get("quality_seed0", {})
        for key in ("acc", "nmi", "ari"):
            ours, theirs = (quality.get(side, {}).get(key) for side in ("skxclust", "sklearn"))
            rows[key].append("–" if ours is None else f"{ours:.3f} vs {theirs:.3f}")
        rows["explain"].append(f"{ratio(p['ratio'])} ({seconds(p['explain_s'])} vs "
                               f"{seconds(p['predict_s'])}): {met(p.get('met'))}")
        rows["per-sample"].append(
            f"{ratio(lp['speedup'])} ({seconds(lp['loop_per_sample_s'])} vs "
            f"{seconds(lp['explain_per_sample_s'])} per sample): {met(lp.get('met'))}")
        floor = lp.get("floor")
        rows["floor"].append("–" if floor is None else
                             f"{seconds(floor['products_per_sample_s'])} per sample: at most "
                             f"{ratio(floor['loop_speedup_bound'])} over the loop")
    n_init = settings.get("n_init", "?")
    body = [
        [f"fit time / sklearn `KMeans` (n_init={n_init})", *rows["fit"], target("fit")],
        ["inertia / sklearn `KMeans`", *rows["inertia"], "(part of the fit target)"],
        ["ACC, ExplainableKMeans vs sklearn (seed 0)", *rows["acc"], "–"],
        ["NMI, ExplainableKMeans vs sklearn (seed 0)", *rows["nmi"], "–"],
        ["ARI, ExplainableKMeans vs sklearn (seed 0)", *rows["ari"], "–"],
        ["`explain` time / `predict` time (same rows)", *rows["explain"], target("explain")],
        ["per-sample NEON loop time / `explain` time", *rows["per-sample"],
         target("per-sample")],
    ]
    if any(cell != "–" for cell in rows["floor"]):
        body.append(["floor: `explain`'s three products and its input/output passes alone",
                     *rows["floor"], "–"])
    header = ["measure", *(data_label(n, results[n]) for n in names), "target"]
    intro = (f"**ExplainableKMeans vs scikit-learn** (`bench_explainable.py` → "
             f"`explainable.json`; {settings.get('n_clusters', '?')} clusters, "
             f"{settings.get('statistic', 'median')} of {settings.get('repeats', '?')} "
             "interleaved runs per side, same seeds):")
    text = intro + "\n\n" + table(header, body, "l" + "r" * len(names) + "l")
    sparse = data.get("sparse")
    if sparse:
        n_docs, n_words = sparse["shape"]
        text += (f"\n\nSparse input, a TF-IDF-like CSR matrix of {n_docs} × {n_words} "
                 f"({sparse['density']:.2%} stored): fit time / sklearn `KMeans` on the same "
                 f"matrix {ratio(sparse['time_ratio'])} ({seconds(sparse['skxclust_s'])} vs "
                 f"{seconds(sparse['sklearn_s'])}), inertia ratio "
                 f"{sparse['inertia_ratio']:.4f}; target "
                 f"{sparse['target'].replace('time_ratio <=', '≤')}: {met(sparse.get('met'))}.")
    return text


QUALITY_LABELS = {"kmeans": "sklearn KMeans, n_init=10", "st_affine": 'ST K-means, `warp="affine"`',
                  "st_tps": 'ST K-means, `warp="tps"` (default)',
                  "st_affine_tps": 'ST K-means, `warp="affine+tps"`',
                  "st_tps_double_steps": "ST K-means, every step count doubled",
                  "st_tps_float64_warps": 'ST K-means, `warp_dtype="float64"`',
                  "st_no_appearance": 'ST K-means, `appearance="none"`',
                  "st_intensity": 'ST K-means, `appearance="intensity"`',
                  "st_thickness": 'ST K-means, `appearance="intensity+thickness"`',
                  "st_contrast_noise": 'ST K-means, `noise="contrast"`'}


def _mean_min(summary: dict, key: str) -> str:
    return f"{summary[f'{key}_mean']:.3f} ({summary[f'{key}_min']:.3f})"


def _quality_targets(name: str, d: dict, targets: dict) -> str:
    """``digits: mean 0.887 ≥ 0.90 missed, ...`` for st_tps of one data set."""
    s, met_ = d["methods"]["st_tps"]["summary"], d.get("targets_met") or {}
    parts = [f"mean {s['acc_mean']:.3f} ≥ {targets['mean']:.2f} {met(met_.get('mean'))}"]
    if "min" in targets:
        parts.append(f"min {s['acc_min']:.3f} ≥ {targets['min']:.2f} {met(met_.get('min'))}")
    below = s.get("splits_below_kmeans")
    if below is not None:
        parts.append(f"below k-means on {below} of {s['splits_compared_with_kmeans']} splits "
                     f"(none allowed): {met(met_.get('never_below_kmeans'))}")
    return f"{DATA_NAMES.get(name, name)}: {', '.join(parts)}"


def _seeds_text(data: dict) -> str:
    """How the fits of a split were seeded."""
    n_seeds, stride = data.get("seeds", 1), data.get("seed_stride", 100)
    if n_seeds == 1:
        return "split s fitted with `random_state=s`"
    return (f"split s fitted {n_seeds} times, `random_state` = s + {stride} j for "
            f"j < {n_seeds}")


def quality_section(data: dict) -> str:
    """Held-out ``predict`` ACC / NMI / ARI over random splits, against k-means and targets."""
    rows, targets, iterations, seeds = [], [], [], []
    for name, d in data["datasets"].items():
        methods = d["methods"]
        best = max(m["summary"]["acc_mean"] for m in methods.values())
        for i, (label, m) in enumerate(methods.items()):
            s = m["summary"]
            acc = _mean_min(s, "acc")
            below = s.get("splits_below_kmeans")
            rows.append([data_label(name, d) if i == 0 else DATA_NAMES.get(name, name),
                         QUALITY_LABELS.get(label, label),
                         f"**{acc}**" if s["acc_mean"] == best else acc,
                         _mean_min(s, "nmi"), _mean_min(s, "ari"), f"{s['labels_acc_mean']:.3f}",
                         f"{s['agreement_min']:.4f}", seconds(s["fit_seconds_mean"]),
                         "–" if below is None else
                         f"{below} of {s['splits_compared_with_kmeans']}",
                         f"{s['seed_spread_max']:.3f}" if "seed_spread_max" in s else "–"])
        goal = data.get("targets_acc", {}).get(name)
        if "st_tps" in methods and goal:
            targets.append(_quality_targets(name, d, goal))
        per_split = methods.get("st_tps", {}).get("per_split", [])
        if per_split and max(p["seeds"] for p in per_split) > 1:
            seeds.append(f"{DATA_NAMES.get(name, name)} " + ", ".join(
                f"{p['acc_mean']:.3f} ({p['acc_min']:.3f}–{p['acc_max']:.3f})"
                for p in per_split))
        accs = methods.get("st_tps", {}).get("splits", [{}])[0].get("acc_per_iteration", [])
        shown = [f"{a:.3f}" for a in accs[:3]] + (["…", f"{accs[-1]:.3f}"] if len(accs) > 3
                                                  else [])
        if shown:
            iterations.append(f"{DATA_NAMES.get(name, name)} {' → '.join(shown)}")
    intro = ("**Clustering quality on held-out rows** (`bench_quality.py` → `quality.json`; "
             f"{data.get('n_clusters', '?')} clusters, {data['splits']} random stratified "
             f"{100 - round(100 * data.get('test_size', 0.2))}/"
             f"{round(100 * data.get('test_size', 0.2))} splits, "
             + _seeds_text(data) + ", default parameters, no labels in fitting or "
             "selection; `predict` scored on the held-out rows; mean over every fit (min over "
             "the splits of the mean over a split's seeds); best mean ACC per data set in bold; "
             "`labels_` ACC on the training rows; agreement: the smallest fraction of training "
             "rows where `predict(X_train)` equals `labels_`; seed spread: the largest range "
             "of held-out ACC over the seeds of one split):")
    if is_quick(data):
        q = data.get("quick_settings", {})
        intro += (f" quick run, {q.get('rows', '?')}-row subset, ST fits shortened to "
                  f"{q.get('st_params', '?')}: not comparable to a full run.")
    text = intro + "\n\n" + table(
        ["data", "method", "held-out ACC", "held-out NMI", "held-out ARI", "`labels_` ACC",
         "agreement (min)", "fit time (mean)", "splits below k-means", "seed spread"], rows,
        "llrrrrrrrr")
    if targets:
        text += ("\n\nTargets of ST K-means (TPS, default) on held-out ACC: "
                 + "; ".join(targets) + ".")
    if seeds:
        text += (" Held-out ACC of ST K-means (TPS, default) per split, mean (min–max) over "
                 "its seeds: " + "; ".join(seeds) + ".")
    if iterations:
        text += (" Training-row ACC per Lloyd iteration of split 0 (TPS; iteration 0 is the "
                 "assignment to the initial centroids; the iterations after a split-merge "
                 "move are listed too, also when the move is undone): "
                 + "; ".join(iterations) + ".")
    return text


def _setting(params: dict) -> str:
    order = sorted(params, key=lambda k: (k != "n_landmarks", k))
    return ", ".join(f"{k}={params[k]:g}" if isinstance(params[k], (int, float))
                     else f"{k}={params[k]}" for k in order)


def model_selection_section(data: dict) -> str:
    """GridSearchCV by the ST estimator's score (and by distortion), judged held out."""
    rows, verdicts = [], []
    within = data.get("targets", {}).get("within_best", 0.02)
    for name, d in data["datasets"].items():
        best, n = d["best"], len(d["settings"])
        for i, key in enumerate(("selected", "by_distortion")):
            c = d[key]
            rho = c.get("spearman_with_acc")
            label = (f"{DATA_NAMES.get(name, name)} ({d['selection_rows']} rows; "
                     f"{d['held_out_rows']} held out)") if i == 0 else DATA_NAMES.get(name, name)
            rows.append([label, "`score` (GridSearchCV)" if key == "selected" else
                         "plain distortion", f"`{_setting(c['params'])}`",
                         f"{c['selected_acc']:.3f}", f"{c['selected_rank']} of {n}",
                         "–" if rho is None else f"{rho:+.2f}",
                         f"{best['acc']:.3f} (`{_setting(best['params'])}`)",
                         f"{d['median_acc']:.3f}",
                         "yes" if c["selected_acc"] >= best["acc"] - within else "no"])
        t = d.get("targets_met", {})
        verdict = f"{DATA_NAMES.get(name, name)}: within {within:g} of the best " + met(
            t.get("within_best"))
        floor = data.get("targets", {}).get("selected_acc_min", {}).get(name)
        if floor is not None and "selected_acc_min" in t:
            verdict += f", selected ≥ {floor:.2f} held out {met(t['selected_acc_min'])}"
        verdicts.append(verdict)
    grid = data.get("grid", {})
    intro = ("**Model selection without labels** (`bench_model_selection.py` → "
             f"`model_selection.json`; `GridSearchCV(SpatialTransformerKMeans("
             f"{data.get('n_clusters', '?')}, random_state={data.get('random_state', 0)}), "
             f"{json.dumps(grid)}, cv={data.get('cv', '?')})` scored by the estimator's own "
             "`score`, beside the same folds scored by plain distortion; every setting then "
             "fitted on the selection rows, its `predict` scored on the remaining rows; rank 1 "
             "= best held-out ACC of the grid):")
    if is_quick(data):
        intro += f" quick run, ST fits shortened to {data.get('st_params')}: not comparable."
    text = intro + "\n\n" + table(
        ["data", "criterion", "selected setting", "held-out ACC", "rank", "Spearman ρ with "
         "held-out ACC", "grid best ACC", "grid median ACC", f"within {within:g} of best"],
        rows, "lllrrrlrl")
    other = [f"{DATA_NAMES.get(name, name)} was searched over {json.dumps(d['grid'])}"
             for name, d in data["datasets"].items() if d.get("grid", grid) != grid]
    if other:
        text += "\n\n" + "; ".join(other) + "."
    return text + "\n\nTargets (selection by `score`): " + "; ".join(verdicts) + "."


def st_speed_section(data: dict) -> str:
    """Alignment vs kornia per pair, fit time, peak memory growth."""
    targets, quick = data.get("targets", {}), is_quick(data)

    def judged(flag: bool) -> str:
        return "not judged (quick run)" if quick else met(flag)

    rows = []
    a = data.get("alignment")
    if a:
        c = a["config"]
        aim = targets.get("alignment_speedup")
        o, k, e = c["ours"], c["kornia"], a["energy_on_timed_pairs"]
        measure = (f"fit the warp of one (sample, centroid) pair, {c['n_landmarks']} TPS "
                   f"landmarks, {c['image'][0]}×{c['image'][1]}, the same energy")
        coarse = (f" (the affine and the first {o['coarse_steps']} on half-resolution "
                  f"images)" if o.get("coarse_steps") else "")
        ours = (f"the estimator's warp fit, {o['affine_steps']} affine + {o['n_steps']} "
                f"Levenberg–Marquardt steps{coarse}, all pairs batched: "
                f"{seconds(a['ours_seconds_per_pair'])} per pair "
                f"({seconds(a['ours_screened_seconds_per_pair'])} with candidate "
                f"screening); mean energy {e['mean_ours']:.4g} on the "
                f"{e['n_pairs']} timed pairs (at or below kornia's on "
                f"{e['pairs_ours_at_or_below_kornia']} of them)")
        theirs = (f"kornia `get_tps_transform` + `warp_image_tps`, {k['n_steps']} Adam "
                  f"steps, one pair at a time: {seconds(a['kornia_seconds_per_pair'])} "
                  f"per pair; mean energy {e['mean_kornia']:.4g}")
        rows.append([
            measure, ours, theirs,
            f"{ratio(a['speedup'])} faster ({ratio(a['speedup_screened'])} screened)",
            "–" if aim is None else f"≥ {aim:g}×: {judged(a['speedup'] >= aim)}"])
    p = data.get("per_pair")
    if p:
        sec, cfg = p["seconds_per_pair"], p["config"]
        rows.append([
            f"one (sample, centroid) warp fit, defaults, {cfg['image'][0]}×{cfg['image'][1]}, "
            f"{cfg['input']}, one thread",
            f"{seconds(sec['default'])} per pair: coarse phase {seconds(sec['coarse_phase'])}"
            f", full resolution {seconds(sec['full_resolution_phase'])}; float64 solve "
            f"{seconds(sec['float64_solve'])} ({ratio(p['float64_over_float32'])})",
            f"floor: one full-resolution float32 step {seconds(sec['floor_one_step'])}",
            f"{p['default_in_floor_steps']:.0f} floor steps per pair", "–"])
    f = data.get("fit_4000")
    if f:
        aim = targets.get("fit_ratio_to_kmeans")
        rows.append([f"`fit` on {f['n_samples']} MNIST-5k rows ({f['dtype']}; {f['params']})",
                     f"{seconds(f['seconds'])}, {f['n_iter']} iterations, held-out ACC "
                     f"{f['heldout_acc']:.3f}",
                     f"scikit-learn `KMeans(n_init=10)` {seconds(min(f['kmeans_seconds']))}",
                     ratio(f["ratio_to_kmeans"]),
                     "–" if aim is None else
                     f"≤ {aim:g}×: {judged(f['ratio_to_kmeans'] <= aim)}"])
    g = data.get("fit_20000")
    if g and f:
        aim, acc = targets.get("ratio_20k_to_4000"), targets.get("acc_20k")
        rows.append([f"`fit` on {g['n_samples']} rows (the {f['n_samples']} plus "
                     f"{g['elastic']['copies']} elastic copies each; {g['params']})",
                     f"{seconds(g['seconds'])}, held-out ACC {g['heldout_acc']:.3f}",
                     # the 4000-row fit of the same run (a later partial run may have
                     # replaced fit_4000)
                     f"the {f['n_samples']}-row fit "
                     f"{seconds(g['seconds'] / g['ratio_to_4000_row_fit'])}",
                     ratio(g["ratio_to_4000_row_fit"]),
                     "–" if aim is None else
                     f"≤ {aim:g}× and ACC ≥ {acc:g}: "
                     f"{judged(g['ratio_to_4000_row_fit'] <= aim and g['heldout_acc'] >= acc)}"])
    m = data.get("memory")
    if m:
        small, large = m["runs"][0], m["runs"][-1]
        inc = m["fit_increase_mib"]
        n_small, n_large = str(small["n_samples"]), str(large["n_samples"])
        aim = targets.get("memory_ratio")
        rows.append([f"peak RSS of `fit` ({m['params']}), N={n_large} vs N={n_small}",
                     f"{large['peak_rss_during_fit'] / 2**20:.0f} MiB",
                     f"{small['peak_rss_during_fit'] / 2**20:.0f} MiB",
                     f"{ratio(m['peak_rss_ratio'])} (the fit's own increase: "
                     f"{inc[n_large]:.0f} vs {inc[n_small]:.0f} MiB)",
                     "–" if aim is None else f"≤ {aim:g}×: {judged(m['peak_rss_ratio'] <= aim)}"])
    intro = ("**ST K-means speed and memory** (`bench_st_speed.py` → `st_speed.json`; "
             "the alignment minimises the same regularised energy on both sides, ours by "
             "batched Levenberg–Marquardt, the kornia baseline by a first-order per-pair "
             "fit as a kornia user would write it):")
    return intro + "\n\n" + table(["measure", "skxclust", "baseline", "ratio", "target"], rows)


def faithfulness_section(data: dict) -> str:
    """Pixel-flipping areas per (data, model) and method, and who is lowest."""
    methods = ["explain", "explain_midpoint", "explain_reference", "gradient_x_input",
               "gradient", "occlusion", "random"]
    labels = ["explain (NEON, default)", "explain(reference=None)", "explain(reference=mean)",
              "gradient×input", "gradient", "occlusion", "random"]
    areas: dict[tuple[str, str], dict[str, float]] = {}
    counts: dict[tuple[str, str], int] = {}
    for r in data["results"]:
        key = (r["dataset"], r["model"])
        areas.setdefault(key, {})[r["method"]] = r["area"]
        counts[key] = r["n_explained"]
    rows, lowest, below = [], {}, {"random": [0, 0], "gradient": [0, 0]}
    for key, by_method in areas.items():
        best = min(by_method, key=by_method.get)
        lowest[best] = lowest.get(best, 0) + 1
        cells = []
        for method in methods:
            value = by_method.get(method)
            cell = "–" if value is None else f"{value:.3f}"
            cells.append(f"**{cell}**" if method == best else cell)
        for other, tally in below.items():
            if other in by_method and "explain" in by_method:
                tally[0] += by_method["explain"] < by_method[other]
                tally[1] += 1
        rank = sorted(by_method, key=by_method.get).index("explain") + 1
        rows.append([f"{DATA_NAMES.get(key[0], key[0])} / {key[1]}", counts[key], *cells,
                     f"{rank} of {len(by_method)}"])
    n_steps = data.get("settings", {}).get("n_steps", "?")
    intro = ("**Faithfulness** (`bench_faithfulness.py` → `faithfulness.json`, "
             f"`faithfulness.png`; held-out rows of models fitted on 80 % of the data, pixel "
             f"flipping to the training mean in {n_steps} steps, "
             "area under the normalised evidence curve, lower is better, lowest per row in "
             "bold):")
    if is_quick(data):
        intro += " quick run on small subsets: not comparable to a full run."
    text = intro + "\n\n" + table(["data / model", "samples", *labels, "rank of explain"], rows,
                                  "l" + "r" * (len(labels) + 2))
    lowest_text = ", ".join(f"{m} in {n}" for m, n in sorted(lowest.items(),
                                                              key=lambda kv: -kv[1]))
    text += f"\n\nLowest area: {lowest_text} of {len(areas)} settings."
    for other, (wins, total) in below.items():
        if total:
            text += f" `explain` is below {other} in {wins} of {total}."
    for g in data.get("gains", []):
        cost = g["cost_vs_predict"]
        text += (f"\n\n- {DATA_NAMES.get(g['dataset'], g['dataset'])} / {g['model']}: gain "
                 f"over random as a ratio to the best baseline ({g['best_baseline']}): "
                 f"`explain` {g['ratio_explain']:.3f}"
                 + (f", `explain(reference=None)` {g['ratio_explain_midpoint']:.3f}"
                    if "ratio_explain_midpoint" in g else "")
                 + f", `explain(reference=mean)` {g['ratio_explain_reference']:.3f}; cost "
                 f"relative to `predict` on the same rows {cost['explain']:.1f}× and "
                 f"{cost['explain_reference']:.1f}× (occlusion {cost['occlusion']:.0f}×).")
    return text


def _generic_cell(value) -> str:
    if isinstance(value, bool):
        return met(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return "–" if value is None else str(value).replace("|", "/")


# Result files written by a script not named ``bench_<stem>.py``.
SCRIPTS = {"gpu": "gpu_check.py"}


def generic_section(name: str, data: dict) -> str:
    """A result file without a section of its own: its ``summary`` (else ``results``)."""
    title = data.get("benchmark", name)
    script = SCRIPTS.get(name, f"bench_{name}.py")
    intro = f"**{title}** (`{script}` → `{name}.json`"
    intro += "; quick run)" if is_quick(data) else ")"
    for key in ("summary", "results"):
        rows = data.get(key)
        if isinstance(rows, list) and rows and all(isinstance(r, dict) for r in rows):
            columns = list(dict.fromkeys(c for r in rows for c in r))
            return intro + ":\n\n" + table(
                columns, [[_generic_cell(r.get(c)) for c in columns] for r in rows])
        if key == "summary" and isinstance(rows, list) and rows:
            return intro + ":\n\n" + "\n".join(f"- {line}" for line in rows)
    return intro + ": no `summary` in the file; see the JSON."


SECTIONS = {  # result file stem -> section; README order. Others: generic_section.
    "explainable": explainable_section,
    "quality": quality_section,
    "model_selection": model_selection_section,
    "st_speed": st_speed_section,
    "faithfulness": faithfulness_section,
    "timeseries": timeseries_section,
    "ceiling": ceiling_section,
}
