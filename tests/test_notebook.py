"""The tutorial notebook runs top to bottom in a real Jupyter kernel (on small data)."""

import importlib.util
import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
if importlib.util.find_spec("ipykernel") is None:  # not imported here: it runs the kernel
    pytest.skip("ipykernel is not installed", allow_module_level=True)

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "tutorial.ipynb"


def test_tutorial_notebook_runs_every_cell_without_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SKXCLUST_EXAMPLES_QUICK", "1")  # 300 digits
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline figures
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError naming the cell that failed
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    html = [o for o in outputs if "text/html" in o.get("data", {})]
    assert any("ExplainableKMeans" in o["data"]["text/html"] for o in html)  # the HTML repr
    figures = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(figures) >= 4  # centroids, two relevance figures, alignment
    bars = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert bars  # the ST fit's progress bar, a widget
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "best:" in text and "ACC" in text
