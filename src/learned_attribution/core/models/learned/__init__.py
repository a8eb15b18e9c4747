"""The one learned-explainer core: the paper's ExpNet and ExpNet+ are variants of one model.

- `registry`: the learned networks by name (`NETWORKS`, `@register_network`): each registered class declares what
  it reads (signal columns, or the text: token ids, the classifier's hidden states; which says which loop trains
  it), its own settings dataclass, how it is built, and what it refuses of a variant. A new network is one file
  with one registered class, imported below.
- `recipe`: a `Variant` names one recipe (which feature sets of `core/models/signals.py` it reads, how inputs are
  standardised, the objective, the stopping rule, the transfer ideas, and its network with that network's
  settings); `TrainingSettings` the loop's settings.
- `inputs`: the `InputPipeline`, fitted once during training, saved, applied unchanged at prediction.
- `networks`: ExpNet's 2-layer network (`network: mlp`, optionally gated per head) and the convex stack (`simplex`),
  several seeds side by side.
- `losses`: focal (the paper's), pairwise and listwise ranking losses.
- `pseudo`: self-training's pseudo-rationales.
- `model`: the trained explainer, `LearnedModel`.
- `training`: the loops (`fit_variant` for the signal networks, `fit_text_variant` for the text students) and the
  scoring.
- `encoder`: the encoder student's network (a copy of the classifier's encoder with a token head, `network:
  encoder`) and the one loop of the text students, which read token ids, not signal columns.
- `attention_student`: the attention student's network (new self-attention layers and a token head over the
  classifier's frozen hidden states, `network: attention`); both text students are trained by `fit_text_variant`.
- `validation`: leave-one-training-task-out validation of candidate variants (the ablation's).

The transfer ideas a variant may switch on:
- `standardise: per_task`: every classifier's signals are z-scored with that classifier's own token statistics;
  for the held-out classifier these come from its *unlabeled* tokens (label-free adaptation).
- `balance`: task-balanced multi-task training (every training task weighs the same, whatever its size).
- `gating` (a setting of the `mlp` network): one learned sigmoid gate per attention head over that head's inputs,
  with an L1 pull towards 0.
- `self_training`: pseudo-rationales on the held-out classifier's unlabeled tokens where cheap signals agree,
  trained on as a further task (`pseudo: cheap` three signals, `agreement` six with soft labels).
- `example_z`: every input z-scored within its example first (the scores are judged by how they rank the tokens
  of one example).
- `anchor`: an anchored residual: a signal column rank-normalised within the example plus `anchor_weight` x the
  network's output, trained as a residual on top of it (`anchor_weight: 0` is the anchor itself).
- `network: simplex`: a convex stack: every input column rank-normalised within its example, the score a
  weighted mean of those ranks with weights on the simplex (Rieger & Hansen 2019).
- `signs: magnitude`: the signed columns (`signals.signed_columns`) enter as absolute values.
- shape-free feature sets (`signals.SHAPE_FREE_SETS`): columns that do not depend on the classifier's depth or
  head count, so the explainer reads a classifier of any supported family and shape.
- the wide set `hidden_state` (`signals.WIDE_SETS`): each token's hidden state, one column per hidden unit, for an
  explainer bound to one classifier (the amortized students).
Objectives: `focal`, `pairwise` (logistic loss on every rationale/non-rationale token pair of an example),
both summed, or `listwise` (ListNet's top-one loss). Stopping: `example_auroc` (the mean per-example validation
AUROC) or `token_auroc` (the pooled token AUROC, the paper's ExpNet's rule).
"""
from .registry import (HIDDEN_STATES, NETWORKS, SIGNALS, TOKEN_IDS, LearnedNetwork, NoSettings, build_network,
                       register_network)
from .recipe import TrainingSettings, Variant
from .inputs import InputPipeline
# The registered networks, in the order `Variant.network` lists them.
from .networks import GatedExpNet, MLPSettings, SimplexStack, build_text_network, build_variant_network, head_of_columns
from .encoder import EncoderStudentSettings
from .attention_student import AttentionStudentSettings
from .model import LearnedModel
from .validation import select_variant
from .training import (TransformedRows, calibrate_threshold, fit_text_variant, fit_variant, score_examples,
                       score_texts, transformed_rows, validation_auroc)

__all__ = ["HIDDEN_STATES", "NETWORKS", "SIGNALS", "TOKEN_IDS", "AttentionStudentSettings", "EncoderStudentSettings",
           "GatedExpNet", "InputPipeline", "LearnedModel", "LearnedNetwork", "MLPSettings", "NoSettings",
           "SimplexStack", "TrainingSettings", "TransformedRows", "Variant", "build_network", "build_text_network",
           "build_variant_network", "calibrate_threshold", "fit_text_variant", "fit_variant", "head_of_columns",
           "register_network", "score_examples", "score_texts", "select_variant", "transformed_rows",
           "validation_auroc"]
