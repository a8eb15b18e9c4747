"""The cost benchmark's one-text-at-a-time columns (attribution_throughput.py, unless `--no-batch1`): what a served
model answering requests of one text pays per request.

- every entry (the `api:` ones included) on batches of ONE text, each text timed next to a plain forward pass on
  that one text (`n_examples_batch1`, `examples_per_s_batch1`, `ratio_to_forward_batch1`);
- for Saliency, Input x Gradient and Integrated Gradients, the seconds per text of what the API calls for a method
  (`apply.tokenizer_batch` on the one text, then the explainer's `explain(model, batch)`) timed text by text next to
  the method's own captum call on it (`api_one_text_s`, `captum_one_text_s`, `api_vs_captum_one_text`: captum's
  seconds over the API's, above 1 the API is faster; `captum_max_abs_difference` compares their scores);
- for Integrated Gradients, the seconds per text explaining each text alone over those in the batches
  (`batched_vs_alone`, at least 1: batching costs no more per text).
"""
from __future__ import annotations

from typing import Callable, Sequence

import pandas as pd
import torch

from attribution_steps import ModelCallTally, api_steps, classify_steps, explainer_steps, make_batches, synchronize
from harness import PairedWorkload, Step, paired_rounds, say, summarise, warm_up

CAPTUM_METHODS = ("saliency", "input_x_gradient", "integrated_gradients")  # methods with a captum equivalent


def captum_call(model: torch.nn.Module, name: str, explainer) -> Callable[[object], torch.Tensor] | None:
    """`batch -> scores [B, T]`: the method's own captum call on the word-embedding layer at the explainer's
    settings (the captum object built once, here), or None for a method without a captum equivalent."""
    from captum.attr import LayerGradientXActivation, LayerIntegratedGradients

    from learned_attribution.core.explainers.gradient import logits_function, pad_baseline_ids

    layer, forward = model.get_input_embeddings(), logits_function(model)
    if name in ("saliency", "input_x_gradient"):
        gradient_x_activation = LayerGradientXActivation(forward, layer, multiply_by_inputs=name == "input_x_gradient")

        def gradients(batch) -> torch.Tensor:
            with torch.enable_grad():
                values = gradient_x_activation.attribute(batch.input_ids, target=batch.target,
                                                         additional_forward_args=(batch.attention_mask,))
            return values.norm(dim=-1) if name == "saliency" else values.sum(dim=-1)
        return gradients
    if name == "integrated_gradients":
        integrated = LayerIntegratedGradients(forward, layer)

        def integrated_gradients(batch) -> torch.Tensor:
            with torch.enable_grad():
                values, _ = integrated.attribute(
                    batch.input_ids, baselines=pad_baseline_ids(batch), target=batch.target,
                    additional_forward_args=(batch.attention_mask,), n_steps=explainer.n_steps,
                    method=explainer.method, internal_batch_size=explainer.internal_batch_size,
                    return_convergence_delta=True)  # as the explainer, which reports it too
            return values.sum(dim=-1)
        return integrated_gradients
    return None


def one_text_steps(model: torch.nn.Module, tokenizer, examples: pd.DataFrame, targets: dict[int, int],
                   device: torch.device, run: Callable[[object], torch.Tensor], make: bool) -> list[Step]:
    """Per text of `examples`: `run` on a batch of that one text. With `make`, the step makes the batch itself
    (`apply.tokenizer_batch` and the move to the device: what the API does per request); else it is made once."""
    from learned_attribution.core.explainers.apply import tokenizer_batch

    def step_for(row: int, ids: list[int]) -> Step:
        premade = tokenizer_batch([ids], [targets[row]], tokenizer).to(device)

        def run_one() -> int:
            run(tokenizer_batch([ids], [targets[row]], tokenizer).to(device) if make else premade)
            synchronize(model)
            return 1
        return run_one

    return [step_for(row, list(ids)) for row, ids in enumerate(examples["input_ids"])]


def alone_steps(model: torch.nn.Module, explainer, batches, tokenizer, examples: pd.DataFrame,
                targets: dict[int, int], device: torch.device) -> list[Step]:
    """Per batch of `batches`: the explainer on each of the batch's texts alone (one-text batches made once),
    the reference that the batched calls on the same texts are timed beside."""
    from learned_attribution.core.explainers.apply import tokenizer_batch

    ids = list(examples["input_ids"])

    def step_for(indices) -> Step:
        singles = [tokenizer_batch([ids[i]], [targets[i]], tokenizer).to(device) for i in indices]

        def run() -> int:
            for batch in singles:
                explainer.explain(model, batch)
            synchronize(model)
            return len(singles)
        return run

    return [step_for(indices) for indices, _ in batches]


def paired_medians(timings: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per method: medians over rounds of its examples/s, its reference's examples/s and their paired ratio."""
    return {method: {"examples_per_s": float(group["examples_per_s"].median()),
                     "reference_examples_per_s": float(group["reference_examples_per_s"].median()),
                     "ratio": float(group["ratio"].median())}
            for method, group in timings.groupby("method", sort=False)}


def batch1_columns(args, setup, explainers: dict, workload_names: Sequence[str], api_entries: dict, fold,
                   predicted: dict[int, int], device: torch.device) -> dict[str, dict]:
    """The one-text-at-a-time columns (module docstring) per table row name: every entry of `workload_names`
    at batch 1 beside a forward pass at batch 1, the API's one-text call beside captum's own call, and
    Integrated Gradients alone beside batched."""
    from learned_attribution.core.explainers.apply import tokenizer_batch

    examples = setup.examples
    texts = {"forward_all": examples.iloc[:min(args.batch1_texts, len(examples))],
             "forward_subset": examples.iloc[:min(args.batch1_texts, args.n_expensive, len(examples))]}
    singles = {ref: make_batches(rows, 1, setup.tokenizer, predicted, device) for ref, rows in texts.items()}
    forward = {ref: classify_steps(setup.model, batches) for ref, batches in singles.items()}
    workloads: dict[str, PairedWorkload] = {}
    references: dict[str, str] = {}
    for name in workload_names:
        reference = "forward_subset" if name in args.expensive else "forward_all"
        if name in api_entries:
            method, variant = api_entries[name]
            steps = api_steps(fold, method, variant, texts[reference], [i for i, _ in singles[reference]],
                              setup.tokenizer)
        else:
            steps = explainer_steps(setup.model, explainers[name], singles[reference], ModelCallTally())
        steps[0]()  # warm-up at this shape
        workloads[name], references[name] = PairedWorkload(steps, forward[reference]), reference
    say(f"timing {len(workloads)} methods one text at a time x {args.rounds} rounds, each text beside a plain forward "
        f"pass on that text ({len(texts['forward_all'])} texts; expensive methods {len(texts['forward_subset'])})")
    summary = summarise(paired_rounds(workloads, args.rounds, args.min_seconds_batch1, label="batch 1 "), references,
                        "ratio_to_forward")
    columns: dict[str, dict] = {}
    for record in summary.to_dict("records"):
        columns[record["method"]] = {"n_examples_batch1": len(texts[record["reference"]]),
                                     "examples_per_s_batch1": record["examples_per_s"],
                                     "ratio_to_forward_batch1": record["ratio_to_forward"]}

    pairs: dict[str, PairedWorkload] = {}
    differences: dict[str, float] = {}
    for name in (n for n in CAPTUM_METHODS if n in workload_names):
        reference = "forward_subset" if name in args.expensive else "forward_all"
        rows, explainer = texts[reference], explainers[name]
        captum = captum_call(setup.model, name, explainer)
        ours = one_text_steps(setup.model, setup.tokenizer, rows, predicted, device,
                              lambda batch, e=explainer: e.explain(setup.model, batch).scores, make=True)
        theirs = one_text_steps(setup.model, setup.tokenizer, rows, predicted, device, captum, make=False)
        first = tokenizer_batch([list(rows["input_ids"].iloc[0])], [predicted[0]], setup.tokenizer).to(device)
        differences[name] = float((explainer.explain(setup.model, first).scores - captum(first)).abs().max().detach())
        pairs[name] = PairedWorkload(ours, theirs)
    if "integrated_gradients" in pairs:
        explainer = explainers["integrated_gradients"]
        batches = make_batches(texts["forward_subset"], args.batch_size, setup.tokenizer, predicted, device)
        pairs["integrated_gradients:batched"] = PairedWorkload(
            explainer_steps(setup.model, explainer, batches, ModelCallTally()),
            alone_steps(setup.model, explainer, batches, setup.tokenizer, texts["forward_subset"], predicted, device))
    if pairs:
        say(f"timing the API's one-text call beside captum's own ({', '.join(differences)}), and Integrated Gradients "
            "batched beside alone")
        warm_up(list(pairs.values()), skip=False)
        medians = paired_medians(paired_rounds(pairs, args.rounds, args.min_seconds_batch1, label="one text "))
        for name, difference in differences.items():
            columns.setdefault(name, {}).update(
                api_one_text_s=1 / medians[name]["examples_per_s"],
                captum_one_text_s=1 / medians[name]["reference_examples_per_s"],
                api_vs_captum_one_text=medians[name]["ratio"], captum_max_abs_difference=difference)
        if "integrated_gradients:batched" in medians:
            columns["integrated_gradients"]["batched_vs_alone"] = medians["integrated_gradients:batched"]["ratio"]
    return columns

