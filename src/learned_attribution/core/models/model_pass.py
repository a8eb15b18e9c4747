"""One pass of a classifier: the forward pass (with the attentions and hidden states asked for) and one backward
pass from each row's explained logit to every tensor asked for. The one engine of every reader of a classifier's
internals and their gradients:

- the baselines of `core/explainers/passes.py` (raw attention, rollout, GAE, AttCAT, attention x gradient,
  saliency, input x gradient, Grad-CAM, AFN norm), each a function of a `ModelPass`, alone or sharing one pass;
- the ExpNet+ signals of `core/models/signals.py`, whose feature sets read one `run_pass`.

The pieces:
- the needs (`NEEDS`): what a pass can provide; a pass computes only what it is asked for.
- `ModelPass`: what a pass provides (the fields not asked for are None).
- `WordEmbeddingLeaf`: a hook that makes the word-embedding output a leaf of the autograd graph (optionally
  replaced by given values: Integrated Gradients feeds its interpolation steps through it).
- `BlockInputLeaf`: a hook that records the hidden states entering one block, optionally as the graph's leaf.
- `frozen_weights`: eval mode and weights without gradients for the duration of a pass.
- `explained_logit`: what every gradient here (and Integrated Gradients') differentiates: the target class's logit,
  or with a contrast class its margin over it (`core/explainers/objective.py` states every family's objective).
- `run_pass`: the pass itself.

Cost: the weights are frozen during a pass, so the autograd graph starts at a leaf, the lowest tensor
differentiated: the word-embedding output, or, when every gradient asked for is at or above one block (`block`: its
attentions, its input hidden states), that block's input. Then nothing below the block records a graph and the
backward pass runs through the blocks above it alone, which keeps ExpNet+'s gradient signals near the cost of a
forward pass. The gradients are the same either way (the same backward computation above the leaf).
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Iterable, Iterator

import torch

from .architectures import NoAttentionsError, architecture, no_attentions_message
from .runner import eval_mode, model_device

# What a pass can provide (`run_pass`'s `needs`):
ATTENTIONS = "attentions"  # per layer [B, H, T, T] attention probabilities
ATTENTION_GRADIENTS = "attention_gradients"  # per layer d logit / d attentions
HIDDEN_STATES = "hidden_states"  # [embedding output, layer 1 output, ...] [B, T, D] (HF's `hidden_states`)
HIDDEN_GRADIENTS = "hidden_gradients"  # per layer output (not the embedding output) d logit / d h
EMBEDDING_GRADIENTS = "embedding_gradients"  # d logit / d word-embedding output (before positions and LayerNorm)
# ... and at the one block `run_pass(block=...)` names (0 the first):
BLOCK_ATTENTION_GRADIENTS = "block_attention_gradients"  # d logit / d that block's attentions [B, H, T, T]
BLOCK_INPUT_GRADIENTS = "block_input_gradients"  # d logit / d the hidden states entering that block [B, T, D]
NEEDS = frozenset({ATTENTIONS, ATTENTION_GRADIENTS, HIDDEN_STATES, HIDDEN_GRADIENTS, EMBEDDING_GRADIENTS,
                   BLOCK_ATTENTION_GRADIENTS, BLOCK_INPUT_GRADIENTS})
_AT_BLOCK = frozenset({BLOCK_ATTENTION_GRADIENTS, BLOCK_INPUT_GRADIENTS})
_BELOW_BLOCK = frozenset({ATTENTION_GRADIENTS, HIDDEN_GRADIENTS, EMBEDDING_GRADIENTS})  # may reach below any block
_GRADIENTS = _AT_BLOCK | _BELOW_BLOCK


@dataclass(frozen=True)
class PassInputs:
    """What `run_pass` reads of a batch; the explainers' `Batch` carries these fields too and is passed as it is."""

    input_ids: torch.Tensor  # [B, T] long
    attention_mask: torch.Tensor  # [B, T], 1 = real token
    target: torch.Tensor | None = None  # [B] the class to explain; None: the predicted class
    contrast: torch.Tensor | None = None  # [B] a contrast class per row (needs `target`); None: no contrast


@dataclass
class ModelPass:
    """One forward (and, when a need asks for it, backward) pass of a classifier on a batch, detached; every tensor
    float32 (with `run_pass(float32=False)`: in the dtype the model computed it in) except `logits`, as the model
    returned them. Fields a pass was not asked for are None."""

    logits: torch.Tensor  # [B, C]
    target: torch.Tensor  # [B] the explained class: `batch.target`, or the predicted class when it is None
    contrast: torch.Tensor | None = None  # [B] the contrast class the gradients are a margin over (None: none)
    attentions: list[torch.Tensor] | None = None
    attention_gradients: list[torch.Tensor] | None = None
    hidden_states: list[torch.Tensor] | None = None
    hidden_gradients: list[torch.Tensor] | None = None
    word_embeddings: torch.Tensor | None = None  # [B, T, E] the word-embedding layer's output
    embedding_gradients: torch.Tensor | None = None
    block: int | None = None  # the block the block needs were taken at
    block_input: torch.Tensor | None = None  # [B, T, D] the hidden states entering `block`
    block_input_gradients: torch.Tensor | None = None
    block_attention_gradients: torch.Tensor | None = None

    def layer_outputs(self) -> list[torch.Tensor]:
        """The hidden states at each layer's output (the embedding output excluded)."""
        return self.hidden_states[1:]


class WordEmbeddingLeaf:
    """A forward hook on the word-embedding layer that makes its output a leaf of the autograd graph (`leaf`),
    optionally replaced by given values (`replacement`). The backward pass then stops there (nothing below the
    layer is needed), and the gradient exists even when the embedding weights are frozen."""

    def __init__(self, model: torch.nn.Module, replacement: torch.Tensor | None = None) -> None:
        self.layer = model.get_input_embeddings()
        self.replacement = replacement
        self.leaf: torch.Tensor | None = None

    def _hook(self, _module: torch.nn.Module, _inputs: tuple, output: torch.Tensor) -> torch.Tensor:
        if self.leaf is not None:
            raise RuntimeError("the word-embedding layer ran twice in one forward pass; expected once")
        values = output if self.replacement is None else self.replacement
        if values.shape != output.shape:
            raise ValueError(f"replacement embeddings {tuple(values.shape)} for an output of {tuple(output.shape)}")
        self.leaf = values.detach().requires_grad_(True)
        return self.leaf

    def __enter__(self) -> "WordEmbeddingLeaf":
        self._handle = self.layer.register_forward_hook(self._hook)
        return self

    def __exit__(self, *exc) -> None:
        self._handle.remove()


class BlockInputLeaf:
    """A forward pre-hook on block `block` (of the classifier's family, `architectures`) that records the hidden
    states entering it (`hidden`); with `leaf`, they enter as a new leaf of the autograd graph, where the graph
    starts when the weights are frozen and nothing below requires a gradient."""

    def __init__(self, model: torch.nn.Module, block: int, leaf: bool) -> None:
        self.family = architecture(model)
        self.block = self.family.blocks(model)[block]
        self.make_leaf = leaf
        self.hidden: torch.Tensor | None = None

    def _hook(self, _module: torch.nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        if self.hidden is not None:
            raise RuntimeError("the explained block ran twice in one forward pass; expected once")
        hidden = self.family.block_hidden_states(args, kwargs)
        if self.make_leaf:
            hidden = hidden.detach().requires_grad_(True)
            args, kwargs = self.family.replace_block_hidden_states(args, kwargs, hidden)
        self.hidden = hidden
        return args, kwargs

    def __enter__(self) -> "BlockInputLeaf":
        self._handle = self.block.register_forward_pre_hook(self._hook, with_kwargs=True)
        return self

    def __exit__(self, *exc) -> None:
        self._handle.remove()


@contextmanager
def frozen_weights(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """`model` in eval mode (no dropout) with its weights' requires_grad off, both restored after: the graph of a
    pass then starts at its leaves, and no gradient of a weight is kept or computed."""
    flags = [parameter.requires_grad for parameter in model.parameters()]
    with eval_mode(model):
        for parameter in model.parameters():
            parameter.requires_grad_(False)
        try:
            yield model
        finally:
            for parameter, flag in zip(model.parameters(), flags):
                parameter.requires_grad_(flag)


def explained_logit(logits: torch.Tensor, target: torch.Tensor, contrast: torch.Tensor | None = None) -> torch.Tensor:
    """[B, 1] what a gradient explains per row: logit[target], or with a `contrast`, logit[target] - logit[contrast]
    (the target's margin over the contrast). Computed in the dtype of `logits`; without a contrast exactly the
    gather it always was, so every score without one is unchanged to the last bit."""
    explained = logits.gather(1, target[:, None])
    if contrast is None:
        return explained
    return explained - logits.gather(1, contrast.to(logits.device)[:, None])


def check_batch(batch: PassInputs) -> None:
    """A clear error for a batch whose tensors disagree in shape, or whose contrast cannot be explained: a contrast
    needs a target (a margin of a given class) and differs from it in every row."""
    if batch.input_ids.ndim != 2:
        raise ValueError(f"batch.input_ids must be [B, T]; got shape {tuple(batch.input_ids.shape)}")
    if batch.attention_mask.shape != batch.input_ids.shape:
        raise ValueError(f"batch.attention_mask shape {tuple(batch.attention_mask.shape)} differs from "
                         f"batch.input_ids shape {tuple(batch.input_ids.shape)}")
    for name in ("target", "contrast"):
        classes = getattr(batch, name, None)
        if classes is not None and classes.shape != (batch.input_ids.shape[0],):
            raise ValueError(f"batch.{name} must be [B] = [{batch.input_ids.shape[0]}]; got shape "
                             f"{tuple(classes.shape)}")
    contrast = getattr(batch, "contrast", None)
    if contrast is None:
        return
    if batch.target is None:
        raise ValueError("batch.contrast needs batch.target: a margin is of a given class over the contrast")
    same = (contrast.to(batch.target.device) == batch.target).nonzero().flatten().tolist()
    if same:
        raise ValueError(f"batch.contrast equals batch.target in rows {same}: a class has no margin over itself")


def check_classes(batch: PassInputs, num_labels: int) -> None:
    """Refuse a target or contrast class outside 0..num_labels-1."""
    for name in ("target", "contrast"):
        classes = getattr(batch, name, None)
        if classes is not None and ((classes < 0) | (classes >= num_labels)).any():
            raise ValueError(f"batch.{name} holds {classes.tolist()}, outside 0..{num_labels - 1} "
                             f"for a {num_labels}-class model")


def _check_needs(model: torch.nn.Module, needs: frozenset[str], block: int | None) -> None:
    unknown = needs - NEEDS
    if unknown:
        raise ValueError(f"unknown pass needs {sorted(unknown)}; known: {sorted(NEEDS)}")
    if needs & _AT_BLOCK:
        if block is None:
            raise ValueError(f"pass needs {sorted(needs & _AT_BLOCK)} are taken at one block: name it (block=...)")
        n_blocks = len(architecture(model).blocks(model))
        if not 0 <= block < n_blocks:
            raise ValueError(f"block={block} is out of range for a model with {n_blocks} blocks (0 the first)")


def run_pass(model: torch.nn.Module, batch: PassInputs, needs: Iterable[str], *, block: int | None = None,
             float32: bool = True) -> ModelPass:
    """One pass of `model` on `batch` (a `PassInputs`, or anything with its fields) providing `needs` (a subset of
    `NEEDS`; the block needs at block `block`), the gradients of each row's explained logit (`batch.target`, or the
    predicted class; with `batch.contrast`, its margin over that class: `explained_logit`). `float32=False` keeps
    every tensor in the dtype the model computed it in (the ExpNet+ signals compute in it). Attentions need an
    eager-attention model (`NoAttentionsError` otherwise)."""
    needs = frozenset(needs)
    _check_needs(model, needs, block)
    check_batch(batch)
    device = model_device(model)
    input_ids, attention_mask = batch.input_ids.to(device), batch.attention_mask.to(device)
    attentions_needed = bool(needs & {ATTENTIONS, ATTENTION_GRADIENTS, BLOCK_ATTENTION_GRADIENTS})
    hidden_needed = bool(needs & {HIDDEN_STATES, HIDDEN_GRADIENTS})
    differentiate = bool(needs & _GRADIENTS)
    from_block = differentiate and not needs & _BELOW_BLOCK  # the graph can start at the block's input
    words = WordEmbeddingLeaf(model) if differentiate and not from_block else None
    entering = BlockInputLeaf(model, block, leaf=from_block) if BLOCK_INPUT_GRADIENTS in needs or from_block else None
    with frozen_weights(model), torch.set_grad_enabled(differentiate), ExitStack() as hooks:
        for tap in (words, entering):
            if tap is not None:
                hooks.enter_context(tap)
        output = model(input_ids=input_ids, attention_mask=attention_mask, output_attentions=attentions_needed,
                       output_hidden_states=hidden_needed)
        attentions = list(output.attentions or ()) if attentions_needed else None
        if attentions is not None and (not attentions or any(a is None for a in attentions)):
            raise NoAttentionsError(no_attentions_message(model))
        logits = output.logits
        check_classes(batch, logits.shape[-1])
        target = logits.detach().argmax(dim=-1) if batch.target is None else batch.target.to(device)
        contrast = getattr(batch, "contrast", None)
        contrast = None if contrast is None else contrast.to(device)
        hidden = list(output.hidden_states) if hidden_needed else None
        wrt: dict[str, list[torch.Tensor]] = {}
        if ATTENTION_GRADIENTS in needs:
            wrt[ATTENTION_GRADIENTS] = attentions
        if HIDDEN_GRADIENTS in needs:
            wrt[HIDDEN_GRADIENTS] = hidden[1:]
        if EMBEDDING_GRADIENTS in needs:
            wrt[EMBEDDING_GRADIENTS] = [words.leaf]
        if BLOCK_ATTENTION_GRADIENTS in needs:
            wrt[BLOCK_ATTENTION_GRADIENTS] = [attentions[block]]
        if BLOCK_INPUT_GRADIENTS in needs:
            wrt[BLOCK_INPUT_GRADIENTS] = [entering.hidden]
        cast = (lambda tensor: tensor.detach().float()) if float32 else (lambda tensor: tensor.detach())
        gradients: dict[str, list[torch.Tensor]] = {}
        if wrt:
            # One backward pass for every tensor asked for. autograd.grad, not backward(): the model's parameter
            # .grad stay untouched, and a tensor that is not on the path to the logits fails loudly. The sum over
            # rows of each row's explained logit (in float32: the gradient of a sum is exact in any dtype) gives
            # every row its own gradient (rows never interact).
            flat = [tensor for tensors in wrt.values() for tensor in tensors]
            grads = iter(torch.autograd.grad(explained_logit(logits.float(), target, contrast).sum(), flat))
            gradients = {key: [cast(next(grads)) for _ in tensors] for key, tensors in wrt.items()}

    def one(key: str) -> torch.Tensor | None:
        return gradients[key][0] if key in gradients else None

    return ModelPass(
        logits=logits.detach(), target=target, contrast=contrast,
        attentions=[cast(a) for a in attentions] if ATTENTIONS in needs else None,
        attention_gradients=gradients.get(ATTENTION_GRADIENTS),
        hidden_states=[cast(h) for h in hidden] if HIDDEN_STATES in needs else None,
        hidden_gradients=gradients.get(HIDDEN_GRADIENTS),
        word_embeddings=cast(words.leaf) if EMBEDDING_GRADIENTS in needs else None,
        embedding_gradients=one(EMBEDDING_GRADIENTS),
        block=block if needs & _AT_BLOCK else None,
        block_input=cast(entering.hidden) if BLOCK_INPUT_GRADIENTS in needs else None,
        block_input_gradients=one(BLOCK_INPUT_GRADIENTS),
        block_attention_gradients=one(BLOCK_ATTENTION_GRADIENTS))
