"""Choose a task's fine-tuning settings on its classifier_val slice only (the test split is never read).

Each configuration fine-tunes the packaged encoder on the task's classifier_train rows exactly as the
`classifiers` pipeline does (`services.classifiers.train_task_classifier`, its settings parsed as the pipeline parses
`classifiers.<task>` and `compute`) and records the validation metrics of every epoch.
Output: data/08_reporting/benchmarks/tune_<task>.csv (one row per configuration and epoch) and
tune_<task>_val_probabilities.parquet (the kept epoch's validation probabilities per configuration and seed,
for studying decision thresholds without touching the test split).

    python benchmarks/tune_classifier.py --task cola \
        --config lr=5e-5,batch_size=16,epochs=4 --config lr=1e-4,epochs=5

Besides the pipeline's classifier parameters, a configuration may try three changes that the pipeline
does not make (tried for CoLA, on validation; none was adopted: docs/choices.md, "Classifiers"):
`reinit_top_layers=k` re-initialises the top k encoder layers before fine-tuning (Zhang et al. 2021,
"Revisiting few-sample BERT fine-tuning"), `keep_layers=k` keeps only the first k encoder layers, and
`synthetic_negatives=f` adds, for a seeded fraction f of the acceptable (label 1) training sentences, a
copy with two adjacent words swapped, one word deleted or one word doubled, labelled 0.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pandas as pd
import torch
import yaml

from learned_attribution.core.models.architectures import architecture
from learned_attribution.core.models.runner import predict_proba
from learned_attribution.core.tasks import TASKS
from learned_attribution.services.classifiers import role_rows, train_task_classifier
from learned_attribution.services.config import ClassifierSettings, ComputeSettings, classifier_settings, compute_settings

ROOT = Path(__file__).resolve().parents[1]
ALIASES = {"lr": "learning_rate"}
VARIANT_KEYS = ("reinit_top_layers", "keep_layers", "synthetic_negatives")


def reinit_top_layers(model, k: int):
    """Re-initialise the top `k` encoder layers as a fresh BERT layer would be (normal(0, initializer_range)
    weights, zero biases, unit LayerNorm)."""
    std = model.config.initializer_range
    for layer in architecture(model).blocks(model)[-k:]:
        for module in layer.modules():
            if isinstance(module, torch.nn.Linear):
                torch.nn.init.normal_(module.weight, 0.0, std)
                torch.nn.init.zeros_(module.bias)
            elif isinstance(module, torch.nn.LayerNorm):
                torch.nn.init.ones_(module.weight)
                torch.nn.init.zeros_(module.bias)
    return model


def keep_first_layers(model, k: int):
    """Drop every encoder layer above the first `k`."""
    family = architecture(model)
    family.replace_blocks(model, family.blocks(model)[:k])
    model.config.num_hidden_layers = k
    return model


def add_synthetic_negatives(tokenized: pd.DataFrame, fraction: float, seed: int) -> pd.DataFrame:
    """Append corrupted copies of a seeded `fraction` of the acceptable classifier_train rows, labelled 0:
    two adjacent words swapped, one word deleted or one word doubled (word pieces move with their word;
    the last word, usually the final punctuation, stays). Sentences under three words are left alone."""
    rng = np.random.default_rng(seed)
    acceptable = tokenized[(tokenized["role"] == "classifier_train") & (tokenized["label"] == 1)]
    corrupted = []
    for _, row in acceptable.sample(frac=fraction, random_state=seed).iterrows():
        words: list[tuple[int, list[int]]] = []  # (word id, its word pieces), [CLS] and [SEP] excluded
        for piece, word in zip(row["input_ids"][1:-1], row["word_ids"][1:-1]):
            if words and words[-1][0] == word:
                words[-1][1].append(int(piece))
            else:
                words.append((word, [int(piece)]))
        spans = [pieces for _, pieces in words]
        if len(spans) < 3:
            continue
        operation, j = rng.integers(3), int(rng.integers(len(spans) - 2))
        if operation == 0:
            spans[j], spans[j + 1] = spans[j + 1], spans[j]
        elif operation == 1:
            del spans[j]
        else:
            spans.insert(j, list(spans[j]))
        input_ids = [int(row["input_ids"][0]), *(piece for span in spans for piece in span), int(row["input_ids"][-1])]
        corrupted.append({**row.to_dict(), "example_id": f"{row['example_id']}:synthetic", "label": 0,
                          "input_ids": np.asarray(input_ids), "word_ids": None, "token_labels": None})
    print(f"synthetic negatives: {len(corrupted)} added to {int((tokenized['role'] == 'classifier_train').sum())} "
          f"training sentences", flush=True)
    return pd.concat([tokenized, pd.DataFrame(corrupted)], ignore_index=True)


def threshold_gain(labels: np.ndarray, probability: np.ndarray, repeats: int = 200, seed: int = 0) -> tuple[float, float]:
    """Would moving the decision threshold off 0.5 raise MCC? Split the validation rows in random halves,
    choose the threshold (0.10, 0.11, ..., 0.90) that maximises MCC on one half and score it on the other
    against 0.5; mean and standard deviation of that gain over `repeats` splits (an honest estimate: the
    half that scores never chose)."""
    from sklearn.metrics import matthews_corrcoef

    labels, probability = np.asarray(labels), np.asarray(probability)
    thresholds = np.round(np.arange(0.10, 0.905, 0.01), 2)
    rng, gains = np.random.default_rng(seed), []
    for _ in range(repeats):
        order = rng.permutation(len(labels))
        choose, score = order[:len(order) // 2], order[len(order) // 2:]
        best = thresholds[np.argmax([matthews_corrcoef(labels[choose], probability[choose] > t) for t in thresholds])]
        gains.append(matthews_corrcoef(labels[score], probability[score] > best)
                     - matthews_corrcoef(labels[score], probability[score] > 0.5))
    return float(np.mean(gains)), float(np.std(gains))


def prepare(settings: dict):
    """The model change a configuration asks for (or None)."""
    if settings.get("reinit_top_layers"):
        return lambda model: reinit_top_layers(model, int(settings["reinit_top_layers"]))
    if settings.get("keep_layers"):
        return lambda model: keep_first_layers(model, int(settings["keep_layers"]))
    return None


def parse_config(text: str) -> dict:
    """`lr=5e-5,epochs=4` -> {"learning_rate": 5e-05, "epochs": 4} (values parsed as YAML, then as floats)."""
    settings = {}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        if not value:
            raise SystemExit(f"--config {text!r}: expected key=value pairs, got {item!r}")
        parsed = yaml.safe_load(value)
        if isinstance(parsed, str):  # YAML 1.1 reads "5e-5" as a string
            try:
                parsed = float(parsed)
            except ValueError:
                pass
        settings[ALIASES.get(key.strip(), key.strip())] = parsed
    return settings


def configuration(params: dict, text: str, seed: int, compute: ComputeSettings, task: str
                  ) -> tuple[ClassifierSettings, dict]:
    """A configuration `text` over the task's classifier parameters `params`: its settings, parsed as the pipeline
    parses `classifiers.<task>` (an unknown or missing key is named), and the model changes it asks for
    (`VARIANT_KEYS`)."""
    settings = {**params, **parse_config(text)}
    variant = {key: settings.pop(key) for key in VARIANT_KEYS if key in settings}
    return classifier_settings(settings, seed, compute, where=f"classifiers.{task} (--config {text!r})"), variant


def main(argv=None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="cola", choices=list(TASKS))
    parser.add_argument("--config", action="append", required=True, help="overrides of the task's classifier params")
    parser.add_argument("--seed", type=int, action="append", help="repeat for several seeds (default 13)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--device", default=None, help="overrides compute.device of conf/base/parameters.yml")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    params = yaml.safe_load((ROOT / "conf/base/parameters_classifiers.yml").read_text())["classifiers"][args.task]
    base = yaml.safe_load((ROOT / "conf/base/parameters.yml").read_text())
    encoder = base["encoder"]["name_or_path"]
    compute = compute_settings({**base["compute"], **({"device": args.device} if args.device else {})})
    tokenized = pd.read_parquet(ROOT / f"data/03_primary/tokenized_{args.task}.parquet")
    output = ROOT / f"data/08_reporting/benchmarks/tune_{args.task}.csv"
    probabilities_output = output.with_name(f"tune_{args.task}_val_probabilities.parquet")
    output.parent.mkdir(parents=True, exist_ok=True)
    # Appends to earlier sweeps' results (a log: rerunning a configuration adds rows).
    rows = [pd.read_csv(output)] if output.exists() else []
    probabilities = [pd.read_parquet(probabilities_output)] if probabilities_output.exists() else []
    for text in args.config:
        for seed in args.seed or [13]:
            settings, variant = configuration(params, text, seed, compute, args.task)
            training = tokenized
            if variant.get("synthetic_negatives"):
                training = add_synthetic_negatives(tokenized, float(variant["synthetic_negatives"]), seed)
            started = time.perf_counter()
            classifier, history = train_task_classifier(training, encoder, settings, compute,
                                                        prepare_model=prepare(variant))
            history.insert(1, "config", text)
            history["seed"] = seed
            history["seconds"] = time.perf_counter() - started
            rows.append(history)
            val = role_rows(tokenized, "classifier_val", settings.max_val_examples, seed)
            kept = predict_proba(classifier.model, list(val["input_ids"]), settings.eval_batch_size,
                                 classifier.tokenizer.pad_token_id)
            probabilities.append(pd.DataFrame({"config": text, "seed": seed, "example_id": val["example_id"],
                                               "label": val["label"], "probability_1": kept[:, 1]}))
            # Saved after every run: a crash loses nothing measured.
            table = pd.concat(rows, ignore_index=True)
            table.to_csv(output, index=False)
            pd.concat(probabilities, ignore_index=True).to_parquet(probabilities_output, index=False)
            print(history[["config", "seed", "epoch", "train_loss", "val_accuracy", "val_mcc"]].round(4)
                  .to_string(index=False), flush=True)
            gain, spread = threshold_gain(val["label"].to_numpy(), kept[:, 1])
            print(f"tuned decision threshold instead of 0.5: MCC gain {gain:+.3f} (sd {spread:.3f}, split halves)")
    print(f"saved {output} and {probabilities_output}")
    return table


if __name__ == "__main__":
    main()
