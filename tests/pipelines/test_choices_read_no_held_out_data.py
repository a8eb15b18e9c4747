"""No node that makes a choice reads what its fold scores: the wiring of every choosing node (the ExpNet+ selection,
the few-shot prior choice, the explainers' fitting) names none of the held-out task's datasets, except those listed
here with the reason they cannot leak (each is also covered by a poisoning test, which runs the node with the
held-out rationales inverted and finds the choice unchanged: tests/pipelines/test_held_out_rationales.py,
tests/explain/test_training_grid.py, tests/integration/test_fewshot_pipeline.py)."""
from __future__ import annotations

import pytest

from learned_attribution.core.tasks import FOLD_PREFIX, TASKS
from learned_attribution.pipelines import ablation, crosstask, fewshot

# (pipeline, node name without its namespace): the choosing nodes.
CHOOSING_NODES = (("crosstask", "train_expnet"), ("crosstask", "fit_expnet_plus"),
                  ("ablation", "fit_candidates"), ("ablation", "select_expnet_plus"),
                  ("fewshot", "choose_refits"), ("fewshot", "fit_priors"))
# Held-out datasets a choosing node may read, and why that cannot leak the held-out rationales.
ALLOWED = {
    "{task}.classifier": "the classifier being explained: its shape and names, no rationale",
    "{task}.explainer_signals": "read for its columns and, unlabeled, for self-training; the poisoning test inverts "
                                "its token labels and finds the weights and the choice unchanged",
    "heldout_{task}.budget": "rho, the training tasks' rationale density (computed without the held-out task)",
    "heldout_{task}.bundle": "the fold's own explainers, trained on the training tasks",
    **{f"heldout_{{task}}.{name}": "the fold's parsed parameters"
       for name in ("compute_settings", "expnet_recipe", "expnet_plus_recipe")},
}
PIPELINES = {"crosstask": crosstask.create_pipeline, "ablation": ablation.create_pipeline,
             "fewshot": fewshot.create_pipeline}


def held_out_inputs(node, task: str) -> set[str]:
    """The inputs of `node` that belong to the held-out `task`: its own datasets or its fold's outputs."""
    return {name for name in node.inputs
            if name.startswith((f"{task}.", f"tokenized_{task}", f"{FOLD_PREFIX}{task}."))}


@pytest.mark.parametrize("pipeline_name, node_name", CHOOSING_NODES)
def test_a_choosing_node_reads_no_held_out_rationales(pipeline_name, node_name):
    pipeline = PIPELINES[pipeline_name]()
    for task in TASKS:
        found = [n for n in pipeline.nodes if n.name.endswith(f".{node_name}") and task in n.namespace]
        assert len(found) == 1, f"{pipeline_name}: no single {node_name} node of the {task} fold"
        allowed = {name.format(task=task) for name in ALLOWED}
        assert held_out_inputs(found[0], task) <= allowed, \
            f"{found[0].name} reads {sorted(held_out_inputs(found[0], task) - allowed)} of the held-out task"


def test_the_check_sees_a_held_out_input():
    scoring = [n for n in crosstask.create_pipeline().nodes if n.name == f"{FOLD_PREFIX}sst2.score_fold"][0]
    assert "sst2.rationale_predictions" in held_out_inputs(scoring, "sst2")
