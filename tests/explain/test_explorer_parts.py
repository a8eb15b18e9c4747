"""The explorer's parts without a browser, on a tiny fold with known answers: the fold view (per-example AUROC,
disagreement, filters, sort, pages), the workspace's checks (paths, annotations written as span JSONL), one refit
per fold at a time, and the page's colours."""
from __future__ import annotations

import json
import threading

import numpy as np
import pandas as pd
import pytest

from learned_attribution.adapters.explorer.app import AGAINST, FOR, display_tokens, heat_cells
from learned_attribution.core.errors import InputError
from learned_attribution.services.explore.fold_view import MissingFoldOutputs, load_fold_view, missing_outputs
from learned_attribution.services.explore.workspace import RefitJobs, RefitRunning, Workspace, inside

# Three held-out examples of 4 scored tokens each; the human marks tokens 0 and 1.
GOLD = [1, 1, 0, 0]
SCORES = {  # example -> method -> token scores
    "ex:a": {"expnet_plus": [0.9, 0.8, 0.1, 0.2], "saliency": [0.1, 0.2, 0.9, 0.8]},  # AUROC 1 and 0
    "ex:b": {"expnet_plus": [0.1, 0.2, 0.9, 0.8], "saliency": [0.1, 0.2, 0.9, 0.8]},  # AUROC 0 and 0
    "ex:c": {"expnet_plus": [0.5, 0.5, 0.5, 0.5], "saliency": [0.9, 0.1, 0.8, 0.2]},  # constant (0.5); 0.5
}
TEXTS = {"ex:a": "great fun movie .", "ex:b": "bad dull film .", "ex:c": "the plot is slow"}
LABELS = {"ex:a": (1, 1), "ex:b": (0, 1), "ex:c": (0, 0)}  # gold label, predicted


@pytest.fixture
def data_root(tiny_models_dir):
    """A data folder holding the SST-2 fold's outputs: the tiny fold and classifier, the scores above."""
    from transformers import AutoTokenizer

    models, tmp_path = tiny_models_dir, tiny_models_dir.parent
    tokenizer = AutoTokenizer.from_pretrained(models / "classifier_sst2")
    rows, scores = [], []
    for example_id, text in TEXTS.items():
        ids = tokenizer(text)["input_ids"]
        assert len(ids) == 6, text  # [CLS] + 4 tokens + [SEP]
        label, predicted = LABELS[example_id]
        rows.append({"example_id": example_id, "text": text, "input_ids": ids, "token_labels": [-100, *GOLD, -100],
                     "label": label, "predicted": predicted, "correct": label == predicted, "role": "rationale_test"})
        for method, values in SCORES[example_id].items():
            scores.append({"example_id": example_id, "method": method, "scores": values, "gold": GOLD})
    output = tmp_path / "07_model_output"
    output.mkdir()
    pd.DataFrame(rows).to_parquet(output / "rationale_predictions_sst2.parquet")
    for name in ("token_scores_sst2", "gold_token_scores_sst2"):
        pd.DataFrame(scores).to_parquet(output / f"{name}.parquet")
    return tmp_path


def test_the_fold_view_scores_filters_sorts_and_pages(data_root):
    view = load_fold_view(data_root, "heldout_sst2")
    assert view.classes == ["negative", "positive"] and view.methods == ["expnet_plus", "saliency"]
    assert view.aurocs["predicted"]["expnet_plus"].to_dict() == {"ex:a": 1.0, "ex:b": 0.0, "ex:c": 0.5}
    assert view.aurocs["predicted"]["saliency"].to_dict() == {"ex:a": 0.0, "ex:b": 0.0, "ex:c": 0.5}
    disagreement = view.disagreement("predicted", "expnet_plus", "saliency")
    assert disagreement["ex:a"] == pytest.approx(2.0) and disagreement["ex:b"] == pytest.approx(0.0)
    assert np.isnan(disagreement["ex:c"])  # a constant map has no ranking

    ids = lambda page: [e["example_id"] for e in page.examples]  # noqa: E731
    assert ids(view.query()) == ["ex:a", "ex:b", "ex:c"]
    assert ids(view.query(subset="mispredicted")) == ["ex:b"]
    assert ids(view.query(subset="correct", label=0)) == ["ex:c"]
    assert ids(view.query(sort="auroc", method="expnet_plus")) == ["ex:b", "ex:c", "ex:a"]
    assert ids(view.query(sort="auroc", method="expnet_plus", descending=True)) == ["ex:a", "ex:c", "ex:b"]
    assert ids(view.query(sort="disagreement", method="expnet_plus", versus="saliency", descending=True)) == \
        ["ex:a", "ex:b", "ex:c"]  # undefined last
    paged = view.query(page=2, page_size=2)
    assert (ids(paged), paged.total, paged.pages) == (["ex:c"], 3, 2)
    example = view.example("ex:b")
    assert example["tokens"] == ["bad", "dull", "film", "."] and example["gold"] == GOLD
    assert (example["label_name"], example["predicted_name"], example["correct"]) == ("negative", "positive", False)
    assert view.example("ex:b", mode="gold")["explained_name"] == "negative"
    assert view.example("ex:b")["explained_name"] == "positive"
    for bad in (dict(mode="both"), dict(subset="wrong"), dict(sort="auroc", method="lime"), dict(label=5)):
        with pytest.raises(InputError):
            view.query(**bad)


def test_a_fold_without_outputs_names_what_is_missing_and_the_command(data_root):
    (data_root / "07_model_output" / "gold_token_scores_sst2.parquet").unlink()
    problem = missing_outputs(data_root, "heldout_sst2")
    assert "07_model_output/gold_token_scores_sst2.parquet" in problem and "kedro run --pipeline crosstask" in problem
    with pytest.raises(MissingFoldOutputs, match="no outputs of fold heldout_sst2"):
        load_fold_view(data_root, "heldout_sst2")
    with pytest.raises(InputError, match="unknown fold"):
        load_fold_view(data_root, "../heldout_sst2")


def test_paths_stay_inside_the_data_folder(tmp_path):
    assert inside(tmp_path, "09_explorer", "x.txt") == (tmp_path / "09_explorer" / "x.txt").resolve()
    for parts in (("..", "x"), ("09_explorer", "..", "..", "x"), ("/etc/passwd",)):
        with pytest.raises(InputError, match="outside the data folder"):
            inside(tmp_path, *parts)
    workspace = Workspace(tmp_path)
    for name in ("../x.txt", "..", "a/b.txt", ".hidden.txt", ""):
        with pytest.raises(InputError, match="plain file name"):
            workspace.save_texts("heldout_sst2", name, "a text")
    with pytest.raises(InputError, match="unknown input format"):
        workspace.save_texts("heldout_sst2", "texts.exe", "a text")
    for session in ("../../x", "ABCDEF123456", "0123456789ab/.."):
        with pytest.raises(InputError, match="not a session id"):
            workspace.session_folder("heldout_sst2", session)
    with pytest.raises(InputError, match="unknown fold"):
        workspace.fold_folder("..")
    assert not any(tmp_path.parent.glob("x.txt"))


def test_annotations_are_written_as_span_jsonl_and_refused_with_the_text_id(data_root):
    from learned_attribution.core.data.rationales import read_rationale_file
    from learned_attribution.services.explain import FoldExplainer

    explainer = FoldExplainer.from_fold("heldout_sst2", models_dir=data_root / "06_models", device="cpu")
    workspace = Workspace(data_root)
    texts = workspace.save_texts("heldout_sst2", "mine.jsonl", "".join(
        json.dumps({"id": f"t{i}", "text": text}) + "\n" for i, text in enumerate(
            ["A great , fun movie .", "A dull and slow film .", "The plot is sharp"])))
    session = workspace.new_session("heldout_sst2", texts, explainer, k=3)
    items = {item["id"]: item for item in workspace.suggested("heldout_sst2", session)["items"]}
    assert items["t0"]["words"] == ["A", "great", ",", "fun", "movie", "."]
    path = workspace.save_annotations("heldout_sst2", session, [
        {"id": "t0", "text": items["t0"]["text"], "words": [1, 3], "label": "positive"},
        {"id": "t1", "text": items["t1"]["text"], "words": [2], "label": 0}])
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["spans"] == [[2, 7], [10, 13]] and lines[0]["label"] == "positive"
    assert lines[1]["spans"] == [[7, 10]] and lines[1]["label"] == "negative"
    read = read_rationale_file(path, class_names=explainer.classes, tokenizer=explainer.classifier.tokenizer)
    assert read["word_rationale"].tolist() == [[0, 1, 0, 1, 0, 0], [0, 0, 1, 0, 0, 0]]
    assert read["label"].tolist() == [1, 0]
    assert workspace.annotations("heldout_sst2", session)[0]["words"] == [1, 3]

    refused = {"changed": ({"id": "t2", "text": "The plot is dull", "words": [0]}, "text t2: its text has changed"),
               "empty": ({"id": "t2", "text": items["t2"]["text"], "words": []}, "text t2: no word marked"),
               "unknown": ({"id": "t9", "text": "x", "words": [0]}, "text t9: not one of the texts suggested"),
               "class": ({"id": "t2", "text": items["t2"]["text"], "words": [0], "label": "neutral"},
                         "text t2: class must be a class name or index, got 'neutral'"),
               "range": ({"id": "t2", "text": items["t2"]["text"], "words": [7]}, "text t2: word 7 out of range")}
    for annotation, message in refused.values():
        with pytest.raises(InputError, match=message):
            workspace.save_annotations("heldout_sst2", session, [annotation])
    assert workspace.annotations("heldout_sst2", session)[0]["words"] == [1, 3]  # the saved file is untouched


def test_one_refit_per_fold_at_a_time_and_a_failure_is_one_line():
    jobs, release = RefitJobs(), threading.Event()

    def blocked(job, progress):
        progress("fitting", 0.5)
        release.wait(10)
        return {"refit": "refit_1"}

    first = jobs.start("heldout_sst2", "0123456789ab", blocked)
    with pytest.raises(RefitRunning, match="a refit of heldout_sst2 is running .*one refit per fold at a time"):
        jobs.start("heldout_sst2", "ba9876543210", blocked)
    other = jobs.start("heldout_cola", "ba9876543210", lambda job, progress: {})  # another fold runs beside it
    assert first.record()["stage"] == "fitting" and first.record()["fraction"] == 0.5
    release.set()
    jobs.wait(10)
    assert (first.state, first.result, other.state) == ("done", {"refit": "refit_1"}, "done")

    def failing(job, progress):
        raise RuntimeError("the disk is full\nsecond line")

    failed = jobs.start("heldout_sst2", "0123456789ab", failing)
    jobs.wait(10)
    assert failed.state == "failed" and failed.error == "RuntimeError: the disk is full second line"
    assert jobs.job("heldout_sst2", "0123456789ab") is failed


def test_the_colours_diverge_around_zero_and_wordpieces_join():
    cells = heat_cells([("a", False), ("b", True), ("c", True)], [-2.0, 1.0, None], signed=True, marked=[0, 1, 0])
    assert cells[0]["style"].startswith(f"background:rgba({AGAINST[0]},{AGAINST[1]},{AGAINST[2]},1.00)")
    assert cells[1]["style"] == f"background:rgba({FOR[0]},{FOR[1]},{FOR[2]},0.50)" and cells[1]["gold"]
    assert cells[2]["none"] and cells[2]["title"] == "no score"
    unsigned = heat_cells([("a", False), ("b", True)], [0.2, 0.6], signed=False)
    assert [c["style"][-5:-1] for c in unsigned] == ["0.00", "1.00"] and unsigned[1]["title"] == "0.6000"
    assert display_tokens(["war", "##th", "##og", "!"]) == [("war", False), ("th", False), ("og", False), ("!", True)]
    assert display_tokens(["▁The", "▁film", "s"]) == [("The", False), ("film", True), ("s", True)]


def test_a_port_outside_the_range_or_taken_is_one_line():
    import socket

    from learned_attribution.adapters.explorer.server import check_port

    for port in (0, 70000, -1):
        with pytest.raises(InputError, match=f"--port {port}: a port is 1 to 65535"):
            check_port("127.0.0.1", port)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(InputError, match=f"^port {port} on 127.0.0.1 is in use: choose another with --port N$"):
            check_port("127.0.0.1", port)


def test_the_summary_is_each_methods_mean_auroc_with_its_interval_over_the_matching_examples(data_root):
    view = load_fold_view(data_root, "heldout_sst2")
    rows = {row["method"]: row for row in view.summary()}
    assert rows["expnet_plus"]["n"] == 3 and rows["expnet_plus"]["mean"] == pytest.approx(0.5)  # (1 + 0 + 0.5) / 3
    assert rows["saliency"]["mean"] == pytest.approx(1 / 6)
    assert rows["expnet_plus"]["low"] <= 0.5 <= rows["expnet_plus"]["high"]
    wrong = {row["method"]: row for row in view.summary(subset="mispredicted")}
    assert (wrong["expnet_plus"]["n"], wrong["expnet_plus"]["mean"], wrong["expnet_plus"]["low"]) == (1, 0.0, 0.0)


def test_the_refit_plan_names_the_stored_choice_and_the_curves_expectation_or_the_default(data_root):
    from learned_attribution.core.models.learned.fewshot import FOLD_PRIOR, ChosenRefit, FewShotChoice, FewShotSettings
    from learned_attribution.services.bundle import FEWSHOT, write_fewshot_choice
    from learned_attribution.services.explore.explorer import Explorer

    explorer = Explorer(data_root, device="cpu")
    default = explorer.fewshot_plan("heldout_sst2", 8)
    assert not default["stored"] and "documented default" in default["choice"] and default["expected"] is None

    schedule = FewShotSettings(steps=20, batch_size=8)
    write_fewshot_choice(FewShotChoice("heldout_sst2", {8: ChosenRefit(FOLD_PRIOR, "any", schedule),
                                                        32: ChosenRefit(FOLD_PRIOR, "any", schedule)}),
                         data_root / "06_models" / "heldout_sst2" / FEWSHOT)
    summary = data_root / "08_reporting" / "fewshot_summary.csv"
    summary.parent.mkdir()
    pd.DataFrame({"fold": ["heldout_sst2"] * 2, "k": [8, 32], "draws": [5, 5], "auroc": [0.71, 0.74],
                  "auroc_low": [0.70, 0.73], "auroc_high": [0.72, 0.75], "baseline_auroc": [0.70, 0.70],
                  "best_baseline": ["saliency"] * 2}).to_csv(summary, index=False)
    for n, k, auroc in ((8, 8, 0.71), (20, 8, 0.71), (40, 32, 0.74), (3, 8, 0.71)):  # the nearest k below (or the
        plan = explorer.fewshot_plan("heldout_sst2", n)                               # smallest), as the refit reads
        assert plan["stored"] and plan["k"] == k and f"at k = {k} (of [8, 32])" in plan["choice"]
        assert plan["expected"]["auroc"] == auroc and plan["expected"]["baseline"] == "saliency"
