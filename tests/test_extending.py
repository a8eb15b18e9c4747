"""docs/architecture.md's "Where a new piece goes", checked by adding a toy one of each kind here, with no edit to a
src file: an explainer (one `@register`), and a pipeline (the checklist: a template of thin nodes over a service,
one namespace per task, its parameter block parsed by its first node, every input and output a catalog entry). The
toy network, metric and rationale format are in tests/models/test_network_registry.py,
tests/metrics/test_metric_registry.py and tests/data/test_rationale_formats.py."""
from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
import torch
from kedro.io import DataCatalog, MemoryDataset
from kedro.pipeline import Pipeline, node, pipeline
from kedro.runner import SequentialRunner

from learned_attribution.adapters.hooks.runs import kind_of
from learned_attribution.core.explainers import METHODS, build_method
from learned_attribution.core.explainers.apply import tokenizer_batch
from learned_attribution.core.explainers.passes import PassMethod, explain_together
from learned_attribution.core.models.model_pass import HIDDEN_STATES
from learned_attribution.core.tasks import TASKS
from learned_attribution.services.config import block, positive_int


@pytest.fixture
def toy_explainer():
    """A toy baseline: each token's hidden-state norm at the last layer, read off the shared pass."""
    from learned_attribution.core.explainers import register

    @register("toy_last_norm")
    class LastNorm(PassMethod):
        family = "activation"
        needs = frozenset({HIDDEN_STATES})

        def scores_from(self, run, batch):
            return run.hidden_states[-1].norm(dim=-1)

    yield LastNorm
    del METHODS["toy_last_norm"]


def test_a_registered_explainer_runs_beside_the_others_in_one_shared_pass(toy_explainer, tiny_classifier):
    model, tokenizer = tiny_classifier("bert")
    ids = [tokenizer(text)["input_ids"] for text in ("the film was good", "bad")]
    batch = tokenizer_batch(ids, None, tokenizer)
    out = explain_together(model, batch, {"toy": build_method("toy_last_norm"), "saliency": build_method("saliency")})
    with torch.no_grad():
        states = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                       output_hidden_states=True).hidden_states[-1]
    expected = states.norm(dim=-1) * batch.attention_mask  # padding 0
    torch.testing.assert_close(out["toy"].scores, expected.float())
    assert out["toy"].logits is not None and "toy_last_norm" in METHODS


# ---- a toy pipeline by the checklist -----------------------------------------------------------------------------

def toy_settings(values: dict[str, Any]) -> int:
    """The toy block parsed in the first node (in a real pipeline: a parser in services/config/)."""
    return positive_int(block(values, "toy", ("min_words",))["min_words"], "toy.min_words")


def long_texts(examples: pd.DataFrame, min_words: int) -> pd.DataFrame:
    """A thin node over a service (here, a one-liner): the examples of at least `min_words` words."""
    return examples[examples["words"].map(len) >= min_words].reset_index(drop=True)


def create_toy_pipeline(tasks=TASKS) -> Pipeline:
    template = pipeline([node(toy_settings, "params:toy", "settings", name="parse_settings"),
                         node(long_texts, ["examples", "settings"], "long_texts", name="long_texts")])
    return sum((pipeline(template, namespace=f"toy_{task}", inputs={"examples": f"examples_{task}"},
                         parameters={"params:toy": "params:toy"}) for task in tasks), Pipeline([]))


def test_a_pipeline_made_by_the_checklist_runs_one_namespace_per_task():
    examples = pd.DataFrame({"words": [["a", "fun", "film"], ["dull"], ["the", "best", "film", "ever"]]})
    catalog = DataCatalog({f"examples_{task}": MemoryDataset(examples) for task in TASKS}
                          | {"params:toy": MemoryDataset({"min_words": 3})})
    SequentialRunner().run(create_toy_pipeline(), catalog)
    for task in TASKS:
        assert catalog.load(f"toy_{task}.long_texts")["words"].map(len).tolist() == [3, 4]
        assert kind_of(f"toy_{task}") is None  # no MLflow run until a RunKind in adapters/hooks/runs.py names it
    bad = DataCatalog({f"examples_{task}": MemoryDataset(examples) for task in TASKS}
                      | {"params:toy": MemoryDataset({"min_words": 0})})
    with pytest.raises(ValueError, match=r"parameter toy.min_words=0: must be an integer of at least 1"):
        SequentialRunner().run(create_toy_pipeline(), bad)
