"""Project pipelines."""
from kedro.pipeline import Pipeline

from learned_attribution.pipelines import data_processing


def register_pipelines() -> dict[str, Pipeline]:
    data = data_processing.create_pipeline()
    crosstask = data
    return {"__default__": crosstask, "data_processing": data, "crosstask": crosstask}
