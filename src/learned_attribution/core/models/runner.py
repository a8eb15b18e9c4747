"""Running a classifier: padding, length-sorted batching, eval mode, device placement and one forward pass
that captures attentions and hidden states. Every module that runs a model (fine-tuning, prediction,
features, ExpNet+ signals, the explainers, faithfulness, AFN and the public API) goes through here.
"""
from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from typing import Iterator, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from .architectures import NoAttentionsError, no_attentions_message

logger = logging.getLogger(__name__)


def resolve_device(setting: str | torch.device = "auto") -> torch.device:
    """`auto` (CUDA when available, else CPU), `cpu`, `cuda`, `cuda:N` or `mps`; an unavailable device is an error."""
    if isinstance(setting, torch.device):
        return setting
    if setting == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(setting)
    except RuntimeError as error:
        raise ValueError(f"device {setting!r}: expected auto, cpu, cuda, cuda:N or mps") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {setting!r}: CUDA is not available on this machine (use auto or cpu)")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {setting!r}: MPS is not available on this machine (use auto or cpu)")
    return device


@contextmanager
def torch_threads(n_threads: int | None) -> Iterator[None]:
    """Run the block with `n_threads` torch intra-op threads (None: leave torch's setting), then restore it. On a
    shared, busy machine one thread can be several times faster than oversubscribed cores."""
    if n_threads is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(n_threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def cpu_kernels() -> str:
    """The CPU kernels torch runs with, in words: its dispatch capability (`ATEN_CPU_CAPABILITY` lowers it) and
    oneDNN's instruction-set cap (`ONEDNN_MAX_CPU_ISA`)."""
    return (f"torch CPU capability {torch.backends.cpu.get_cpu_capability()}, oneDNN ISA "
            f"{os.environ.get('ONEDNN_MAX_CPU_ISA', 'unlimited')}")


def kernels_description(device: torch.device, bf16: bool) -> str:
    """Where and how the torch work runs, in words (the stage table and the benchmarks print it)."""
    where = cpu_kernels() if device.type == "cpu" else str(device)
    return f"{where}, bf16 autocast {'on' if bf16 else 'off'}"


def bf16_native(device: torch.device) -> bool:
    """Whether bf16 autocast is native (and so worth it) on `device`: CUDA with bf16 support, or a CPU with
    AVX512-BF16 / AMX whose AVX-512 kernels torch and oneDNN are allowed to use (`ATEN_CPU_CAPABILITY=avx2` or
    `ONEDNN_MAX_CPU_ISA=AVX2`, the slow kind's kernels, make it emulated). Elsewhere it is emulated and several times
    slower than fp32 (benchmarks/bf16_autocast.py measures it)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type != "cpu":
        return False
    isa = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
    if "AVX512" not in torch.backends.cpu.get_cpu_capability() or (isa and not isa.startswith(("AVX512", "AVX10",
                                                                                                  "AMX", "ALL"))):
        return False
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            flags = cpuinfo.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_bf16(setting: bool | str, device: torch.device) -> bool:
    """`auto`: bf16 autocast where it is native on a CPU (`bf16_native`), and not on a GPU: there this project's
    small classifiers' steps (~20 ms on an H200) are bound by kernel launches, not arithmetic, and measured slower in
    bf16 (the three MiniLM fine-tunings: 85 s against 69 s in fp32); `true` turns it on for a model large enough to
    gain. true/false force it."""
    if setting == "auto":
        return device.type == "cpu" and bf16_native(device)
    if not isinstance(setting, bool):
        raise ValueError(f"bf16={setting!r}: expected auto, true or false")
    return setting


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of a model's parameters (CPU for a model without parameters)."""
    try:
        return next(model.parameters()).device
    except StopIteration:
        return torch.device("cpu")


def pad_batch(sequences: Sequence[Sequence[int]], pad_token_id: int,
              device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token id lists into (input_ids, attention_mask) [B, T], on `device` (default CPU)."""
    width = max(len(s) for s in sequences)
    input_ids = torch.full((len(sequences), width), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, sequence in enumerate(sequences):
        input_ids[row, :len(sequence)] = torch.as_tensor(list(sequence), dtype=torch.long)
        attention_mask[row, :len(sequence)] = 1
    if device is not None:
        input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
    return input_ids, attention_mask


def length_grouped_batches(lengths: Sequence[int], batch_size: int, shuffle: bool, seed: int = 0) -> list[list[int]]:
    """Batches of similar length (little padding). With `shuffle`, the pool order and batch order
    are seeded random; without, batches follow length order (ties keep the input order)."""
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r}: must be at least 1")
    order = np.argsort(np.asarray(lengths), kind="stable")
    if shuffle:
        rng = np.random.default_rng(seed)
        # Shuffle, then sort within large pools so batches stay length-homogeneous but vary per epoch.
        order = rng.permutation(len(lengths))
        pool = batch_size * 50
        order = np.concatenate([chunk[np.argsort(np.asarray(lengths)[chunk], kind="stable")]
                                for chunk in np.array_split(order, max(1, int(np.ceil(len(order) / pool))))])
    batches = [order[i:i + batch_size].tolist() for i in range(0, len(order), batch_size)]
    if shuffle:
        rng.shuffle(batches)
    return batches


def iter_batches(ids: Sequence[Sequence[int]], batch_size: int) -> Iterator[list[int]]:
    """Length-sorted, deterministic batches of example indices."""
    yield from length_grouped_batches([len(s) for s in ids], batch_size, shuffle=False)


@contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Run `model` in eval mode (no dropout, so outputs and attributions are deterministic), restoring its mode after."""
    was_training = model.training
    if not was_training:  # already in eval mode: skip the walk over every submodule (measurable per batch)
        yield model
        return
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def forward(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, *,
            attentions: bool = False, hidden_states: bool = False):
    """One forward pass on the model's device; with `attentions`, checks that they were returned
    (they are only with eager attention)."""
    device = model_device(model)
    output = model(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device),
                   output_attentions=attentions, output_hidden_states=hidden_states)
    if attentions and (not output.attentions or output.attentions[0] is None):
        raise NoAttentionsError(no_attentions_message(model))
    return output


def autocast(device: torch.device, enabled: bool):
    """bf16 autocast on `device` when `enabled` (see `resolve_bf16` for when it is worth it)."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=enabled)


@torch.inference_mode()
def predict_proba(model: torch.nn.Module, ids: Sequence[Sequence[int]], batch_size: int, pad_token_id: int,
                  bf16: bool = False, desc: str | None = None) -> np.ndarray:
    """Class probabilities [N, C] in the input order (batches grouped by length; a progress bar with `desc`)."""
    device = model_device(model)
    out: np.ndarray | None = None
    with eval_mode(model):
        for batch in tqdm(list(iter_batches(ids, batch_size)), desc=desc, unit="batch", disable=desc is None,
                          leave=False):
            input_ids, attention_mask = pad_batch([ids[i] for i in batch], pad_token_id, device)
            with autocast(device, bf16):
                logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
            if out is None:  # the class count from the logits: any model returning `.logits` works
                out = np.zeros((len(ids), logits.shape[-1]), dtype=np.float32)
            out[batch] = torch.softmax(logits.float(), dim=-1).cpu().numpy()
    return out if out is not None else np.zeros((0, 0), dtype=np.float32)


@torch.inference_mode()
def predict_and_represent(model: torch.nn.Module, ids: Sequence[Sequence[int]], batch_size: int,
                          pad_token_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Class probabilities [N, C] and the last layer's hidden state at position 0 ([CLS], `<s>`: what every
    family's classification head reads, core/models/architectures.py) [N, D], in the input order, from one pass."""
    device = model_device(model)
    probabilities: list[np.ndarray] = [np.zeros(0)] * len(ids)
    states: list[np.ndarray] = [np.zeros(0)] * len(ids)
    with eval_mode(model):
        for batch in iter_batches(ids, batch_size):
            input_ids, attention_mask = pad_batch([ids[i] for i in batch], pad_token_id, device)
            output = forward(model, input_ids, attention_mask, hidden_states=True)
            batch_probabilities = torch.softmax(output.logits.float(), dim=-1).cpu().numpy()
            batch_states = output.hidden_states[-1][:, 0].float().cpu().numpy()
            for row, index in enumerate(batch):
                probabilities[index], states[index] = batch_probabilities[row], batch_states[row]
    if not ids:
        return np.zeros((0, 0), dtype=np.float32), np.zeros((0, 0), dtype=np.float32)
    return np.stack(probabilities), np.stack(states)
