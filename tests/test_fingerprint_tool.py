"""The fingerprint tool that checks a reshaping of the code moves no result
(``benchmarks/fingerprint.py``): its hashes see one ulp, dtype and shape, and ``--check``
fails on every kind of difference it promises to report."""

import json

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from benchmarks import fingerprint as fp


def test_a_digest_sees_one_ulp_the_dtype_and_the_shape():
    a = np.linspace(0.0, 1.0, 6)
    assert fp.digest(a) == fp.digest(a.copy())
    assert fp.digest(a) != fp.digest(np.nextafter(a, 2.0))
    last = a.copy()
    last[-1] = np.nextafter(last[-1], 2.0)  # every byte counts, not only the first ones
    assert fp.digest(a) != fp.digest(last)
    assert fp.digest(a) != fp.digest(a.view(np.int64))  # the same bytes as integers
    assert fp.digest(a) != fp.digest(a.astype(np.float32))
    assert fp.digest(a) != fp.digest(a.reshape(2, 3))
    assert fp.digest(np.asfortranarray(a.reshape(2, 3))) == fp.digest(a.reshape(2, 3))
    assert fp.digest(sp.csr_matrix(a.reshape(2, 3))) == fp.digest(a.reshape(2, 3))
    assert fp.digest(1.5) == fp.digest(np.float64(1.5)) != fp.digest(np.float32(1.5))


def test_fitted_hashes_only_the_attributes_an_estimator_has():
    class Fitted:
        cluster_centers_ = np.zeros((2, 3))
        labels_ = np.array([0, 1])
        inertia_ = 0.5

    assert set(fp.fitted(Fitted())) == {"cluster_centers_", "labels_", "inertia_"}


def test_thread_differences_compare_each_case_at_one_and_two_threads():
    hashes = {"a@threads=1": {"x": "1", "y": "2"}, "a@threads=2": {"x": "1", "y": "3"},
              "b@threads=1": {"x": "1"}, "b@threads=2": {"x": "1", "z": "4"},
              "c@threads=1": {"x": "1"}, "c@threads=2": {"x": "1"}}
    assert fp.thread_differences(hashes) == ["a: y (threads 1 vs 2)",
                                             "b: z (threads 1 vs 2)"]


def test_compare_reports_differing_missing_and_new_arrays_and_cases():
    baseline = {"a@threads=1": {"w": "0", "x": "1", "y": "2"}, "gone@threads=1": {"x": "1"},
                "b@threads=1": {"x": "1"}}
    hashes = {"a@threads=1": {"x": "1", "y": "9", "z": "3"}, "new@threads=1": {"x": "1"},
              "b@threads=1": {"x": "1"}}
    assert fp.compare(hashes, baseline) == [
        "a@threads=1: w missing/new", "a@threads=1: y differs", "a@threads=1: z missing/new",
        "gone@threads=1: missing case", "new@threads=1: new case"]
    assert fp.compare(baseline, baseline) == []


@pytest.fixture
def fake_cases(monkeypatch):
    """Two tiny cases: one steady, one whose output follows a switch (a changed result)
    or the thread count (a thread difference)."""
    state = {"moved": False, "threads_matter": False}

    def steady():
        return {"x": fp.digest(np.arange(3.0))}

    def switchable():
        value = (np.nextafter(1.0, 2.0) if state["moved"] else 1.0) + (
            torch.get_num_threads() if state["threads_matter"] else 0)
        return {"y": fp.digest(np.float64(value) + np.zeros(2))}

    monkeypatch.setattr(fp, "CASES", {"steady": steady, "switchable": switchable})
    return state


def test_check_passes_on_unchanged_results_and_fails_on_a_changed_one(fake_cases, tmp_path,
                                                                      capsys):
    record = tmp_path / "base.json"
    assert fp.main(["--output", str(record)]) == 0
    assert json.loads(record.read_text())["n_hashes"] == 4
    assert fp.main(["--check", str(record)]) == 0
    assert "all equal to the baseline" in capsys.readouterr().out
    fake_cases["moved"] = True  # one ulp of one output
    assert fp.main(["--check", str(record)]) == 1
    out = capsys.readouterr().out
    assert "DIFFERS FROM THE BASELINE: switchable@threads=1: y differs" in out
    # --only checks just the named cases against their part of the baseline
    assert fp.main(["--check", str(record), "--only", "steady"]) == 0


def test_check_fails_on_a_new_thread_difference_but_not_on_a_recorded_one(fake_cases,
                                                                          tmp_path, capsys):
    record = tmp_path / "base.json"
    fp.main(["--output", str(record)])
    fake_cases["threads_matter"] = True
    assert fp.main(["--check", str(record), "--only", "switchable"]) == 1
    assert "new differences between thread counts" in capsys.readouterr().out
    fp.main(["--output", str(record)])  # recorded with the difference
    recorded = json.loads(record.read_text())
    assert recorded["thread_differences"] == ["switchable: y (threads 1 vs 2)"]
    assert fp.main(["--check", str(record)]) == 0
    assert "(as in the baseline)" in capsys.readouterr().out
    # every hash as recorded, but the difference between thread counts is new: a failure
    recorded["thread_differences"] = []
    record.write_text(json.dumps(recorded))
    assert fp.main(["--check", str(record)]) == 1
    assert "all equal to the baseline, 1 new differences" in capsys.readouterr().out


def test_an_unknown_case_is_refused_naming_the_known_ones(fake_cases, capsys):
    with pytest.raises(SystemExit) as raised:
        fp.main(["--only", "nope"])
    assert raised.value.code == 2
    assert "unknown cases ['nope']" in capsys.readouterr().err


def test_the_thread_count_is_restored_after_a_run(fake_cases):
    before = torch.get_num_threads()
    torch.set_num_threads(3)  # neither of the counts the cases run with
    try:
        fp.run(["steady"])
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)
