"""Attention features that ExpNet reads (SPEC §5): per token, [CLS]->token and token->[CLS] attention of every head."""
from __future__ import annotations

from typing import Callable, Iterator, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from learned_attribution.core.data.modes import EXPLAINED, explained_classes

from .runner import eval_mode, forward, iter_batches, pad_batch


def feature_names(n_heads: int) -> list[str]:
    return [f"cls_to_tok_h{h}" for h in range(n_heads)] + [f"tok_to_cls_h{h}" for h in range(n_heads)]


def cls_attention_features(attention: torch.Tensor) -> torch.Tensor:
    """[B, H, T, T] attention probabilities of one layer -> [B, T, 2H] features:
    A_h[CLS -> j] for every head, then A_h[j -> CLS] for every head (heads kept separate)."""
    from_cls = attention[:, :, 0, :]  # [B, H, T]: row of [CLS], how much [CLS] attends to j
    to_cls = attention[:, :, :, 0]  # [B, H, T]: column of [CLS], how much j attends to [CLS]
    return torch.cat([from_cls, to_cls], dim=1).transpose(1, 2)


def frame_token_ids(tokenizer) -> list[int]:
    """[CLS], [SEP] and [PAD]: the tokens that frame a sequence. [UNK] is special to the tokenizer
    but stands for a real word, so it keeps its place (and label) among the scored tokens."""
    return [tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id]


def special_token_mask(input_ids: torch.Tensor, attention_mask: torch.Tensor, special_ids: Sequence[int]) -> torch.Tensor:
    """True at the given special token ids (see `frame_token_ids`) and at padding."""
    special = torch.isin(input_ids, torch.as_tensor(list(special_ids), dtype=input_ids.dtype, device=input_ids.device))
    return special | (attention_mask == 0)


def layer_attention(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, layer: int) -> torch.Tensor:
    """Attention probabilities [B, H, T, T] of one layer (negative indices count from the last)."""
    return forward(model, input_ids, attention_mask, attentions=True).attentions[layer]


def extract_attention_features(model: torch.nn.Module, examples: pd.DataFrame, layer: int, batch_size: int,
                               pad_token_id: int, special_ids: Sequence[int], tokenizer=None,
                               chunk_size: int = 2000) -> Iterator[pd.DataFrame]:
    """Yield one token-per-row table of the paper's 2H attention features per chunk of `chunk_size` examples.

    `examples` needs `example_id`, `input_ids` and `token_labels`; see `extract_token_rows`.
    """
    @torch.inference_mode()
    def compute(input_ids: torch.Tensor, attention_mask: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        with eval_mode(model):
            return cls_attention_features(layer_attention(model, input_ids, attention_mask, layer)).float()

    return extract_token_rows(examples, compute, feature_names(model.config.num_attention_heads), batch_size,
                              pad_token_id, special_ids, tokenizer, chunk_size, "attention features")


def extract_token_rows(examples: pd.DataFrame, compute: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
                       names: Sequence[str], batch_size: int, pad_token_id: int, special_ids: Sequence[int],
                       tokenizer=None, chunk_size: int = 2000, description: str = "token features") -> Iterator[pd.DataFrame]:
    """Yield one token-per-row feature table per chunk of `chunk_size` examples (memory stays bounded).

    `compute(input_ids, attention_mask, target)` returns [B, T, len(names)] features of a padded batch;
    `target` is the class the example is explained for (`modes.explained_classes`: `explained`, else `predicted`,
    else 0). `examples` needs `example_id`,
    `input_ids` and `token_labels`; the columns in `carry` below are copied onto every token row.
    """
    carry = [c for c in ("task", "role", "split", "label", "predicted", "probability", "correct", EXPLAINED)
             if c in examples]
    progress = tqdm(total=len(examples), desc=description, leave=False)
    for start in range(0, len(examples), chunk_size):
        chunk = examples.iloc[start:start + chunk_size]
        ids = list(chunk["input_ids"].map(list))
        targets = explained_classes(chunk)
        parts = []
        for batch in iter_batches(ids, batch_size):
            input_ids, attention_mask = pad_batch([ids[i] for i in batch], pad_token_id)
            features = compute(input_ids, attention_mask, torch.as_tensor(targets[batch], dtype=torch.long))
            special = special_token_mask(input_ids, attention_mask, special_ids)
            for row, index in enumerate(batch):
                keep = (~special[row]).nonzero().squeeze(1)
                record = chunk.iloc[index]
                labels = record["token_labels"]
                frame = pd.DataFrame(features[row, keep.to(features.device)].detach().cpu().numpy(), columns=list(names))
                frame.insert(0, "example_id", record["example_id"])
                frame.insert(1, "position", keep.numpy())
                tokens = input_ids[row, keep].tolist()
                frame.insert(2, "token", tokenizer.convert_ids_to_tokens(tokens) if tokenizer else tokens)
                frame.insert(3, "token_label", np.asarray(labels)[keep.numpy()] if labels is not None else -1)
                for column in carry:
                    frame[column] = record[column]
                parts.append(frame)
            progress.update(len(batch))
        yield pd.concat(parts, ignore_index=True)
    progress.close()
