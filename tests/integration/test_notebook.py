"""notebooks/crosstask_results.ipynb runs top to bottom on the smoke outputs (KEDRO_ENV=smoke) and shows the
comparison table, the three bar charts and the heatmaps."""
from __future__ import annotations

from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = PROJECT_ROOT / "notebooks" / "crosstask_results.ipynb"
FOLDS = ("heldout_hatexplain", "heldout_sst2", "heldout_cola")


@pytest.mark.integration
def test_the_results_notebook_runs_on_the_smoke_outputs(smoke_crosstask_run, monkeypatch, tmp_path):
    import nbformat
    from nbclient import NotebookClient

    metrics_csv = smoke_crosstask_run / "08_reporting" / "crosstask_metrics.csv"
    if not metrics_csv.is_file():
        pytest.skip(f"{metrics_csv} does not exist: run `kedro run --pipeline crosstask --env smoke` first")
    # The kernel inherits this process's environment: the notebook reads KEDRO_ENV.
    monkeypatch.setenv("KEDRO_ENV", "smoke")
    monkeypatch.setenv("KEDRO_DISABLE_TELEMETRY", "1")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    # kernel "python3" is this virtualenv's ipykernel (jupyter_client runs its "python" argv as sys.executable)
    NotebookClient(notebook, kernel_name="python3", timeout=600,
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    nbformat.write(notebook, tmp_path / "executed.ipynb")  # kept for a look when an assertion fails

    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    html = "\n".join(o["data"].get("text/html", "") for o in outputs if "data" in o)
    for fold in FOLDS:  # the comparison table's columns and a heading per fold
        assert fold in html
    assert "all_tokens" in html and "expnet_plus" in html and "expnet_paper" in html and "random" in html
    images = [o for o in outputs if "data" in o and "image/png" in o["data"]]
    assert len(images) == len(FOLDS)
    heatmap_blocks = html.count("<td class='m'>gold</td>")
    assert heatmap_blocks == 3 * len(FOLDS)  # N_EXAMPLES per fold, each with its gold row
