"""Project pipelines."""
from kedro.pipeline import Pipeline

from learned_attribution.pipelines import classifiers, crosstask, data_processing
from learned_attribution.pipelines import afn  # TEMP (afn helper): the lead registers it for real


def register_pipelines() -> dict[str, Pipeline]:
    everything = crosstask.create_pipeline()
    return {
        "__default__": everything,
        "crosstask": everything,
        "data_processing": data_processing.create_pipeline(),
        "classifiers": classifiers.create_pipeline(),
        "folds": crosstask.create_folds(),
        "afn": afn.create_pipeline(),  # TEMP (afn helper)
    }
