"""The README part of ``timeseries.json`` (``benchmarks/bench_timeseries.py``)."""

from __future__ import annotations

import numpy as np

from benchmarks.report_format import is_quick, met, ratio, seconds, table

LABELS = {"st": "ST K-means", "kmeans": "k-means", "dtw": "DTW k-means",
          "softdtw": "soft-DTW k-means", "kshape": "k-Shape", "kasba": "KASBA"}


def _mean(values) -> float:
    return float(np.mean(values))


def timeseries_section(data: dict) -> str:
    """Held-out ACC per set and method (measured, then published), fit times, targets."""
    sets = data.get("sets", {})
    intro = ("**Time series, train → test** (`bench_timeseries.py` → `timeseries.json`"
             + ("; quick run)" if is_quick(data) else ")"))
    if not sets:
        return intro + ": no sets measured."
    methods = [m for m in LABELS if any(m in e["methods"] for e in sets.values())]
    published = data.get("published", {})
    names = published.get("methods", [])
    pub_acc = published.get("acc", {})
    kasba = names.index("KASBA") if "KASBA" in names else None
    header = ["set (train/test × length)"] + [LABELS[m] for m in methods]
    header += ["KASBA (published)", "best of 8 (published)"]
    rows = []
    for name, entry in sets.items():
        row = [f"{name} ({entry['n_train']}/{entry['n_test']} × {entry['length']})"]
        for m in methods:
            runs = entry["methods"].get(m)
            row.append("–" if runs is None else f"{_mean(runs['acc']):.3f}")
        pub = pub_acc.get(name)
        row += (["–", "–"] if pub is None or kasba is None
                else [f"{pub[kasba]:.3f}", f"{max(pub):.3f}"])
        rows.append(row)
    summary = data.get("summary", {})
    means = summary.get("mean_acc", {})
    def mean_cell(m):  # the number of sets when a method missed some
        if m not in means:
            return "–"
        n = len(means[m]["sets"])
        return f"{means[m]['value']:.3f}" + ("" if n == len(sets) else f" ({n} sets)")

    pub_means = summary.get("published_mean_acc", {})
    pub_cells = [f"{pub_means['KASBA']:.3f}" if "KASBA" in pub_means else "–",
                 f"{pub_means['best of eight']:.3f}" if "best of eight" in pub_means else "–"]
    on_published = summary.get("mean_acc_published_sets", {})
    n_published = sum(name in pub_acc for name in sets)
    if on_published and n_published < len(sets):  # a set without a published result
        rows.append(["mean"] + [mean_cell(m) for m in methods] + ["–", "–"])
        rows.append([f"mean of the {n_published} published sets"]
                    + [f"{on_published[m]:.3f}" if m in on_published else "–"
                       for m in methods] + pub_cells)
    else:
        rows.append(["mean"] + [mean_cell(m) for m in methods] + pub_cells)
    text = intro + (f": held-out clustering accuracy (TEST split, Hungarian matching) of "
                    f"fits on the TRAIN split, z-normalised series, K = number of classes; "
                    f"mean over {data.get('seeds')} seeds (ST K-means, k-means) or "
                    f"{data.get('peer_seeds')} (tslearn and aeon peers, same process). "
                    f"Published: {published.get('source', '–')}.\n\n")
    text += table(header, rows, "l" + "r" * (len(header) - 1))
    fits = []
    for name, entry in sets.items():
        runs = entry["methods"]
        if "st" in runs:
            dtw = runs.get("dtw")
            fits.append([name, seconds(_mean(runs["st"]["fit_seconds"])),
                         "–" if dtw is None else seconds(_mean(dtw["fit_seconds"])),
                         "–" if dtw is None else ratio(_mean(dtw["fit_seconds"])
                                                       / _mean(runs["st"]["fit_seconds"]))])
    if fits:
        text += "\n\nFit time (mean per fit, one thread):\n\n" + table(
            ["set", "ST K-means", "tslearn DTW k-means", "DTW / ST"], fits, "lrrr")
    text += multivariate_table(data.get("multivariate", {}))
    targets = data.get("targets", {})
    flags = summary.get("met", {})
    below = summary.get("below_kmeans", [])
    speed = summary.get("speedup_vs_dtw", {})
    st_mean = means.get("st", {}).get("value")
    judged = [n for n in ("Trace", "OSULeaf") if n in speed]
    lines = [
        f"mean ACC of ST K-means {st_mean:.3f} (target ≥ {targets.get('mean_acc')}): "
        f"{met(flags.get('mean_acc'))}" if st_mean is not None else None,
        f"sets more than {targets.get('below_kmeans_by')} below k-means: "
        f"{', '.join(below) if below else 'none'}: {met(flags.get('below_kmeans'))}",
        f"fit time, DTW k-means over ST K-means on {' and '.join(judged)}: "
        f"{', '.join(ratio(speed[n]) for n in judged)} (target ≥ "
        f"{targets.get('speedup_vs_dtw')}×): {met(flags.get('speedup_vs_dtw'))}"
        if judged else None,
    ]
    return text + "\n\nTargets: " + "; ".join(line for line in lines if line) + "."


def multivariate_table(sets: dict) -> str:
    """Held-out ACC and fit time on the multivariate sets (no target, no published
    table), or nothing when none was measured."""
    if not sets:
        return ""
    methods = [m for m in LABELS if any(m in e["methods"] for e in sets.values())]
    rows = []
    for name, entry in sets.items():
        runs = entry["methods"]
        cells = ["–" if m not in runs else f"{_mean(runs[m]['acc']):.3f}" for m in methods]
        rows.append([f"{name} ({entry['n_train']}/{entry['n_test']} × {entry['channels']} × "
                     f"{entry['length']})", *cells, *(
                         "–" if m not in runs else seconds(_mean(runs[m]["fit_seconds"]))
                         for m in ("st", "dtw"))])
    header = ["set (train/test × channels × length)", *(LABELS[m] for m in methods),
              "ST fit", "DTW k-means fit"]
    return ("\n\nMultivariate series (each channel z-normalised; ST K-means with "
            "`image_shape=(C, 1, L)`: one time warp shared by the channels; same protocol, "
            "no published table, no target):\n\n"
            + table(header, rows, "l" + "r" * (len(header) - 1)))
