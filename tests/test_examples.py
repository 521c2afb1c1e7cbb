"""Every gallery example runs to the end in quick mode (small data), so none can rot."""

import runpy
from pathlib import Path

import matplotlib
import pytest
import torch

matplotlib.use("Agg", force=True)
import matplotlib.pyplot as plt  # noqa: E402

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("plot_*.py"))


def test_there_are_gallery_examples():
    assert len(EXAMPLES) >= 4


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs_in_quick_mode_and_draws_figures(path, monkeypatch):
    monkeypatch.setenv("SKXCLUST_EXAMPLES_QUICK", "1")
    monkeypatch.chdir(path.parent)
    plt.close("all")
    # Quick-mode problems are tiny: one torch thread avoids oversubscription, which on a
    # busy 2-core machine made them several times slower.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        runpy.run_path(str(path), run_name="__main__")
        assert plt.get_fignums(), f"{path.name} drew no figure"
    finally:
        torch.set_num_threads(threads)
        plt.close("all")
