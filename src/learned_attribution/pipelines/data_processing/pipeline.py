"""data_processing: the three real data sets -> one token-level rationale schema and a data report."""
from kedro.pipeline import Pipeline, node, pipeline

from .nodes import build_data_report, read_cola, read_hatexplain, read_sst2, tokenize_examples
from learned_attribution.tasks import TASKS



def create_pipeline(**kwargs) -> Pipeline:
    strict = "params:data_processing.strict"
    loaders = [
        node(read_hatexplain,
             ["raw_hatexplain_dataset", "raw_hatexplain_divisions", "params:data_processing.hatexplain", strict],
             ["examples_hatexplain", "skipped_hatexplain"], name="read_hatexplain"),
        node(read_sst2,
             ["raw_sst2_glue_train", "raw_sst2_glue_dev", "raw_sst2_glue_test", "raw_sst2_trees_train",
              "raw_sst2_trees_dev", "raw_sst2_trees_test", "params:data_processing.sst2", strict],
             ["examples_sst2", "skipped_sst2"], name="read_sst2"),
        node(read_cola,
             ["raw_cola_in_domain_train", "raw_cola_in_domain_dev", "raw_cola_out_of_domain_dev",
              "params:data_processing.cola", strict],
             ["examples_cola", "skipped_cola"], name="read_cola"),
    ]
    projections = [
        node(tokenize_examples,
             [f"examples_{task}", "params:encoder", "params:max_length", "params:data_processing.max_per_role",
              "params:seed"],
             f"tokenized_{task}", name=f"tokenize_{task}")
        for task in TASKS
    ]
    report = node(build_data_report, [f"tokenized_{t}" for t in TASKS] + [f"skipped_{t}" for t in TASKS],
                  "data_report", name="build_data_report")
    return pipeline([*loaders, *projections, report])
