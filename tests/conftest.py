"""Fixtures shared by the whole test suite.

`tiny_classifier(family, ...)` is the one tiny-model factory: a randomly initialised sequence classifier of any
family in `learned_attribution.core.models.architectures` (built from its config, eager attention) with a tokenizer of
its kind built from a small vocabulary (`tiny_tokenizer(family)`): WordPiece for BERT, DistilBERT, ELECTRA and
MPNet, byte-level BPE for RoBERTa (loaded without `add_prefix_space`, as RoBERTa checkpoints ship), SentencePiece
Unigram for XLM-R, CamemBERT and DeBERTa-v2. Nothing is downloaded or trained.

`tiny_bert_config` and `tiny_bert_classifier` are the BERT factories most unit tests use (call them with keyword
overrides): tiny BERT models built from a `BertConfig`, on bare token ids (no tokenizer).

The `training_settings(**overrides)` and `fine_tuning_config(**overrides)` fixtures build the frozen, default-free
settings dataclasses (`TrainingSettings`, `TrainingConfig`) from fast test values (FAST_TRAINING, FAST_FINE_TUNING).
They are fixtures, not imports: the suite has several conftest.py outside packages, so `import conftest` is not
reliable.

`known_answer_classifier(family)` is the tiny classifier the every-family known-answer tests run on (3 layers,
3 classes, weights and LayerNorm gains far from uniform), and `direct_pass(model, input_ids)` and
`target_probability(model, input_ids, target)` their reference computations: one text alone, plain torch autograd,
no package code (`DirectPass`).

`sentiment_sentences(tokenizer, n, seed)` is the one generator of random sentences whose sentiment words are marked
(a rationale, or a teacher's scores), and `text_student_writer(folder, variant)` writes a tiny classifier and a text
student of it (the encoder student, or the attention student) taught on them, as `learned-attribution fit` writes a
student folder (the student tests and the served student's load test use it).

Tests run with one torch thread per process unless OMP_NUM_THREADS is set (see below).

Every factory here is session-scoped (a factory holds no state), so module-scoped fixtures can use it too.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")
# One torch thread per test process (and per worker process it starts), unless OMP_NUM_THREADS says otherwise: the
# tests run tiny models, where intra-op threads buy nothing, and on a busy 2-core machine two spinning threads per
# process made the tests of tests/explainers 4 times slower (68 s against 15 s for the same 63 tests).
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Nothing is downloaded in tests; set before transformers is imported, which reads it once.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config):
    """torch may have been imported (by a plugin) before OMP_NUM_THREADS was set: set its thread count too."""
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


TINY_BERT_DEFAULTS = {
    "vocab_size": 40,
    "hidden_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 32,
    "max_position_embeddings": 32,
    "type_vocab_size": 2,
    "pad_token_id": 0,
    "attn_implementation": "eager",
}


def make_tiny_bert_config(**overrides):
    """A tiny BERT config (vocab 40, hidden 16, 2 layers, 2 heads, eager attention); keywords override fields."""
    from transformers import BertConfig

    return BertConfig(**{**TINY_BERT_DEFAULTS, **overrides})


def make_tiny_bert_classifier(num_labels: int = 2, seed: int = 0, **overrides):
    """A randomly initialised `BertForSequenceClassification` (eval mode) on a tiny config, seeded."""
    import torch
    from transformers import BertForSequenceClassification

    torch.manual_seed(seed)
    return BertForSequenceClassification(make_tiny_bert_config(num_labels=num_labels, **overrides)).eval()


@pytest.fixture(scope="session")
def tiny_bert_config():
    """Factory fixture: `tiny_bert_config(**overrides) -> BertConfig`."""
    return make_tiny_bert_config


@pytest.fixture(scope="session")
def tiny_bert_classifier():
    """Factory fixture: `tiny_bert_classifier(num_labels=2, seed=0, **overrides) -> BertForSequenceClassification`."""
    return make_tiny_bert_classifier


# ---- every family: a tiny classifier and a tokenizer of its kind ------------------------------------------------

# The words the tiny vocabularies know whole (lower case; WordPiece lower-cases, the others also know "The").
TINY_WORDS = ("the", "a", "film", "movie", "was", "is", "good", "bad", "great", "boring", "not", "very", "and",
              "but", "it", "this", "plot", "actors", "fun", "end")
TINY_PUNCTUATION = (",", ".", "!", "?")
# "unbelievable" is known only in pieces, in every kind: un + believ + able.
WORDPIECE_EXTRA = ("un", "##believ", "##able", "##s")
SPECIALS = {  # in id order; the configs' pad/bos/eos ids follow them
    "wordpiece": ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"),
    "mpnet": ("<s>", "<pad>", "</s>", "[UNK]", "<mask>"),  # MPNet's padding index is 1 (position ids start at 2)
    "roberta": ("<s>", "<pad>", "</s>", "<unk>", "<mask>"),  # XLM-R's tokenizer fixes unk_id=3
    "deberta": ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"),
}


def _wordpiece_vocab(specials) -> dict[str, int]:
    tokens = [*specials, *TINY_WORDS, *TINY_PUNCTUATION, *WORDPIECE_EXTRA]
    return {token: index for index, token in enumerate(tokens)}


def _byte_level_merges() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """A byte-level BPE vocabulary (the 256 byte characters, then every merge's result) and merges that spell
    `Ġ<word>` for every tiny word, "ĠThe", "Ġun" and "Ġ<punctuation>", then the bare pieces "believ", "able" and
    "The". Each target is built left to right, one character per merge; the `Ġ` chains rank first, so a bare merge
    never fires inside a `Ġ` word before its chain is complete."""
    from tokenizers import pre_tokenizers

    starts = [f"Ġ{w}" for w in (*TINY_WORDS, "The", "un", *TINY_PUNCTUATION)]
    merges: dict[tuple[str, str], None] = {}
    for target in [*starts, "believ", "able", "The"]:
        for end in range(2, len(target) + 1):
            merges[(target[:end - 1], target[end - 1])] = None
    vocab = {token: index for index, token in enumerate(SPECIALS["roberta"])}
    for token in [*sorted(pre_tokenizers.ByteLevel.alphabet()), *("".join(pair) for pair in merges)]:
        vocab.setdefault(token, len(vocab))
    return vocab, list(merges)


def _unigram_vocab(specials) -> list[tuple[str, float]]:
    """A SentencePiece Unigram vocabulary: the specials (score 0), `▁<word>` for every tiny word and "▁The", the
    pieces "▁un", "believ", "able", "s", the punctuation, a lone "▁" (so "▁," is "▁" + ","), then every ASCII letter
    and digit as a fallback piece. Scores make the known pieces win: "unbelievable" is "▁un" "believ" "able"."""
    import string

    scores: dict[str, float] = {token: 0.0 for token in specials}
    for piece in [*(f"▁{w}" for w in (*TINY_WORDS, "The")), "▁un", "believ", "able", "s", *TINY_PUNCTUATION]:
        scores.setdefault(piece, -2.0)
    scores.setdefault("▁", -5.0)
    for char in string.ascii_letters + string.digits:
        scores.setdefault(char, -8.0)
    return list(scores.items())


def make_tiny_tokenizer(family: str):
    """A fast tokenizer of the kind `family`'s checkpoints ship with, on a tiny vocabulary (see the module doc)."""
    import transformers

    if family in ("bert", "electra"):
        return transformers.BertTokenizer(vocab=_wordpiece_vocab(SPECIALS["wordpiece"]), do_lower_case=True)
    if family == "distilbert":
        return transformers.DistilBertTokenizer(vocab=_wordpiece_vocab(SPECIALS["wordpiece"]), do_lower_case=True)
    if family == "mpnet":
        return transformers.MPNetTokenizer(vocab=_wordpiece_vocab(SPECIALS["mpnet"]), do_lower_case=True)
    if family == "roberta":
        vocab, merges = _byte_level_merges()
        return transformers.RobertaTokenizer(vocab=vocab, merges=merges, add_prefix_space=False)
    if family == "xlm-roberta":
        return transformers.XLMRobertaTokenizer(vocab=_unigram_vocab(SPECIALS["roberta"]))
    if family == "camembert":
        return transformers.CamembertTokenizer(vocab=_unigram_vocab(SPECIALS["roberta"]))
    if family == "deberta-v2":
        return transformers.DebertaV2Tokenizer(vocab=_unigram_vocab(SPECIALS["deberta"]))
    raise ValueError(f"no tiny tokenizer for family {family!r}")


# family -> (config class, classifier class); the keys are the families of core/models/architectures.py
TINY_MODEL_CLASSES = {
    "bert": ("BertConfig", "BertForSequenceClassification"),
    "roberta": ("RobertaConfig", "RobertaForSequenceClassification"),
    "xlm-roberta": ("XLMRobertaConfig", "XLMRobertaForSequenceClassification"),
    "camembert": ("CamembertConfig", "CamembertForSequenceClassification"),
    "distilbert": ("DistilBertConfig", "DistilBertForSequenceClassification"),
    "electra": ("ElectraConfig", "ElectraForSequenceClassification"),
    "deberta-v2": ("DebertaV2Config", "DebertaV2ForSequenceClassification"),
    "mpnet": ("MPNetConfig", "MPNetForSequenceClassification"),
}


def make_tiny_classifier(family: str, n_layers: int = 2, n_heads: int = 2, hidden: int = 16, intermediate: int = 32,
                         num_labels: int = 2, seed: int = 0, **overrides):
    """(model, tokenizer): a randomly initialised `family` sequence classifier (eval mode, eager attention, 64
    positions, seeded) sized by the arguments, with `make_tiny_tokenizer(family)`; keywords override config
    fields (in the family's own names)."""
    import torch
    import transformers

    if family not in TINY_MODEL_CLASSES:
        raise ValueError(f"no tiny classifier for family {family!r}; known: {sorted(TINY_MODEL_CLASSES)}")
    tokenizer = make_tiny_tokenizer(family)
    config_name, model_name = TINY_MODEL_CLASSES[family]
    if family == "distilbert":  # DistilBERT's own field names
        shape = {"dim": hidden, "n_layers": n_layers, "n_heads": n_heads, "hidden_dim": intermediate}
    else:
        shape = {"hidden_size": hidden, "num_hidden_layers": n_layers, "num_attention_heads": n_heads,
                 "intermediate_size": intermediate}
    if family == "electra":  # ELECTRA's embeddings are narrower than its hidden states (a projection between)
        shape["embedding_size"] = max(hidden // 2, n_heads)
    if family == "deberta-v2":  # DeBERTa-v3's disentangled relative attention, no absolute positions
        shape.update(relative_attention=True, pos_att_type=["p2c", "c2p"], position_biased_input=False)
    settings = {"vocab_size": len(tokenizer), "max_position_embeddings": 64, "num_labels": num_labels,
                "pad_token_id": tokenizer.pad_token_id, "attn_implementation": "eager", **shape, **overrides}
    config = getattr(transformers, config_name)(**settings)
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(config).eval()
    return model, tokenizer


def make_known_answer_classifier(family: str, n_layers: int = 3, n_heads: int = 2, seed: int = 1, **overrides):
    """(model, tokenizer): `make_tiny_classifier` with 3 classes, weights large enough that attentions and
    gradients are far from uniform (initializer_range 0.2), and random LayerNorm gains and biases (with unit gains
    and zero biases every hidden state has norm sqrt(hidden), the same for every token): what the known-answer
    tests of every family run on, so a score moved to another token changes the answer."""
    import torch

    model, tokenizer = make_tiny_classifier(family, n_layers=n_layers, n_heads=n_heads, num_labels=3, seed=seed,
                                            initializer_range=0.2, **overrides)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm) and module.weight is not None:
                module.weight.copy_(torch.rand(module.weight.shape, generator=generator) * 1.5 + 0.3)
                if module.bias is not None:
                    module.bias.copy_(torch.randn(module.bias.shape, generator=generator) * 0.3)
    return model, tokenizer


@pytest.fixture(scope="session")
def known_answer_classifier():
    """Factory fixture: `known_answer_classifier(family, n_layers=3, n_heads=2, seed=1) -> (model, tokenizer)`."""
    return make_known_answer_classifier


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """Factory fixture: `tiny_tokenizer(family) -> tokenizer` (see make_tiny_tokenizer)."""
    return make_tiny_tokenizer


@pytest.fixture(scope="session")
def tiny_classifier():
    """Factory fixture: `tiny_classifier(family, n_layers=2, n_heads=2, hidden=16, ...) -> (model, tokenizer)`."""
    return make_tiny_classifier


# ---- sentiment sentences, and a tiny text student taught on them -------------------------------------------------

SENTIMENT_WORDS = ("the", "film", "was", "good", "bad", "boring", "not", "very", "and", "but", "it", "plot", "fun")
SENTIMENT = ("bad", "boring", "fun", "good")  # the words a sentiment sentence's rationale (or teacher) marks


def make_sentiment_sentences(tokenizer, n: int, seed: int, words=SENTIMENT_WORDS, classes: int | None = None):
    """`n` random texts of 4 to 8 of `words`, one of them replaced by a word of SENTIMENT, tokenised as plain text: a
    frame of `index`, `input_ids` and `sentiment` (per token: 1 where it spells a sentiment word, else 0; -100 at the
    frame tokens, first and last); with `classes`, a random `predicted` class per text, drawn after its words."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    rows = []
    for index in range(n):
        chosen = [str(w) for w in rng.choice(words, size=int(rng.integers(4, 9)))]
        chosen[int(rng.integers(len(chosen)))] = str(rng.choice(SENTIMENT))
        ids = tokenizer(" ".join(chosen))["input_ids"]
        tokens = tokenizer.convert_ids_to_tokens(ids)
        row = {"index": index, "input_ids": ids,
               "sentiment": [-100] + [int(t.lstrip("Ġ▁").lower() in SENTIMENT) for t in tokens[1:-1]] + [-100]}
        if classes is not None:
            row["predicted"] = int(rng.integers(classes))
        rows.append(row)
    return pd.DataFrame(rows)


@pytest.fixture(scope="session")
def sentiment_sentences():
    """Factory fixture: `sentiment_sentences(tokenizer, n, seed, words=..., classes=None) -> frame` (see
    make_sentiment_sentences)."""
    return make_sentiment_sentences


# The text students' recipes as the tiny students take them: the amortize recipe's, the encoder's top block alone.
TINY_TEXT_STUDENTS = {"student_encoder": {"encoder_blocks": 1}, "student_attention": {}}


def write_text_student(folder: Path, variant: str = "student_encoder", family: str = "bert", n_texts: int = 24,
                       **shape) -> Path:
    """What `learned-attribution fit` writes, tiny: a `family` classifier (`make_tiny_classifier(family, **shape)`)
    saved with save_pretrained in `folder/classifier`, and in `folder/student` the student folder of a text student
    of it (the amortize recipe `variant`: `student_encoder`, its top block trained, or `student_attention`; two
    epochs) taught by a teacher that scores 1 at the sentiment words of `n_texts` sentiment sentences, bound to that
    classifier, its card naming occlusion as its teacher. Returns the student folder."""
    import numpy as np
    import pandas as pd

    from learned_attribution.core.models.loading import load_classifier
    from learned_attribution.services import amortize
    from learned_attribution.services import bundle as bundles
    from learned_attribution.services.config import DEFAULT_VARIANTS, AmortizeSettings, student_variants
    from learned_attribution.services.amortize.student import fit_student, student_signals
    from learned_attribution.core.explainers.teacher import Teacher

    model, tokenizer = make_tiny_classifier(family, **shape)
    model.save_pretrained(folder / "classifier")
    tokenizer.save_pretrained(folder / "classifier")
    classifier = load_classifier(folder / "classifier")
    texts = make_sentiment_sentences(classifier.tokenizer, n_texts, seed=0, classes=2)
    texts["example_id"] = [f"s{i}" for i in texts["index"]]
    teacher = pd.DataFrame({"example_id": texts["example_id"],
                            "scores": [np.asarray(marks[1:-1], np.float32) for marks in texts["sentiment"]]})
    settings = AmortizeSettings(teacher=Teacher("occlusion"), max_length=32, variants=student_variants(
        {variant: {**DEFAULT_VARIANTS[variant], **TINY_TEXT_STUDENTS[variant]}}))
    student, _ = fit_student(classifier, texts, student_signals(classifier, texts, [], -1, 8), teacher,
                             settings.variants, make_training_settings(batch_size=4, max_epochs=2, patience=2, seeds=1),
                             context=amortize.student_context(settings, settings.max_length), layer=settings.layer)
    card = amortize.student_card_for(settings, classifier)
    return bundles.write_bundle(bundles.Bundle(card, {bundles.STUDENT: student}), folder / "student")


@pytest.fixture(scope="session")
def text_student_writer():
    """Factory fixture: `text_student_writer(folder, variant="student_encoder", family="bert", n_texts=24, **shape)
    -> student folder`, its classifier in `folder/classifier` (see write_text_student)."""
    return write_text_student


# ---- direct computations: the known answers of the every-family tests --------------------------------------------

class DirectPass:
    """One text run alone (no padding, a batch of one) through a sequence classifier with plain torch autograd and
    no package code: the reference the signals and the attribution methods are checked against.

    The text enters as word embeddings (`inputs_embeds`, a graph leaf: `words`), so the gradient w.r.t. the
    word-embedding output needs no hook; every block's input and output are caught by module hooks on the blocks
    (`block_inputs[l]`, `block_outputs[l]`, kept in the graph); the attention probabilities are the model's own
    `output_attentions`. `gradients(target)` differentiates the target logit w.r.t. all of them."""

    def __init__(self, model, input_ids, attention_mask=None):
        import torch

        self.model = model
        self.input_ids = torch.as_tensor(input_ids, dtype=torch.long).reshape(1, -1)
        self.attention_mask = (torch.ones_like(self.input_ids) if attention_mask is None
                               else torch.as_tensor(attention_mask).reshape(1, -1))
        blocks = direct_blocks(model)
        self.block_inputs, self.block_outputs = [None] * len(blocks), [None] * len(blocks)

        def keep_input(index):
            def hook(module, args, kwargs):
                self.block_inputs[index] = args[0] if args else kwargs["hidden_states"]
            return hook

        def keep_output(index):
            def hook(module, args, output):
                self.block_outputs[index] = output[0] if isinstance(output, tuple) else output
            return hook

        hooks = [b.register_forward_pre_hook(keep_input(i), with_kwargs=True) for i, b in enumerate(blocks)]
        hooks += [b.register_forward_hook(keep_output(i)) for i, b in enumerate(blocks)]
        was_training = model.training
        model.eval()
        try:
            with torch.enable_grad():
                self.words = model.get_input_embeddings()(self.input_ids).detach().requires_grad_(True)
                output = model(inputs_embeds=self.words, attention_mask=self.attention_mask, output_attentions=True)
        finally:
            for hook in hooks:
                hook.remove()
            model.train(was_training)
        self.logits = output.logits
        self.attentions = list(output.attentions)

    def probabilities(self):
        import torch

        return torch.softmax(self.logits.detach().float(), -1)[0]

    def gradients(self, target: int) -> dict:
        """d logit[target] / d: `words` [T, E], `block_inputs` and `block_outputs` (lists of [T, D]), `attentions`
        (list of [H, T, T])."""
        import torch

        wrt = [self.words, *self.block_inputs, *self.block_outputs, *self.attentions]
        grads = torch.autograd.grad(self.logits[0, target], wrt, retain_graph=True)
        n = len(self.block_inputs)
        return {"words": grads[0][0], "block_inputs": [g[0] for g in grads[1:1 + n]],
                "block_outputs": [g[0] for g in grads[1 + n:1 + 2 * n]],
                "attentions": [g[0] for g in grads[1 + 2 * n:]]}


def direct_blocks(model):
    """The transformer blocks of a Hugging Face encoder classifier, found without the package's table."""
    base = model.base_model
    return base.transformer.layer if hasattr(base, "transformer") else base.encoder.layer


def direct_target_probability(model, input_ids, target: int):
    """softmax(logits)[target] of one unpadded text (a list of ids): a float; or of several texts of one length
    (a list of id lists, run as one batch without padding): a list of floats. No gradient."""
    import torch

    several = len(input_ids) > 0 and isinstance(input_ids[0], (list, tuple))
    ids = torch.as_tensor([list(row) for row in input_ids] if several else [list(input_ids)], dtype=torch.long)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
    probabilities = torch.softmax(logits.float(), -1)[:, target].tolist()
    return probabilities if several else probabilities[0]


@pytest.fixture(scope="session")
def direct_pass():
    """Factory fixture: `direct_pass(model, input_ids) -> DirectPass` (one unpadded text, see DirectPass)."""
    return DirectPass


@pytest.fixture(scope="session")
def target_probability():
    """Factory fixture: `target_probability(model, input_ids, target)`: a float for one unpadded text, a list for a
    list of texts of one length (see direct_target_probability)."""
    return direct_target_probability


# ---- settings dataclasses without defaults -------------------------------------------------------------------

# Fast settings for the one training loop of the learned explainers (`TrainingSettings` has no defaults): small
# networks, a few epochs, three seeds side by side; the focal, gate and pseudo-task settings are the YAML's.
FAST_TRAINING = {"hidden": 8, "alpha": 0.25, "gamma": 2.0, "learning_rate": 1e-2, "batch_size": 16,
                 "batch_unit": "examples", "max_epochs": 8, "patience": 3, "gate_l1": 0.01, "pseudo_weight": 0.5,
                 "seeds": 3, "seed": 13}
# A classifier fine-tuning recipe for tests (`TrainingConfig` has no defaults).
FAST_FINE_TUNING = {"epochs": 1, "learning_rate": 1e-3, "batch_size": 8, "weight_decay": 0.01,
                    "warmup_fraction": 0.0, "decay_epochs": None, "class_weighting": False,
                    "selection_metric": "accuracy", "bf16": False, "freeze_word_embeddings": False, "seed": 0}


def make_training_settings(**overrides):
    """`TrainingSettings` of FAST_TRAINING with keyword overrides (every field must be known)."""
    from learned_attribution.core.models.learned import TrainingSettings

    unknown = set(overrides) - set(FAST_TRAINING)
    if unknown:
        raise TypeError(f"unknown TrainingSettings fields {sorted(unknown)}")
    return TrainingSettings(**{**FAST_TRAINING, **overrides})


def make_fine_tuning_config(**overrides):
    """`TrainingConfig` (classifier fine-tuning) of FAST_FINE_TUNING with keyword overrides."""
    from learned_attribution.core.models.classifier import TrainingConfig

    unknown = set(overrides) - set(FAST_FINE_TUNING)
    if unknown:
        raise TypeError(f"unknown TrainingConfig fields {sorted(unknown)}")
    return TrainingConfig(**{**FAST_FINE_TUNING, **overrides})


@pytest.fixture(scope="session")
def training_settings():
    """Factory fixture: `training_settings(**overrides) -> TrainingSettings` (FAST_TRAINING with overrides)."""
    return make_training_settings


@pytest.fixture(scope="session")
def fine_tuning_config():
    """Factory fixture: `fine_tuning_config(**overrides) -> TrainingConfig` (FAST_FINE_TUNING with overrides)."""
    return make_fine_tuning_config


@pytest.fixture(scope="session")
def project_root() -> Path:
    """The Kedro project's root folder (holds pyproject.toml, conf/, data/)."""
    return PROJECT_ROOT
