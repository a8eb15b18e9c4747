"""Project pipelines."""
from kedro.pipeline import Pipeline

from learned_attribution.pipelines import (ablation, afn, amortize, classifiers, crosstask, data_processing,
                                          evaluate_external, fewshot, record, transfer)


def register_pipelines() -> dict[str, Pipeline]:
    everything = crosstask.create_pipeline()
    return {
        "__default__": everything,
        "crosstask": everything,
        "data_processing": data_processing.create_pipeline(),
        "classifiers": classifiers.create_pipeline(),
        "folds": crosstask.create_folds(),
        "ablation": ablation.create_pipeline(),
        "afn": afn.create_pipeline(),
        "evaluate_external": evaluate_external.create_pipeline(),
        "transfer": transfer.create_pipeline(),
        "fewshot": fewshot.create_pipeline(),
        "amortize": amortize.create_pipeline(),
        "amortize_own": amortize.create_own_pipeline(),
        "record": record.create_pipeline(),
    }
