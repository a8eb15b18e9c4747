"""How each method's map changes with the class it explains, on a trained fold's classifier: every text of a seeded
sample of the held-out rationale test set explained for each class, and per method the share of texts whose maps
differ between the classes, the share whose maps are the same up to sign (the unsigned gradient maps of a two-class
head: softmax cross-entropy moves the head's two rows by opposite amounts, so the two logits' gradients end near
opposite), and the mean Spearman correlation between the maps of the first two classes.

    python benchmarks/class_maps.py --fold heldout_hatexplain --n-texts 40

Writes `class_maps.csv` (one row per method) to `--output-dir` (default data/08_reporting/benchmarks) and prints it.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from harness import positive_int, write_table

from learned_attribution import FoldExplainer
from learned_attribution.core.explainers import METHODS
from learned_attribution.core.explainers.learned import LEARNED
from learned_attribution.services import bundle as bundles

TOLERANCE = 1e-3  # two maps within 0.1% of the larger map's scale are the same map (float32 rounding)


def same(a: np.ndarray, b: np.ndarray) -> bool:
    scale = max(float(np.abs(a).max(initial=0.0)), float(np.abs(b).max(initial=0.0)), 1e-12)
    return bool(np.allclose(a, b, atol=TOLERANCE * scale, rtol=0.0))


def class_maps(explainer: FoldExplainer, texts: list[list[str]], methods: list[str]) -> pd.DataFrame:
    """One row per method: how its maps of the same texts differ between the classifier's classes."""
    by_class = {c: explainer.explain(texts, methods=methods, target=c) for c in range(len(explainer.classes))}
    rows = []
    for method in methods:
        maps = [[np.asarray(e.token_scores[method], dtype=float) for e in by_class[c]] for c in by_class]
        pairs = list(zip(*maps))  # per text: its map for each class
        differ = [any(not same(m[0], other) for other in m[1:]) for m in pairs]
        up_to_sign = [all(same(np.abs(m[0]), np.abs(other)) for other in m[1:]) for m in pairs]
        rho = [spearmanr(m[0], m[1]).statistic for m in pairs if len(m[0]) > 1]
        rows.append({"method": method, "family": METHODS[method].family, "signed": METHODS[method].signed,
                     "class_agnostic": METHODS[method].class_agnostic, "n_texts": len(pairs),
                     "classes": "/".join(explainer.classes), "share_maps_differ": float(np.mean(differ)),
                     "share_same_up_to_sign": float(np.mean(up_to_sign)),
                     "spearman_first_two_classes": float(np.nanmean(rho)) if rho else float("nan")})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fold", default="heldout_hatexplain", help="the trained fold (its held-out classifier)")
    parser.add_argument("--models-dir", default=str(bundles.DEFAULT_MODELS_DIR))
    parser.add_argument("--n-texts", type=positive_int, default=40, help="seeded sample of the rationale test set")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--method", action="append", help="a method (repeatable; default: every registered one)")
    parser.add_argument("--output-dir", type=Path, default=Path("data/08_reporting/benchmarks"))
    args = parser.parse_args(argv)
    explainer = FoldExplainer.from_fold(args.fold, models_dir=args.models_dir, device="cpu")
    task = explainer.card["held_out_task"]
    predictions = pd.read_parquet(bundles.run_predictions(args.models_dir, task))
    test = predictions[predictions["role"] == "rationale_test"].drop_duplicates("example_id")
    texts = [list(words) for words in test.sample(n=min(args.n_texts, len(test)), random_state=args.seed)["words"]]
    methods = args.method or [m for m in explainer.methods if m not in LEARNED or m in explainer.learned]
    table = class_maps(explainer, texts, methods)
    write_table(table, args.output_dir, "class_maps.csv")
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(table.round(3).to_string(index=False))


if __name__ == "__main__":
    main()
