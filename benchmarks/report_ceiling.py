"""The README part of ``ceiling.json`` (``benchmarks/bench_ceiling.py``)."""

from __future__ import annotations

from benchmarks.report_format import is_quick, table

# The class start counts as more accurate when its mean held-out ACC is above the default
# fits' by more than this (a seed moves one split's ACC by up to 0.03 on MNIST-5k).
ACC_MARGIN = 0.01


def verdict(summary: dict) -> str:
    """Where the accuracy of the class start is out of the optimiser's reach: the class
    start is more accurate (by :data:`ACC_MARGIN`) and its objective is worse on every
    split."""
    splits = summary["splits"]
    better_acc = summary["class_start_acc_mean"] > summary["default_acc_mean"] + ACC_MARGIN
    if summary["class_start_lower_inertia"] == 0 and better_acc:
        return "objective prefers another partition"
    if summary["class_start_lower_inertia"] == splits and better_acc:
        return "optimiser misses the class optimum"
    return "mixed" if better_acc else f"defaults within {ACC_MARGIN} or better"


def _fits(n) -> str:
    return "default fits" if n is None else f"{n} default fit" + ("" if n == 1 else "s")


def ceiling_section(data: dict) -> str:
    """Per data set: held-out ACC of the default fits and of the fit from the class means,
    and which of them the objective and the score prefer."""
    intro = ("**Objective ceiling** (`bench_ceiling.py` → `ceiling.json`"
             + ("; quick run" if is_quick(data) else "")
             + f"; {_fits(data.get('seeds'))} per split beside one fit started from"
             " the class means of the training rows; held-out `predict` ACC, signals "
             "train → test)")
    sets = data.get("datasets", {})
    if not sets:
        return intro + ": no data sets measured."
    rows = []
    for name, entry in sets.items():
        s = entry["summary"]
        rows.append([name, s["splits"], f"{s['default_acc_mean']:.3f}",
                     f"{s['class_start_acc_mean']:.3f}",
                     f"{s['class_start_lower_inertia']} of {s['splits']}",
                     f"{s['class_start_higher_score']} of {s['splits']}",
                     f"{100 * s['inertia_gap_mean']:+.2f} %", verdict(s)])
    return intro + ":\n\n" + table(
        ["data", "splits", "defaults", "from the class means",
         "class start: lower `inertia_`", "higher `score`",
         "`inertia_` of the class start vs the best default", "reading"], rows)
