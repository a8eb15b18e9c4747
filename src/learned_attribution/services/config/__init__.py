"""Every parameter block, parsed once into a frozen dataclass: the one place that reads Kedro parameter dicts
(tests/test_parameters.py holds it: no other module of the package reads a parameter block's keys).

One module per block: `compute` (and `mlflow`), `classifiers` (and `features`), `crosstask` (the scoring protocol,
the paper's ExpNet, ExpNet+, the variant catalogue and `ablation`), `fewshot`, `external` (`evaluate_external`),
`afn`, `amortize`, `record` (every baseline on every example), and `runs` (what the MLflow hooks read of a run's
parameters). `blocks` is the one parse of a block: every key required, none unknown, each error naming
`parameter <block>.<key>`.

Rule for defaults: a block that only the pipelines read has its values in conf/base only; the amortize block, which
the `fit` command reads too, has its defaults in code only (`AmortizeSettings`; the YAML sets what a pipeline run
changes). Each namespaced pipeline template parses its blocks in its first node, so a bad value stops the run
before any work and every other node takes the parsed block it reads.
"""
from .blocks import block, dataclass_from, positive_int
from .compute import ComputeSettings, DASK_KEYS, TrackingSettings, compute_settings, dask_settings, tracking_settings
from .classifiers import (CLASSIFIER_CAPS, ClassifierSettings, FeatureSettings, classifier_settings, encoder_name,
                          feature_settings)
from .crosstask import (ExpnetPlusCandidates, ExpnetPlusRecipe, ExpnetRecipe, FOLD_KEYS, SCORING_KEYS,
                        ScoringSettings, TrainingGridSettings, catalogue_variant, check_crosstask,
                        expnet_plus_candidates, expnet_plus_recipe, expnet_recipe, folds_expnet_plus, scoring_settings,
                        training_examples, training_grid_settings, training_settings, variant)
from .fewshot import FEWSHOT_KEYS, FIT_KEYS, FewShotCurveSettings, fewshot_settings
from .external import EXTERNAL_KEYS, ExternalSettings, REQUIRED, external_settings
from .afn import (AFN_KEYS, AfnSettings, CORPUS_KEYS, CorpusSettings, MLFLOW_KEYS, PAIR_KEYS, PairSettings,
                  PlotSettings, SPLITS, afn_settings, afn_tracking, check_user_file, check_word_range,
                  corpus_settings, pair_settings, refuse_own_tracking_uri)
from .amortize import (DEFAULT_TRAINING, DEFAULT_VARIANTS, DISTILL, SETTING_KEYS, SIZES, AmortizeSettings,
                       amortize_experiment, amortize_settings, sized, student_variants)
from .record import RecordSettings, record_settings
from .runs import RunParameters

__all__ = ["AFN_KEYS", "AfnSettings", "AmortizeSettings", "CLASSIFIER_CAPS", "CORPUS_KEYS", "ClassifierSettings",
           "ComputeSettings", "CorpusSettings", "DASK_KEYS", "DEFAULT_TRAINING", "DEFAULT_VARIANTS", "DISTILL",
           "EXTERNAL_KEYS", "ExpnetPlusCandidates", "ExpnetPlusRecipe", "TrainingGridSettings", "ExpnetRecipe", "ExternalSettings",
           "FEWSHOT_KEYS", "FIT_KEYS", "FOLD_KEYS", "FeatureSettings", "FewShotCurveSettings", "MLFLOW_KEYS",
           "PAIR_KEYS", "PairSettings", "PlotSettings", "REQUIRED", "RunParameters", "SCORING_KEYS", "SETTING_KEYS",
           "SIZES", "SPLITS", "ScoringSettings", "TrackingSettings", "afn_settings", "afn_tracking", "amortize_experiment",
           "RecordSettings", "record_settings",
           "amortize_settings", "block", "catalogue_variant", "check_crosstask", "check_user_file",
           "check_word_range", "classifier_settings", "compute_settings", "corpus_settings", "dask_settings",
           "dataclass_from", "encoder_name", "expnet_plus_candidates", "expnet_plus_recipe", "expnet_recipe",
           "external_settings", "feature_settings", "fewshot_settings", "folds_expnet_plus", "pair_settings",
           "positive_int", "refuse_own_tracking_uri", "scoring_settings", "sized", "student_variants", "tracking_settings",
           "training_examples", "training_grid_settings", "training_settings", "variant"]
