"""Classifier fine-tuning, attention features and encoder loading on tiny random BERTs."""
import numpy as np
import pandas as pd
import pytest
import torch

from learned_attribution.core.models.classifier import fine_tune
from learned_attribution.core.models.runner import (length_grouped_batches, pad_batch,
                                                   predict_proba)
from learned_attribution.core.models.loading import PACKAGED_ENCODER, EncoderNotFoundError, load_tokenizer, resolve_encoder
from learned_attribution.core.models.features import cls_attention_features, extract_attention_features, feature_names

CLS, SEP, PAD = 1, 2, 0


def toy_set(n=64, seed=0):
    """Separable toy data: class 1 sentences contain token 7, class 0 token 8."""
    rng = np.random.default_rng(seed)
    ids, labels = [], []
    for i in range(n):
        label = i % 2
        body = list(rng.integers(10, 30, size=rng.integers(2, 6)))
        body.insert(int(rng.integers(0, len(body))), 7 if label else 8)
        ids.append([CLS, *map(int, body), SEP])
        labels.append(label)
    return ids, np.array(labels)


def test_length_grouped_batches_cover_every_index_once():
    lengths = [5, 1, 9, 3, 3, 7, 2]
    for shuffle in (False, True):
        batches = length_grouped_batches(lengths, 3, shuffle=shuffle, seed=1)
        assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert length_grouped_batches(lengths, 3, shuffle=False)[0] == [1, 6, 3]


def test_pad_batch():
    ids, mask = pad_batch([[1, 5, 2], [1, 2]], pad_token_id=0)
    assert ids.tolist() == [[1, 5, 2], [1, 2, 0]]
    assert mask.tolist() == [[1, 1, 1], [1, 1, 0]]


def test_a_few_training_steps_make_the_loss_fall(tiny_bert_classifier, fine_tuning_config):
    model = tiny_bert_classifier(seed=0)
    ids, labels = toy_set()
    config = fine_tuning_config(epochs=8, learning_rate=3e-3, batch_size=8, warmup_fraction=0.0, seed=0)
    result = fine_tune(model, ids, labels, ids, labels, config, pad_token_id=PAD)
    losses = [row["train_loss"] for row in result.history]
    assert losses[-1] < losses[0] - 0.05  # measured: 0.698 -> 0.628
    assert result.history[result.best_epoch - 1]["val_accuracy"] > 0.9


def test_training_and_prediction_are_deterministic(tiny_bert_classifier, fine_tuning_config):
    ids, labels = toy_set(32)
    config = fine_tuning_config(epochs=1, learning_rate=1e-3, batch_size=8, warmup_fraction=0.06, seed=3)
    outputs = []
    for _ in range(2):
        model = tiny_bert_classifier(seed=0)
        fine_tune(model, ids, labels, ids, labels, config, pad_token_id=PAD)
        outputs.append(predict_proba(model, ids, 8, PAD))
    np.testing.assert_array_equal(outputs[0], outputs[1])


def test_fewer_epochs_than_the_schedule_train_its_first_epochs(tiny_bert_classifier, fine_tuning_config):
    """`decay_epochs` 2 with `epochs` 1 trains the first epoch of a 2-epoch run: the same loss and validation
    scores after it; a schedule of one epoch (the learning rate at 0 by its end) is another run."""
    ids, labels = toy_set(32)
    runs = {}
    for epochs, decay in ((2, None), (1, 2), (1, None)):
        config = fine_tuning_config(epochs=epochs, decay_epochs=decay, learning_rate=3e-3, batch_size=8,
                                    warmup_fraction=0.06, seed=3)
        runs[(epochs, decay)] = fine_tune(tiny_bert_classifier(seed=0), ids, labels, ids, labels, config,
                                          pad_token_id=PAD).history[0]
    assert runs[(1, 2)] == {**runs[(2, None)], "epoch": 1}
    assert runs[(1, None)]["train_loss"] != runs[(1, 2)]["train_loss"]
    with pytest.raises(ValueError, match="decay_epochs=1 must be null or an integer of at least epochs"):
        fine_tuning_config(epochs=2, decay_epochs=1)


def test_features_equal_attention_entries_in_both_directions(tiny_bert_classifier):
    model = tiny_bert_classifier(num_attention_heads=4, seed=1)
    ids, mask = pad_batch([[CLS, 11, 12, 13, SEP], [CLS, 14, SEP]], PAD)
    with torch.inference_mode():
        attentions = model(input_ids=ids, attention_mask=mask, output_attentions=True).attentions
    features = cls_attention_features(attentions[-1])
    assert features.shape == (2, 5, 8)
    for head in (0, 3):
        for token in (1, 3):
            assert features[0, token, head] == attentions[-1][0, head, 0, token]  # [CLS] -> token
            assert features[0, token, 4 + head] == attentions[-1][0, head, token, 0]  # token -> [CLS]


def test_extraction_rows_skip_special_tokens_and_match_direct_computation(tiny_bert_classifier):
    model = tiny_bert_classifier(num_attention_heads=2, seed=2)
    examples = pd.DataFrame({
        "example_id": ["a", "b"], "role": ["rationale_test"] * 2,
        "input_ids": [[CLS, 11, 12, 13, SEP], [CLS, 14, SEP]],
        "token_labels": [[-100, 1, 0, 1, -100], [-100, 0, -100]],
        "correct": [True, False],
    })
    chunks = list(extract_attention_features(model, examples, layer=0, batch_size=2, pad_token_id=PAD,
                                             special_ids=[CLS, SEP, PAD], chunk_size=1))
    assert len(chunks) == 2
    table = pd.concat(chunks, ignore_index=True)
    assert table["position"].tolist() == [1, 2, 3, 1]
    assert table["token"].tolist() == [11, 12, 13, 14]
    assert table["token_label"].tolist() == [1, 0, 1, 0]
    assert table["correct"].tolist() == [True, True, True, False]
    with torch.inference_mode():
        direct = model(input_ids=torch.tensor([[CLS, 11, 12, 13, SEP]]), output_attentions=True).attentions[0]
    names = feature_names(2)
    np.testing.assert_allclose(table.loc[0, names].to_numpy(float),
                               cls_attention_features(direct)[0, 1].numpy(), rtol=1e-5, atol=1e-6)


def test_wrong_encoder_name_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(EncoderNotFoundError, match=r"encoder 'no-such-org/no-such-model-xyz' could not be "
                                                   r"loaded: it is not a local folder, and the Hugging Face hub is not "
                                                   r"reachable"):
        load_tokenizer("no-such-org/no-such-model-xyz")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(EncoderNotFoundError, match="no model weights"):
        resolve_encoder(str(tmp_path))


def test_packaged_encoder_resolves_offline():
    tokenizer = load_tokenizer(PACKAGED_ENCODER)
    assert tokenizer.convert_tokens_to_ids("[CLS]") == tokenizer.cls_token_id
