"""Progress bars: where they appear, where they never do, and how their work nests."""

import threading

import numpy as np
import pytest

import skxclust
from skxclust import ExplainableKMeans, SpatialTransformerKMeans, _progress, config_context
from skxclust._progress import progress, progress_enabled, track


@pytest.fixture
def interactive(monkeypatch):
    """What "auto" sees in a terminal or a notebook (pytest's capture is neither)."""
    monkeypatch.setattr(_progress, "_in_jupyter", lambda: True)


def test_no_bar_by_default_under_pytest_capture(capsys):
    assert not progress_enabled()
    X = np.random.default_rng(0).random((600, 4))
    km = ExplainableKMeans(3, n_init=1, batch_size=100, random_state=0).fit(X)
    km.predict(X)
    assert capsys.readouterr().err == ""


def test_progress_true_draws_the_fit_bar_with_iterations_and_the_inference_bar(capsys):
    X = np.random.default_rng(0).random((600, 4))
    with config_context(progress=True):
        km = ExplainableKMeans(3, n_init=1, batch_size=100, random_state=0).fit(X)
        fit_err = capsys.readouterr().err
        km.predict(X)  # 6 row blocks: a bar counting rows
        predict_err = capsys.readouterr().err
        km.predict(X[:50])  # one block: nothing to show
        single_err = capsys.readouterr().err
    assert "ExplainableKMeans.fit" in fit_err
    assert predict_err.startswith("\rExplainableKMeans:")
    assert single_err == ""


def test_spatial_fit_shows_its_lloyd_bar_when_asked(capsys):
    X = np.random.default_rng(0).random((40, 16))
    with config_context(progress=True):
        SpatialTransformerKMeans(2, n_steps=2, max_iter=2, init="k-means++",
                                 random_state=0).fit(X)
    assert "SpatialTransformerKMeans.fit" in capsys.readouterr().err


def test_auto_draws_in_a_notebook_but_never_with_verbose_in_threads_or_child_processes(
        interactive, monkeypatch):
    assert progress_enabled()
    assert not progress_enabled(verbose=1)
    seen = []
    worker = threading.Thread(target=lambda: seen.append(progress_enabled()))
    worker.start()
    worker.join()
    assert seen == [False]
    monkeypatch.setattr(_progress.multiprocessing, "parent_process", lambda: object())
    assert not progress_enabled()


def test_auto_draws_on_a_terminal_only(monkeypatch):
    class Stream:
        def __init__(self, tty):
            self.tty = tty

        def isatty(self):
            return self.tty

    monkeypatch.setattr(_progress.sys, "stderr", Stream(True))
    assert progress_enabled()
    monkeypatch.setattr(_progress.sys, "stderr", Stream(False))
    assert not progress_enabled()


def test_false_wins_everywhere_and_config_context_restores(interactive):
    with config_context(progress=False):
        assert not progress_enabled()
        assert skxclust.get_config() == {"progress": False}
    assert skxclust.get_config() == {"progress": "auto"} and progress_enabled()


@pytest.mark.parametrize("value", ["yes", 1, None, "never"])
def test_set_config_refuses_other_values_naming_progress(value):
    if value is None:  # None means "leave unchanged"
        skxclust.set_config(progress=None)
        assert skxclust.get_config()["progress"] == "auto"
        return
    with pytest.raises(ValueError, match="progress must be True, False or 'auto'; got"):
        skxclust.set_config(progress=value)


@pytest.mark.parametrize("raw, expected", [("0", False), ("off", False), ("1", True),
                                           ("ON", True), ("auto", "auto"), (" no ", False)])
def test_environment_variable_sets_the_initial_value(monkeypatch, raw, expected):
    monkeypatch.setenv("SKXCLUST_PROGRESS", raw)
    assert _progress._from_environment() == expected


def test_environment_variable_with_another_value_is_refused_by_name(monkeypatch):
    monkeypatch.setenv("SKXCLUST_PROGRESS", "maybe")
    with pytest.raises(ValueError, match="SKXCLUST_PROGRESS"):
        _progress._from_environment()


def test_nested_work_fills_the_enclosing_step_of_one_bar(capsys):
    positions = []
    with config_context(progress=True), progress(2, desc="outer", unit="it") as outer:
        for _ in range(2):
            with outer.step():
                for _ in track(range(4), desc="inner", unit="rows", sizes=[1, 1, 1, 1]):
                    pass
                positions.append(outer._bar.n)
        bars = [line for line in capsys.readouterr().err.split("\r") if "inner" in line]
    assert positions == [1.0, 2.0]
    assert bars == []  # the inner loop drew no bar of its own


def test_lloyd_bar_notes_the_iteration(monkeypatch):
    notes = []
    monkeypatch.setattr(_progress.Progress, "note", lambda self, text: notes.append(text))
    X = np.random.default_rng(0).random((60, 3))
    km = ExplainableKMeans(2, n_init=1, max_iter=50, random_state=0).fit(X)
    assert notes[-1] == f"iteration {km.n_iter_}/50"


def test_inner_share_moves_the_outer_bar_in_fractions():
    seen = []
    with config_context(progress=True), progress(1, desc="outer") as outer:
        with outer.step():
            for _ in track(range(4), desc="inner"):
                seen.append(outer._bar.n)
    assert seen == [0.0, 0.25, 0.5, 0.75]


def test_disabled_progress_is_a_no_op_and_track_yields_everything():
    with config_context(progress=False):
        assert list(track(iter([3, 1, 2]), desc="x")) == [3, 1, 2]
        with progress(5, desc="x") as bar, bar.step():
            bar.advance(2)
            bar.note("ignored")
        assert _progress._SCOPE.get() is None


def test_the_inference_bar_counts_exactly_the_rows(monkeypatch):
    # 650 rows in blocks of 100: six full blocks and a last one of 50
    from skxclust import _inference

    seen = []

    def spy(items, **kwargs):
        seen.append(list(kwargs["sizes"]))
        return track(items, **kwargs)

    monkeypatch.setattr(_inference, "track", spy)
    X = np.random.default_rng(0).random((650, 4))
    km = ExplainableKMeans(3, n_init=1, batch_size=100, random_state=0).fit(X)
    seen.clear()
    km.transform(X)
    assert seen and all(sum(sizes) == 650 for sizes in seen)
    assert seen[0][-1] == 50


def test_a_bar_never_moves_back_nor_past_its_total():
    with config_context(progress=True), progress(4, desc="x") as bar:
        bar.advance(2)
        bar.advance(-1)  # not back
        bar.advance(1)
        assert bar._bar.n == 3
        bar.advance(10)
        assert bar._bar.n == 4


def test_work_repeated_within_one_step_never_moves_the_bar_back():
    seen = []
    with config_context(progress=True), progress(1, desc="outer") as outer:
        with outer.step():
            for _ in range(2):  # a second pass over the same share (e.g. a refit)
                for _ in track(range(4), desc="inner"):
                    seen.append(outer._bar.n)
    assert seen == sorted(seen) and seen[-1] == 1.0


def test_three_levels_nest_in_fractions_of_their_step():
    seen = []
    with config_context(progress=True), progress(1, desc="outer") as outer:
        with outer.step():
            for _ in track(range(2), desc="middle"):
                for _ in track(range(4), desc="inner"):
                    seen.append(outer._bar.n)
    assert seen == [0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875]


def test_notes_of_nested_work_stay_off_the_enclosing_bar():
    with config_context(progress=True), progress(2, desc="outer") as outer:
        outer.note("outer note")
        with outer.step(), progress(3, desc="inner") as inner:
            inner.note("inner note")
        assert outer._bar.postfix == "outer note"


def test_a_closed_bar_no_longer_takes_nested_work():
    # a loop that died in an exception leaves its step open until its generator is
    # collected; once its bar is closed, new work draws its own bar
    with config_context(progress=True):
        loop = track(range(3), desc="dead")
        next(loop)
        dead = _progress._SCOPE.get()[0]
        dead.close()
        with progress(2, desc="fresh") as bar:
            assert bar._bar is not None and bar._bar is not dead
        loop.close()


@pytest.mark.parametrize("n_items, drawn", [(1, False), (2, True)])
def test_a_bar_is_drawn_from_two_items_on_and_never_for_no_work(capsys, n_items, drawn):
    with config_context(progress=True):
        for _ in track(range(n_items), desc="items"):
            pass
        with progress(0, desc="nothing") as bar:
            assert bar._bar is None
    err = capsys.readouterr().err
    assert ("items" in err) is drawn and "nothing" not in err
