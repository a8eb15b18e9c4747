"""Smoke tests of the benchmark scripts: `main([... "--quick"])` on the packaged encoder with a random head and the
raw SST-2 test sentences (what a fresh clone has). Not timed: only the tables' shape and sanity."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest


PROJECT_ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = PROJECT_ROOT / "benchmarks"
QUICK = ["--quick", "--source", "raw", "--threads", "1"]


@pytest.fixture
def scripts(monkeypatch):
    """The two scripts imported as modules (they live outside the package, beside the modules they import)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import attribution_throughput
    import feature_extraction

    return feature_extraction, attribution_throughput


def positive_finite(values: pd.Series) -> bool:
    return bool(len(values)) and all(math.isfinite(v) and v > 0 for v in values)


def feature_table(module, tmp_path, name: str) -> pd.DataFrame:
    """A feature extraction script's quick run, its table read back (the columns all three write)."""
    module.main([*QUICK, "--output-dir", str(tmp_path)])
    table = pd.read_csv(tmp_path / name)
    from harness import FEATURE_COLUMNS

    assert list(table.columns) == FEATURE_COLUMNS + ["chunk_size"]
    return table


def assert_timed_beside(table: pd.DataFrame, references: list[str]) -> None:
    """Positive, finite speeds and ratios, and each reference divided by itself, round by round, exactly 1."""
    assert positive_finite(table["examples_per_s"])
    assert positive_finite(table["ratio_to_reference"])
    is_reference = table["method"] == table["reference"]
    assert sorted(table.loc[is_reference, "method"]) == references
    assert np.allclose(table.loc[is_reference, "ratio_to_reference"], 1.0)


@pytest.mark.slow
def test_feature_extraction_quick(scripts, tmp_path):
    feature_extraction, _ = scripts
    table = feature_table(feature_extraction, tmp_path, "feature_extraction.csv")
    methods = {section: list(group["method"]) for section, group in table.groupby("section", sort=False)}
    assert methods == {"throughput": ["forward_plain", "forward_with_attentions", "attention_features"]}
    assert_timed_beside(table, ["forward_plain"])


@pytest.mark.slow
def test_bf16_autocast_quick(scripts, tmp_path):
    import bf16_autocast

    table = feature_table(bf16_autocast, tmp_path, "bf16_autocast.csv")
    methods = {section: list(group["method"]) for section, group in table.groupby("section", sort=False)}
    assert methods == {"precision": ["forward_fp32", "forward_bf16", "train_step_fp32", "train_step_bf16"]}
    assert_timed_beside(table, ["forward_fp32", "train_step_fp32"])


@pytest.mark.slow
def test_extraction_memory_quick(scripts, tmp_path):
    import extraction_memory
    import harness

    memory = feature_table(extraction_memory, tmp_path, "extraction_memory.csv")
    methods = {section: list(group["method"]) for section, group in memory.groupby("section", sort=False)}
    assert methods == {"memory": ["forward_plain"] * 2 + ["extraction_chunked"] * 2 + ["extraction_unchunked"] * 2}
    assert positive_finite(memory["ratio_to_reference"])

    # --quick extracts 4 and 12 texts. One feature row per token that is not [CLS], [SEP] or padding:
    # len(input_ids) - 2 per text, whatever the chunking.
    from learned_attribution.core.models.loading import PACKAGED_ENCODER, load_tokenizer

    tokenizer = load_tokenizer(PACKAGED_ENCODER)
    pool = harness.raw_sst2_examples(tokenizer, PROJECT_ROOT / "data/01_raw/sst2/glue/test.tsv", 128)
    sample, _ = harness.take_examples(pool, 12, 13)
    for mode in ("chunked", "unchunked"):
        rows = memory[memory["method"] == f"extraction_{mode}"]
        assert list(rows["n_examples"]) == [4, 12]
        expected = [int((sample["input_ids"].iloc[:n].map(len) - 2).sum()) for n in (4, 12)]
        assert list(rows["output_rows"]) == expected
    assert list(memory["chunk_size"].iloc[2:]) == [4, 4, 4, 12]
    assert memory["chunk_size"].iloc[:2].isna().all() and memory["output_rows"].iloc[:2].isna().all()
    assert positive_finite(memory["peak_python_mib"])


def bare_data_root(tmp_path):
    """A data folder with the raw data only: the benchmark finds no pipeline outputs (no trained ExpNet, ExpNet+ or
    student), whatever this checkout has run, so it times the untrained default networks."""
    root = tmp_path / "data"
    root.mkdir()
    (root / "01_raw").symlink_to(PROJECT_ROOT / "data" / "01_raw")
    return root


@pytest.mark.slow
def test_attribution_throughput_quick(scripts, tmp_path):
    _, attribution_throughput = scripts
    from learned_attribution.core.explainers import METHODS
    from one_text_cost import CAPTUM_METHODS

    attribution_throughput.main([*QUICK, "--output-dir", str(tmp_path), "--data-root", str(bare_data_root(tmp_path))])

    table = pd.read_csv(tmp_path / "attribution_throughput.csv", keep_default_na=False,
                        na_values={"examples_per_s": ["", "nan"]})
    assert list(table.columns) == attribution_throughput.ATTRIBUTION_COLUMNS
    import yaml

    from learned_attribution.services.config import DEFAULT_VARIANTS
    from learned_attribution.services.config import expnet_plus_recipe

    # The main job's ExpNet+ recipe and its shape-free variant (crosstask.expnet_plus), from the variant catalogue.
    crosstask = yaml.safe_load((PROJECT_ROOT / "conf/base/parameters_crosstask.yml").read_text())["crosstask"]
    catalogue = yaml.safe_load((PROJECT_ROOT / "conf/base/parameters_expnet_plus_variants.yml").read_text())[
        "expnet_plus_variants"]
    variants = {v.name: v for v in expnet_plus_recipe(crosstask["expnet_plus"], catalogue, 0).variants}
    students = [f"student:{v}" for v in DEFAULT_VARIANTS]
    expected = [n for n in METHODS if n not in ("expnet_plus", "student")] + [f"expnet_plus:{v}" for v in variants]
    expected += students
    expected += ["api:expnet_paper", "api:saliency", *(f"api:expnet_plus:{v}" for v in variants)]
    assert sorted(table["method"]) == sorted(["forward_all", "forward_subset", *expected])
    assert (table["error"] == "").all()
    assert positive_finite(table["examples_per_s"])
    assert positive_finite(table["ratio_to_forward"])
    # Every entry (the API's too) also one text at a time, beside a forward pass at batch 1.
    assert positive_finite(table["examples_per_s_batch1"]) and positive_finite(table["ratio_to_forward_batch1"])
    by_method = table.set_index("method")
    assert by_method.loc[["forward_all", "forward_subset"], "ratio_to_forward"].tolist() == [1.0, 1.0]
    # --quick runs 8 texts, the expensive methods on the first 2, LIME/KernelSHAP with 16 samples and
    # IG with 4 steps: model calls per example are n_samples, and n_steps + 2 (see IntegratedGradients).
    assert by_method.at["forward_all", "n_examples"] == 8
    for expensive in attribution_throughput.DEFAULT_EXPENSIVE:
        assert by_method.at[expensive, "n_examples"] == 2
        assert by_method.at[expensive, "reference"] == "forward_subset"
    assert by_method.at["lime", "model_calls_per_example"] == 16
    assert by_method.at["integrated_gradients", "model_calls_per_example"] == 6
    assert by_method.at["expnet_paper", "model_calls_per_example"] == 1
    plus = [m for m in by_method.index if m.startswith("expnet_plus:")]
    assert (by_method.loc[[m for m in by_method.index if m.startswith("api:")], "family"] == "api").all()
    assert len(plus) >= 2 and (by_method.loc[plus, "model_calls_per_example"] == 1).all()
    assert (tmp_path / "attribution_throughput.png").stat().st_size > 1000

    targets = pd.read_csv(tmp_path / "attribution_targets.csv")
    # ExpNet (paper) targets, one cost target per ExpNet+ variant, and the public API's: ExpNet and the
    # non-gradient variants against the forward pass, the saliency variants against the saliency baseline.
    api = targets[targets["target"].str.startswith("api:")]
    saliency_variants = [v for v, spec in variants.items() if "saliency" in spec.feature_sets]
    no_gradients = [v for v, spec in variants.items() if set(spec.feature_sets) == {"attention"}]
    assert sorted(api["target"]) == sorted(
        ["api:expnet_paper / plain forward pass (no gradients, end to end)",
         *(f"api:expnet_plus:{v} / saliency baseline" for v in saliency_variants),
         *(f"api:expnet_plus:{v} / plain forward pass (no gradients, end to end)" for v in no_gradients)])
    # Fast single requests: the API's one-text call against captum's own, per gradient method, and IG batched
    # against alone.
    one_text = targets[targets["target"].str.contains("one-text call|alone per text")]
    assert sorted(one_text["target"]) == sorted(
        [*(f"{m} batch-1 cost <= captum's own one-text call (captum s / API s)" for m in CAPTUM_METHODS),
         "integrated_gradients batched per text <= alone per text (alone s / batched s)"])
    assert len(targets) == 5 + len(plus) + len(students) + len(api) + len(one_text)
    assert sorted(targets.loc[targets["target"].str.startswith("student:"), "target"]) == [
        "student:student_attention / plain forward pass (saliency's own ratio)",
        "student:student_encoder / plain forward pass (saliency's own ratio)",
        "student:student_forward / plain forward pass (no gradients)",
        "student:student_forward_hidden / plain forward pass (no gradients)",
        "student:student_gradient / plain forward pass (saliency's own ratio)",
        "student:student_gradient_hidden / plain forward pass (saliency's own ratio)"]
    assert positive_finite(targets["measured"])


@pytest.mark.slow
def test_attribution_throughput_batch1_columns(scripts, tmp_path):
    """The one-text-at-a-time columns: every entry at batch 1 beside a forward pass at batch 1, captum's own
    one-text call beside the API's for the gradient methods (same scores), IG batched beside alone."""
    _, attribution_throughput = scripts
    methods = ["saliency", "input_x_gradient", "integrated_gradients", "raw_attention"]
    attribution_throughput.main([*QUICK, "--output-dir", str(tmp_path), "--methods", *methods,
                                 "--batch1-texts", "3"])
    table = pd.read_csv(tmp_path / "attribution_throughput.csv").set_index("method")
    assert set(attribution_throughput.BATCH1_COLUMNS) <= set(table.columns)
    assert sorted(table.index) == sorted(["forward_all", "forward_subset", *methods])
    assert positive_finite(table["examples_per_s_batch1"]) and positive_finite(table["ratio_to_forward_batch1"])
    assert table.loc[["forward_all", "forward_subset"], "ratio_to_forward_batch1"].tolist() == [1.0, 1.0]
    # --quick: 2 expensive texts (IG's batch-1 texts too), the cheap methods on --batch1-texts.
    assert table["n_examples_batch1"].to_dict() == {"forward_all": 3, "forward_subset": 2, "saliency": 3,
                                                    "input_x_gradient": 3, "integrated_gradients": 2,
                                                    "raw_attention": 3}
    from one_text_cost import CAPTUM_METHODS

    captum = list(CAPTUM_METHODS)
    for column in ("api_one_text_s", "captum_one_text_s", "api_vs_captum_one_text"):
        assert positive_finite(table.loc[captum, column]) and table.drop(index=captum)[column].isna().all()
    assert (table.loc[captum, "captum_max_abs_difference"] < 1e-4).all()  # the same scores as captum's
    assert positive_finite(table.loc[["integrated_gradients"], "batched_vs_alone"])
    assert table.drop(index="integrated_gradients")["batched_vs_alone"].isna().all()
    targets = pd.read_csv(tmp_path / "attribution_targets.csv")
    assert targets["target"].str.contains("one-text call|alone per text").sum() == 4


def test_attribution_throughput_without_batch1(scripts, tmp_path):
    _, attribution_throughput = scripts
    attribution_throughput.main([*QUICK, "--output-dir", str(tmp_path), "--methods", "saliency", "--no-batch1"])
    table = pd.read_csv(tmp_path / "attribution_throughput.csv")
    assert list(table.columns) == attribution_throughput.ATTRIBUTION_COLUMNS
    assert table[attribution_throughput.BATCH1_COLUMNS].isna().all().all()


@pytest.mark.slow
def test_distributed_scaling_quick(scripts, tmp_path):
    import distributed_scaling

    table = distributed_scaling.main(["--quick", "--source", "raw", "--workers", "1", "2", "--output-dir",
                                      str(tmp_path)])
    assert list(table["workers"]) == [0, 1, 2] and list(table.columns) == distributed_scaling.COLUMNS
    assert positive_finite(table["examples_per_s"]) and table["speedup_vs_in_process"].iloc[0] == 1.0
    # Every configuration returns the in-process scores (same batches, per-example seeds).
    assert (table["max_abs_difference_vs_in_process"] < 1e-5).all()
    assert (tmp_path / "distributed_scaling.png").stat().st_size > 0


@pytest.mark.slow
def test_gpu_check_agreement_is_exact_on_the_same_device_and_fails_on_a_changed_model(scripts, tmp_path, monkeypatch):
    """Where there is no GPU, the script's agreement path runs CPU against CPU: the same arithmetic, so every method
    must agree exactly (perturbation masks are seeded per example). The check must also be able to fail: with 5%
    seeded noise on the compared copy's weights, every method leaves its tolerance. Asking for CUDA where there is
    none is a clear exit."""
    import copy

    import gpu_check
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="CUDA is not available"):
            gpu_check.main(["--device", "cuda", "--quick", "--output-dir", str(tmp_path)])
    summary = gpu_check.main(["--device", "cpu", "--quick", "--skip-throughput", "--skip-smoke", "--output-dir",
                              str(tmp_path)])
    table = pd.read_csv(tmp_path / "gpu_check_agreement.csv")
    from learned_attribution.core.explainers import METHODS

    assert {m.split(":")[0] for m in table["method"]} == set(METHODS)
    assert summary["agreement_pass"] and (table["max_relative_difference"] == 0).all()

    def changed_copy(model):
        changed = copy.deepcopy(model)
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for parameter in changed.parameters():
                parameter.mul_(1 + 0.05 * torch.randn(parameter.shape, generator=generator))
        return changed

    monkeypatch.setattr(gpu_check, "copy", type("Copy", (), {"deepcopy": staticmethod(changed_copy)}))
    setup = gpu_check.load_setup("sst2", 8, 13)
    changed = gpu_check.agreement(setup, torch.device("cpu"), 8, 4, True, 13).set_index("method")
    # The encoder student scores with its own copy of the encoder (made before the change): the classifier's
    # weights reach it only through the predicted class, which a 5% change leaves as it was on these texts (the
    # attention student reads the changed classifier's hidden states, so it is among those that must not agree).
    reads_classifier = changed.drop(index="student:student_encoder")
    assert not reads_classifier["agrees"].any(), reads_classifier.loc[reads_classifier["agrees"],
                                                                      "max_relative_difference"]


@pytest.mark.parametrize("family", ["bert", "mpnet", "roberta", "xlm-roberta", "deberta-v2"])
def test_the_api_entries_words_give_back_the_same_tokens_in_every_family(scripts, tiny_tokenizer, family):
    """`words_of` reads word boundaries by the tokenizer's own convention (WordPiece `##`, byte-level BPE `Ġ`,
    SentencePiece `▁`): the words it spells, given to a tokenizer as a word list (as the API and the pipeline give
    them), are the same subword tokens, so the api: entries explain what the other entries explain."""
    from learned_attribution.core.models.architectures import prepare_tokenizer

    from attribution_steps import words_of

    tokenizer = tiny_tokenizer(family)
    for words in (["the", "film", "was", "unbelievable", "!"], ["boring", ",", "not", "good", "films"],
                  ["The", "plot", "xyz", "end"]):
        ids = prepare_tokenizer(tokenizer)(words, is_split_into_words=True)["input_ids"]
        spelled = words_of(ids, tokenizer)
        assert prepare_tokenizer(tokenizer)(spelled, is_split_into_words=True)["input_ids"] == ids, (words, spelled)


def test_finetune_step_profiles_both_configurations(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import finetune_step

    table = finetune_step.main(["--quick", "--task", "cola", "--bf16", "off", "--output-dir", str(tmp_path)])
    assert list(table["configuration"]) == ["every weight", "word embeddings frozen"]
    full, frozen = table["trained_parameters"]
    assert frozen < full  # MiniLM's word embeddings (30,522 x 384) are not among the frozen run's parameters
    assert full - frozen == 30522 * 384
    for column in ("forward_s", "backward_s", "clip_s", "optimizer_s", "step_s", "step_vs_every_weight"):
        assert positive_finite(table[column])
    assert table["kernels"].str.contains("bf16 autocast off").all()
    assert (tmp_path / "finetune_step.csv").is_file()


def test_stage_benchmark_moves_only_the_data_root_and_reads_wall_time(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import stage_benchmark
    import yaml

    conf = stage_benchmark.conf_copy(tmp_path, "smoke", tmp_path / "data")
    assert yaml.safe_load((conf / "smoke" / "globals.yml").read_text())["data_root"] == str(tmp_path / "data")
    assert (conf / "base" / "catalog.yml").read_text() == (PROJECT_ROOT / "conf" / "base" / "catalog.yml").read_text()
    timings = pd.DataFrame({"stage": ["classifiers", "classifiers", "folds"], "seconds": [60.0, 30.0, 20.0],
                            "start_s": [0.0, 60.0, 90.0], "end_s": [60.0, 90.0, 130.0], "kernels": ["k"] * 3})
    rows = pd.DataFrame(stage_benchmark.stage_rows("slow", {"timings": timings, "seconds": 140.0, "peak_gb": 1.5}))
    assert list(rows["stage"]) == ["classifiers", "folds", "total"]
    assert list(rows["wall_min"] * 60) == [90.0, 40.0, 130.0] and list(rows["node_min"] * 60) == [90.0, 20.0, 110.0]
    # (the folds node started 20 s after the classifiers' end: its inputs' loading counts in its stage's wall)
    assert rows["peak_rss_gb"].iloc[-1] == 1.5


def test_stage_benchmark_refuses_slow_kernels_without_avx2(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import stage_benchmark

    monkeypatch.setattr(stage_benchmark, "cpu_flags", lambda: {"sse2", "neon"})
    with pytest.raises(SystemExit, match="lacks AVX2: the slow kind's kernels"):
        stage_benchmark.main(["--output-dir", str(tmp_path)])


def test_label_budget_grid_keeps_the_reference_and_says_when_the_student_is_apart(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import label_budget_grid as grid

    # the same reference at every point: 2,000 samples, seed 1 (the teacher's seed 0, plus one)
    for samples, factor in ((200, 10), (50, 40)):
        params = dict(p.split("=") for p in grid.point_params(4 * 2000 // samples, samples, 60).split(","))
        assert params["amortize.reference_factor"] == str(factor)
        assert params["amortize.teacher.settings.seed"] == "0" and params["compute.bf16"] == "false"
    with pytest.raises(SystemExit, match="multiple"):
        grid.point_params(600, 300, 60)
    folder = tmp_path / "sst2_600x200"
    folder.mkdir()
    teacher = "teacher (kernel_shap (n_samples 200, seed 0))"
    pd.DataFrame({"method": ["student", teacher], "spearman": [0.80, 0.70], "spearman_low": [0.76, 0.66],
                  "spearman_high": [0.84, 0.74], "n_examples": [60, 60]}).to_csv(folder / "sst2_fidelity.csv")
    pd.DataFrame({"method": ["student", teacher, "saliency"], "comprehensiveness": [0.27, 0.30, 0.2],
                  "comprehensiveness_low": [0.2] * 3, "comprehensiveness_high": [0.4] * 3}).to_csv(
        folder / "sst2_faithfulness.csv")
    pd.DataFrame({"method": ["forward", "student", "saliency", teacher],
                  "ratio_to_forward": [1.0, 0.5, 0.5, 0.01]}).to_csv(folder / "sst2_cost.csv")
    pd.DataFrame({"variant": ["student_attention", "student_encoder"], "train_spearman": [0.9, 0.8],
                  "val_spearman": [0.75, 0.7], "best_epoch": [5, 9], "selected": [True, False], "n_train": [510] * 2,
                  "n_val": [90] * 2}).to_csv(folder / "sst2_variants.csv")
    (folder / "wall_s").write_text("600\n")
    row = grid.grid_row("sst2", 600, 200, folder)
    assert row["beats_labels"] and row["apart"]  # 0.76 is above 0.74
    assert row["teacher_passes"] == 120_000 and row["selected"] == "student_attention"
    assert row["comprehensiveness_ratio"] == pytest.approx(0.9) and row["throughput_x_teacher"] == pytest.approx(50)
    assert row["val_student_encoder"] == 0.7 and row["wall_min"] == 10
    assert ("| sst2 600 x 200 | 120,000 | 0.800 [0.760, 0.840] | 0.700 [0.660, 0.740] | apart | 0.90x | 2.00x | 50x | "
            "student_attention | 0.700 / 0.750 | 10.0 |") in grid.grid_markdown(pd.DataFrame([row]))
    assert "| sst2 600x200 (600, n = 60) | 0.800 [0.760, 0.840] | 0.700 [0.660, 0.740] | yes |" in \
        grid.students_table({"sst2 600x200": grid.point_tables("sst2", folder)})


def test_label_budget_grid_runs_what_its_tables_need_and_not_the_main_job(monkeypatch):
    """The nodes a point runs write every table the grid reads, and read nothing of the main job's folds, so the
    grid runs after the classifiers alone."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import label_budget_grid as grid
    from learned_attribution.pipelines import amortize
    from learned_attribution.services.reporting.amortize import STUDENT_TABLES

    namespace = "student_sst2"
    point = amortize.create_pipeline().filter(node_namespaces=[namespace],
                                              to_nodes=[f"{namespace}.{name}" for name in grid.NODES])
    outputs = {name.removeprefix(f"{namespace}.").removeprefix("student_") for name in point.all_outputs()}
    assert set(STUDENT_TABLES) - outputs == {"plausibility"}  # the one table the grid reads only where present
    assert "bundle" in outputs
    assert not [name for name in point.inputs() if name.startswith("heldout_")]
