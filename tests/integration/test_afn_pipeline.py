"""`kedro run --pipeline afn --env smoke` in a real Kedro session with a user sentence file and a user pair file
given as run parameters, outputs redirected to a temporary folder; the MLflow hook's run of it."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project
from mlflow.tracking import MlflowClient

PROJECT = Path(__file__).resolve().parents[2]


@pytest.mark.integration
def test_afn_pipeline_on_smoke(tmp_path):
    bootstrap_project(PROJECT)
    data, uri = tmp_path / "data", f"sqlite:///{tmp_path}/mlflow.db"
    sentences, user_pairs = tmp_path / "sentences.txt", tmp_path / "pairs.tsv"
    sentences.write_text("a day at the park .\n\nthe film is good\n", encoding="utf-8")
    user_pairs.write_text("the film is good\tthe film is bad\nsame words\tsame words\n", encoding="utf-8")
    # as `--params "afn_data_root=...,afn.corpus.user_sentences_file=...,afn.pairs.user_pairs_file=..."` gives them
    runtime_params = {"afn_data_root": str(data), "mlflow": {"tracking_uri": uri},  # the one store
                      "afn": {"corpus": {"user_sentences_file": str(sentences)},
                              "pairs": {"user_pairs_file": str(user_pairs)}}}
    project_report = PROJECT / "data/08_reporting/afn_report.md"
    before = project_report.read_text() if project_report.exists() else None
    with KedroSession.create(project_path=PROJECT, env="smoke", runtime_params=runtime_params) as session:
        session.run(pipeline_name="afn")

    report = data / "08_reporting/afn_report.md"
    for path in [report, *(data / "08_reporting/afn" / name for name in (
            "strength_by_layer.png", "rh_by_layer.png", "shift_heatmaps.png", "headline.json", "skipped.csv"))]:
        assert path.is_file() and path.stat().st_size > 0, path

    strengths = pd.read_parquet(data / "07_model_output/afn_token_strengths.parquet")
    by_source = strengths.groupby("source")["sentence_id"].nunique()
    assert by_source.to_dict() == {"sst": 40, "user": 2}  # conf/smoke/parameters_afn.yml: n_phrases; an empty line
    assert sorted(strengths["layer"].unique()) == list(range(7))  # MiniLM: embeddings + 6 blocks
    assert (strengths["strength"] > 0).all() and np.isfinite(strengths["strength"]).all()
    per_sentence = strengths.groupby(["sentence_id", "layer"])
    assert (per_sentence["high"].mean() <= 0.5).all()  # above the 75th percentile: at most a quarter, give or take ties
    assert ((strengths["strength"] > strengths["tau"]) == strengths["high"]).all()
    assert not strengths["token"].isin(["[CLS]", "[SEP]"]).any()

    pairs = pd.read_parquet(data / "07_model_output/afn_pair_shifts.parquet")
    context = pairs[pairs["kind"] == "context"].groupby("source")["pair_id"].nunique()
    assert context.to_dict() == {"sst_minimal_pair": 12, "example": 1, "user_file": 1}  # one user pair is identical
    assert pairs.loc[pairs["kind"] == "prompt", "pair_id"].nunique() == 10
    assert pairs["r_h"].between(0, 1).all()
    embeddings = pairs[(pairs["layer"] == 0) & (pairs["kind"] == "context")]
    # at the embedding output only the swapped word (and positions after a subword-count change) differ
    assert (embeddings["mean_shift_changed"] > embeddings["mean_shift_unchanged"]).all()
    assert (pairs.loc[pairs["layer"] == 0, "cls_shift"] == 0).all()  # [CLS] cannot see the text before layer 1

    head = json.loads((data / "08_reporting/afn/headline.json").read_text())
    assert head["afn_layer"] == 4 and head["n_layers"] == 6
    assert 0 < head["share_high_context"] < 0.5 and 0 <= head["r_h_context"] <= 1
    assert head["content_function_ratio"] > 0
    text = report.read_text()
    assert "R_H" in text and f"{100 * head['r_h_context']:.1f}%" in text

    skipped = pd.read_csv(data / "08_reporting/afn/skipped.csv")
    assert skipped[["item", "reason"]].values.tolist() == [[f"{sentences}:2", "empty sentence"],
                                                           [f"{user_pairs}:2", "alignment failed"]]
    assert head["n_corpus_user_sentences"] == 2 and head["n_skipped"] == 2

    client = MlflowClient(tracking_uri=uri)
    [logged] = client.search_runs([client.get_experiment_by_name("afn").experiment_id])
    assert logged.info.status == "FINISHED" and logged.info.run_name == "afn"
    assert logged.data.metrics["r_h_context"] == pytest.approx(head["r_h_context"])
    assert logged.data.params["afn.corpus.n_phrases"] == "40"
    inputs = {i.dataset.name for i in logged.inputs.dataset_inputs}
    assert {"afn.user_sentences", "afn.user_pairs", "raw_sst2_trees_dev"} <= inputs  # hashed
    artifacts = {a.path for a in client.list_artifacts(logged.info.run_id)}
    assert {"afn_report.md", "layer_comparison.csv", "plots"} <= artifacts
    # everything went to tmp_path: the project's own report is untouched
    assert (project_report.read_text() if project_report.exists() else None) == before
