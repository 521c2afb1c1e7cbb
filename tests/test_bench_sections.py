"""The README sections of the time-series, ceiling and faithfulness benchmarks: each reads
its bench's layout and judges its targets (synthetic records, no benchmark run)."""

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the benchmarks package lives at the repository root
    sys.path.insert(0, str(ROOT))

from benchmarks import report_sections  # noqa: E402


def test_timeseries_section_reads_the_bench_layout_and_judges_the_targets():
    from benchmarks import bench_timeseries, report_timeseries

    def runs(acc, seconds):
        return {"acc": [acc, acc], "nmi": [0.1, 0.1], "fit_seconds": [seconds, seconds]}

    sets = {name: {"n_train": 10, "n_test": 20, "length": 30, "methods": {
        "st": runs(0.7 if name != "UnitTest" else 0.3, 1.0),
        "kmeans": runs(0.5 if name != "Trace" else 0.75, 0.1),
        "dtw": runs(0.6, 20.0 if name != "OSULeaf" else 5.0)}}
        for name in bench_timeseries.SOURCES}
    assert "UnitTest" in sets and "UnitTest" not in bench_timeseries.PUBLISHED
    data = {"seeds": 2, "peer_seeds": 2, "targets": bench_timeseries.TARGETS,
            "published": {"source": "the table", "methods": list(
                bench_timeseries.PUBLISHED_METHODS), "acc": {
                n: list(v) for n, v in bench_timeseries.PUBLISHED.items()}},
            "sets": sets, "summary": bench_timeseries.summarise(sets)}
    text = report_timeseries.timeseries_section(data)
    assert "| Trace (10/20 × 30) | 0.700 | 0.750 | 0.600 | 0.590 | 0.800 |" in text
    # every set in the mean; beside the published means, the mean of the same sets
    assert "| mean | 0.643 |" in text  # (6 * 0.7 + 0.3) / 7
    assert "| mean of the 6 published sets | 0.700 |" in text
    assert "| 0.563 | 0.624 |" in text  # published means
    assert "mean ACC of ST K-means 0.643 (target ≥ 0.58): met" in text
    assert "below k-means: Trace, UnitTest: missed" in text  # 0.70 < 0.75 - 0.02, 0.3
    # judged on Trace (20x) and OSULeaf (5x): missed
    assert "on Trace and OSULeaf: 20.0×, 5.00× (target ≥ 10.0×): missed" in text
    assert "Multivariate" not in text  # none measured
    data["multivariate"] = {name: {"n_train": 40, "n_test": 40, "length": 100,
                                   "channels": channels, "methods": {
                                       "st": runs(0.8, 2.0), "dtw": runs(0.7, 8.0)}}
                            for name, channels in bench_timeseries.MULTIVARIATE.items()}
    text = report_timeseries.timeseries_section(data)
    assert "| BasicMotions (40/40 × 6 × 100) | 0.800 | 0.700 | 2 s | 8 s |" in text
    assert "| mean | 0.643 |" in text  # the univariate summary is unchanged


def test_ceiling_summary_and_reading_tell_the_objective_from_the_optimiser():
    from benchmarks import bench_ceiling, report_ceiling

    def split(s, class_acc, class_inertia, class_score):
        default = [{"acc": 0.90, "inertia": 100.0 + j, "score_per_row": -1.0 - j}
                   for j in range(2)]
        start = {"acc": class_acc, "inertia": class_inertia, "score_per_row": class_score}
        return {"split": s, "default": default, "class_start": start,
                "class_start_lower_inertia": class_inertia < 100.0,
                "class_start_higher_score": class_score > -1.0,
                "inertia_gap": (class_inertia - 100.0) / 100.0}

    cases = {  # more accurate, worse objective on every split: the objective's limit
        "objective": [split(s, 0.95, 102.0, -1.5) for s in range(2)],
        # more accurate and a better objective on every split: the optimiser missed it
        "optimiser": [split(s, 0.95, 98.0, -0.5) for s in range(2)],
        "within": [split(s, 0.905, 102.0, -1.5) for s in range(2)],  # within the margin
        "mixed": [split(0, 0.95, 98.0, -0.5), split(1, 0.95, 102.0, -1.5)]}
    summaries = {name: bench_ceiling.summarise(s) for name, s in cases.items()}
    assert summaries["objective"]["class_start_lower_inertia"] == 0
    assert summaries["optimiser"]["class_start_higher_score"] == 2
    assert summaries["objective"]["inertia_gap_mean"] == pytest.approx(0.02)
    assert summaries["within"]["default_acc_mean"] == pytest.approx(0.90)
    readings = {name: report_ceiling.verdict(s) for name, s in summaries.items()}
    assert readings == {"objective": "objective prefers another partition",
                        "optimiser": "optimiser misses the class optimum",
                        "within": "defaults within 0.01 or better", "mixed": "mixed"}
    text = report_ceiling.ceiling_section(
        {"seeds": 2, "datasets": {n: {"summary": s} for n, s in summaries.items()}})
    assert "| objective | 2 | 0.900 | 0.950 | 0 of 2 | 0 of 2 | +2.00 % |" in text
    assert "2 default fits per split" in text
    assert bench_ceiling.class_means(np.array([[0.0], [2.0], [5.0]]),
                                     np.array([1, 1, 0])).tolist() == [[5.0], [1.0]]


def test_faithfulness_reports_each_models_default_and_st_midpoint_rule():
    from benchmarks import bench_faithfulness

    areas = {"ExplainableKMeans": {"explain": -1.0, "explain_reference": -1.2,
                                   "gradient_x_input": -1.1, "gradient": -0.3,
                                   "occlusion": -1.5, "random": 0.5},
             "SpatialTransformerKMeans": {"explain": -1.1, "explain_midpoint": -0.8,
                                          "explain_reference": -1.15, "gradient_x_input": -0.9,
                                          "occlusion": -1.0, "random": 0.4}}
    results = [{"dataset": "digits", "model": model, "method": method, "area": area,
                "n_explained": 10, "curve": [1.0, 0.0]}
               for model, by_method in areas.items() for method, area in by_method.items()]
    timings = {f"digits/{model}": {"decision_function": 1.0, "explain": 1.0,
                                   "explain_reference": 1.0, "gradient": 1.0,
                                   "occlusion": 50.0,
                                   **({"explain_midpoint": 1.0} if "explain_midpoint" in a
                                      else {})}
               for model, a in areas.items()}
    gains = {g["model"]: g for g in bench_faithfulness._gains(results, timings)}
    st, ekm = gains["SpatialTransformerKMeans"], gains["ExplainableKMeans"]
    assert st["ratio_explain"] == pytest.approx(1.5 / 1.4)  # gain 1.5 vs occlusion's 1.4
    assert st["ratio_explain_midpoint"] == pytest.approx(1.2 / 1.4)
    assert "ratio_explain_midpoint" not in ekm and "explain_midpoint" not in ekm[
        "cost_vs_predict"]
    text = report_sections.faithfulness_section({"results": results, "gains": list(
        gains.values()), "settings": {"n_steps": 1}})
    # lowest area in bold; the midpoint column empty where it is the default
    assert "| digits / SpatialTransformerKMeans | 10 | -1.100 | -0.800 | **-1.150** |" in text
    assert "| digits / ExplainableKMeans | 10 | -1.000 | – | -1.200 |" in text
    assert "`explain` 1.071, `explain(reference=None)` 0.857" in text


@pytest.mark.parametrize("gaps, right", [
    # the search's family on each split, and its ACC gap to the best family there
    ((0.0, 0.0, 0.0), True),
    ((0.004, 0.004, 0.004), True),  # within the tolerance on average
    ((0.0, 0.0, 0.03), False),  # one split far off drags the mean out
    ((0.006, 0.006, 0.006), False),
])
def test_appearance_search_is_judged_by_the_mean_acc_of_its_choices_over_splits(
        monkeypatch, gaps, right):
    from benchmarks import bench_appearance_search as bench

    assert bench.TOLERANCE == 0.005
    assert bench.CANDIDATES == tuple(f"{f} / {n}" for n in ("constant", "contrast")
                                     for f in ("none", "intensity", "intensity+thickness"))
    none, intensity, *others = bench.CANDIDATES
    canned = iter([{"split": s, "selected": none, "mean_test_score": {},
                    "heldout_acc": {none: 0.9 - gap, intensity: 0.9,
                                    **dict.fromkeys(others, 0.8)}, "search_seconds": 1.0}
                   for s, gap in enumerate(gaps)])
    monkeypatch.setattr(bench, "run_split", lambda X, y, params, split: next(canned))
    entry = bench.run("data", None, None, {}, len(gaps))
    assert entry["right_choice"] is right
    assert entry["selected"] == {none: 3, intensity: 0, **dict.fromkeys(others, 0)}
    assert entry["searched_heldout_acc"] == pytest.approx(0.9 - np.mean(gaps))
    assert entry["most_accurate"] == (none if max(gaps) == 0 else intensity)  # ties: first
    assert bench._selected_text(entry["selected"]) == "none / constant 3"
