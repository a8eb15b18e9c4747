"""A tiny trained-fold folder and classifier folders, written the way users and the pipeline write them.

The classifier folder is written by a plain `transformers` script (tiny random BERT + a WordPiece tokenizer
built from a 40-entry vocabulary); the fold's explainers are small networks written as the crosstask pipeline writes
a fold (`services/bundle.py`: its card and learned models, through `core/models/artifacts.py`), with the context the
pipeline records.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "movie", "film", "is", "was", "great", "bad",
         "not", "very", "good", "and", "but", ".", "!", ",", "plot", "actors", "boring", "fun", "##s", "##ly",
         "##ing", "love", "hate", "it", "this", "story", "so", "slow", "dull", "sharp", "funny", "sad", "end"]


def write_classifier(folder: Path, seed: int = 0, **overrides) -> Path:
    """What a user's script does: build (here: randomly initialise) a BERT classifier and save_pretrained it."""
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n")
    tokenizer = BertTokenizerFast(vocab=str(vocab), do_lower_case=True)
    settings = {"vocab_size": len(VOCAB), "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
                "intermediate_size": 32, "max_position_embeddings": 64, "num_labels": 2, "pad_token_id": 0,
                "id2label": {0: "negative", 1: "positive"}, "label2id": {"negative": 0, "positive": 1}, **overrides}
    torch.manual_seed(seed)
    model = BertForSequenceClassification(BertConfig(**settings))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def write_fold(models_dir: Path, task: str = "sst2", seed: int = 0, best_baseline: str = "saliency") -> Path:
    """models_dir/heldout_<task>/ (paper ExpNet, ExpNet+, a shape-free ExpNet+ variant, fold.json) beside
    models_dir/classifier_<task>/."""
    from learned_attribution.core.models.artifacts import explainer_context
    from learned_attribution.core.models.learned import (GatedExpNet, InputPipeline, LearnedModel, MLPSettings,
                                                         SimplexStack, Variant, head_of_columns)
    from learned_attribution.core.models.loading import load_classifier
    from learned_attribution.core.models.signals import columns_for
    from learned_attribution.services.bundle import Bundle, fold_card, write_bundle

    classifier = load_classifier(write_classifier(models_dir / f"classifier_{task}", seed=seed))
    config = classifier.model.config
    heads, layers = config.num_attention_heads, config.num_hidden_layers
    fold = f"heldout_{task}"
    context = explainer_context(classifier.model, classifier.tokenizer, fold=fold, held_out_task=task,
                                training_tasks=["cola", "hatexplain"], encoder="tiny", layer=-1, rho=0.4,
                                max_length=32)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)

    def inputs(columns: list[str], **steps) -> InputPipeline:
        return InputPipeline(columns, mean=rng.random(len(columns)).astype(np.float32) * 0.1,
                             std=(rng.random(len(columns)) + 0.5).astype(np.float32), **steps)

    paper_columns = columns_for(["attention"], heads, layers)
    paper = LearnedModel(Variant("expnet_paper", stopping="token_auroc"), inputs(paper_columns),
                         GatedExpNet(len(paper_columns), 4).eval(), calibrated_threshold=0.45, context=context)
    variant = Variant("gated_signals", feature_sets=("attention", "attention_x_gradient", "position"),
                      network_settings=MLPSettings(gating=True), standardise="per_task")
    columns = columns_for(variant.feature_sets, heads, layers)
    plus = LearnedModel(variant, inputs(columns), GatedExpNet(len(columns), 4, head_of_columns(columns)).eval(),
                        calibrated_threshold=0.5, context=context)
    shape_free = Variant("shape_free_stack", feature_sets=("attention_stats", "layer_gradient", "afn_norm_depths",
                                                           "position"), network="simplex")
    free_columns = columns_for(shape_free.feature_sets, heads, layers)
    free_inputs = InputPipeline(free_columns, ranks=True, mean=np.zeros(len(free_columns), np.float32),
                                std=np.ones(len(free_columns), np.float32))
    free = LearnedModel(shape_free, free_inputs,
                        SimplexStack(len(free_columns), members=2).eval(), calibrated_threshold=0.55, context=context)
    # As the crosstask pipeline writes a fold: its bundle (services/bundle.py), the card last.
    card = fold_card(fold=fold, best_baseline=best_baseline, best_baseline_auroc=0.7,
                     baselines={"saliency": {}, "integrated_gradients": {"n_steps": 4}, "lime": {"n_samples": 20}},
                     rho=0.4, layer=-1)
    return write_bundle(Bundle(card, {"expnet_plus": plus, "expnet_paper": paper}, shape_free=free),
                        models_dir / fold)


@pytest.fixture
def tiny_models_dir(tmp_path) -> Path:
    """tmp/06_models with a trained heldout_sst2 fold and the sst2 classifier."""
    models = tmp_path / "06_models"
    write_fold(models)
    return models


@pytest.fixture
def classifier_writer():
    """Factory fixture: `classifier_writer(folder, seed=0, **config_overrides) -> folder` (see write_classifier)."""
    return write_classifier


def rationale_predictions(tokenizer, texts: list[list[str]]):
    """Rationale test rows as `predict_examples` writes them: every other token a rationale token, label 1,
    predicted class alternating 0/1 (so half are correct)."""
    import pandas as pd

    rows = []
    for index, words in enumerate(texts):
        ids = tokenizer(words, is_split_into_words=True)["input_ids"]
        labels = [-100] + [int(i % 2 == 0) for i in range(len(ids) - 2)] + [-100]
        rows.append({"example_id": f"x{index}", "role": "rationale_test", "input_ids": ids, "token_labels": labels,
                     "label": 1, "predicted": index % 2, "correct": index % 2 == 1})
    return pd.DataFrame(rows)


@pytest.fixture
def rationale_rows():
    """Factory fixture: `rationale_rows(tokenizer, texts) -> predictions` (see rationale_predictions)."""
    return rationale_predictions
