"""benchmarks/gpu_check.py: skipped cleanly without CUDA; its checks and summary (no run)."""

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the benchmarks package lives at the repository root
    sys.path.insert(0, str(ROOT))

from benchmarks import gpu_check  # noqa: E402


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_without_cuda_it_is_skipped_writes_nothing_and_exits_0(tmp_path, capsys):
    output = tmp_path / "gpu.json"
    assert gpu_check.main(["--output", str(output)]) == 0
    assert "skipped" in capsys.readouterr().out
    assert not output.exists()


@pytest.mark.parametrize("argv, cuda, expected", [
    ([], False, None),
    (["--dry-run"], False, "cpu"),
    (["--device", "cpu"], False, "cpu"),
    ([], True, "cuda"),
    (["--device", "cuda:1"], True, "cuda:1"),
])
def test_the_compared_device_follows_the_options(monkeypatch, argv, cuda, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    assert gpu_check.resolve_target(gpu_check.build_parser().parse_args(argv)) == expected


def fake_result(agreement=1.0, ari=0.95, conservation=1e-6, loaded=True, tests_status=0):
    kind = {"n_samples": 10, "fit_labels_ari_cpu_vs_device": ari,
            "same_model_predict_agreement_cpu_vs_device": agreement,
            "cpu": {f"{s}_seconds": 2.0 for s in ("fit", "predict", "explain")},
            "device": {**{f"{s}_seconds": 1.0 for s in ("fit", "predict", "explain")},
                       "explain_conservation_error": conservation},
            "pickle_load_without_cuda": {"loaded": loaded, "cuda_visible_in_loader": False,
                                         "predict_agreement_with_original": 1.0}}
    return {"cuda_tests": {"exit_status": tests_status}, "explainable": kind, "st": kind}


@pytest.mark.parametrize("change, failing", [
    ({}, set()),
    ({"agreement": 0.9}, {"explainable_predict_agreement", "st_predict_agreement"}),
    ({"ari": 0.5}, {"explainable_fit_ari", "st_fit_ari"}),
    ({"conservation": 1e-2}, {"explainable_explain_conserves_on_device",
                              "st_explain_conserves_on_device"}),
    ({"loaded": False}, {"explainable_pickle_loads_without_cuda",
                         "st_pickle_loads_without_cuda"}),
    ({"tests_status": 1}, {"cuda_tests_pass"}),
])
def test_checks_fail_exactly_where_a_figure_misses_its_mark(change, failing):
    checks = gpu_check.checks_of(fake_result(**change))
    assert {name for name, ok in checks.items() if not ok} == failing


def test_summary_has_one_row_per_estimator_with_both_devices():
    result = fake_result()
    result["checks"] = gpu_check.checks_of(result)
    rows = gpu_check.summary_rows(result)
    assert [r["estimator"] for r in rows] == ["explainable", "st"]
    assert rows[0]["fit s (cpu / device)"] == "2 / 1" and rows[0]["checks"] is True


def test_explain_targets_compare_explain_with_the_per_sample_loop_on_the_device():
    from sklearn.datasets import load_digits

    X = load_digits().data[:300]
    targets = gpu_check.explain_targets(X, "cpu", n_loop=20)
    assert targets["n_samples"] == 300
    assert targets["max_abs_diff_vs_loop"] < 1e-9  # the same relevance as the loop
    assert targets["loop_speedup"] > 0 and targets["explain_vs_predict"] > 0
    assert targets["loop_speedup_met"] == (targets["loop_speedup"] >= 100)
