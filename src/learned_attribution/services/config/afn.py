"""The afn pipeline's settings, parsed once (`afn_settings`) from the run's parameters: the `afn` block with the
shared `encoder`, `max_length` and `seed`. Every key and its default lives in conf/base/parameters_afn.yml; the parse
requires each one, refuses unknown ones and checks the values, so a bad value stops the run in the pipeline's first
node with one line naming `parameter afn.<key>`.

The user files' paths (`afn.corpus.user_sentences_file`, `afn.pairs.user_pairs_file`) are read by the catalog
entries `afn.user_sentences` and `afn.user_pairs` from the run's `--params`; the settings keep them so that a path
the catalog did not open (one written into a parameters file) stops the run rather than being left out
(`check_user_file`)."""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from learned_attribution.core.data.schema import RawText
from learned_attribution.core.data.words import treebank_words

from .blocks import block, positive_int
from .classifiers import encoder_name

SPLITS = ("train", "dev", "test")
AFN_KEYS = ("layer", "percentile", "batch_size", "num_threads", "corpus", "pairs", "plots", "mlflow")
CORPUS_KEYS = ("n_phrases", "min_words", "max_words", "splits", "user_sentences_file")
PAIR_KEYS = ("n_context_pairs", "min_words", "max_words", "splits", "example_pairs", "user_pairs_file",
             "prompt_prefixes", "n_prompt_sentences")
MLFLOW_KEYS = ("experiment", "artifact_location")  # where the MLflow hook logs the run (`afn_tracking`)


@dataclass(frozen=True)
class CorpusSettings:
    """`afn.corpus`: how many SST phrases of which length from which splits, and the user's sentence file."""

    n_phrases: int
    min_words: int
    max_words: int
    splits: tuple[str, ...]  # in the order of SPLITS
    user_sentences_file: str | None


@dataclass(frozen=True)
class PairSettings:
    """`afn.pairs`: the SST minimal pairs, the example pairs, the user's pair file and the prompt conditions."""

    n_context_pairs: int
    min_words: int
    max_words: int
    splits: tuple[str, ...]  # in the order of SPLITS
    example_pairs: tuple[tuple[str, str], ...]
    user_pairs_file: str | None
    prompt_prefixes: tuple[tuple[str, str], ...]
    n_prompt_sentences: int


@dataclass(frozen=True)
class PlotSettings:
    """`afn.plots`."""

    n_heatmap_pairs: int


@dataclass(frozen=True)
class AfnSettings:
    """One AFN run: the layer and bucket rule, the forward passes, the corpus, the pairs and the plots, with the
    shared encoder, max_length and seed."""

    layer: int | None  # None: two thirds of the depth (checked against the depth once the encoder has run)
    percentile: float  # as written in the parameters (75 stays an int, as the report prints it)
    batch_size: int
    num_threads: int | None
    corpus: CorpusSettings
    pairs: PairSettings
    plots: PlotSettings
    encoder: str  # encoder.name_or_path
    max_length: int
    seed: int


def check_word_range(min_words: int, max_words: int, parameter: str) -> None:
    """Reject a phrase-length range that selects nothing."""
    if not (isinstance(min_words, int) and isinstance(max_words, int)) or min_words < 1 or max_words < min_words:
        raise ValueError(f"parameters {parameter}.min_words={min_words!r} / max_words={max_words!r}: need "
                         "integers with 1 <= min_words <= max_words")


def refuse_own_tracking_uri(mlflow: Mapping | None) -> None:
    """`afn.mlflow.tracking_uri` was the afn pipeline's own store; every pipeline now logs to `mlflow.tracking_uri`.
    A value left in a conf file is refused in one line rather than silently ignored."""
    leftover = (mlflow or {}).get("tracking_uri")
    if leftover is not None:
        raise ValueError(f"parameter afn.mlflow.tracking_uri={leftover} is not read: every pipeline logs to "
                         "mlflow.tracking_uri (conf/base/parameters.yml); move the value there and delete this key")


def _splits(values: Any, where: str) -> tuple[str, ...]:
    chosen = list(values) if isinstance(values, (list, tuple)) else values
    if not chosen or not isinstance(chosen, list) or set(chosen) - set(SPLITS):
        raise ValueError(f"parameter {where}.splits={values!r}: choose from {list(SPLITS)}")
    return tuple(split for split in SPLITS if split in chosen)


def _word_range(values: Mapping[str, Any], where: str) -> tuple[int, int]:
    check_word_range(values["min_words"], values["max_words"], where)
    return values["min_words"], values["max_words"]


def _file(value: Any, where: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, (str, Path)):
        raise ValueError(f"parameter {where}={value!r}: expected a file path or null")
    return str(value)


def _text_pairs(values: Any, where: str, expected: str) -> tuple[tuple[str, str], ...]:
    """A list of two-string lists (null: none); the error names the entry at fault."""
    pairs = []
    for k, entry in enumerate(values or []):
        if not isinstance(entry, (list, tuple)) or len(entry) != 2 or not all(isinstance(s, str) for s in entry):
            raise ValueError(f"parameter {where}[{k}]={entry!r}: expected {expected}")
        pairs.append((entry[0], entry[1]))
    return tuple(pairs)


def corpus_settings(values: Mapping[str, Any] | None) -> CorpusSettings:
    where = "afn.corpus"
    values = block(values, where, CORPUS_KEYS)
    min_words, max_words = _word_range(values, where)
    return CorpusSettings(positive_int(values["n_phrases"], f"{where}.n_phrases"), min_words, max_words,
                          _splits(values["splits"], where),
                          _file(values["user_sentences_file"], f"{where}.user_sentences_file"))


def pair_settings(values: Mapping[str, Any] | None) -> PairSettings:
    where = "afn.pairs"
    values = block(values, where, PAIR_KEYS)
    min_words, max_words = _word_range(values, where)
    prefixes = _text_pairs(values["prompt_prefixes"], f"{where}.prompt_prefixes", "two non-empty prefixes")
    for k, prefix_pair in enumerate(prefixes):
        if not all(treebank_words(s) for s in prefix_pair):
            raise ValueError(f"parameter {where}.prompt_prefixes[{k}]={list(prefix_pair)!r}: expected two non-empty "
                             "prefixes")
    return PairSettings(
        positive_int(values["n_context_pairs"], f"{where}.n_context_pairs", minimum=0), min_words, max_words,
        _splits(values["splits"], where),
        _text_pairs(values["example_pairs"], f"{where}.example_pairs", "[sentence_a, sentence_b]"),
        _file(values["user_pairs_file"], f"{where}.user_pairs_file"), prefixes,
        positive_int(values["n_prompt_sentences"], f"{where}.n_prompt_sentences", minimum=0))


def _percentile(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value <= 100:
        raise ValueError(f"parameter afn.percentile={value!r}: must lie in 0..100")
    return value


def afn_settings(params: Mapping[str, Any]) -> AfnSettings:
    """The run's parameters (`afn`, `encoder`, `max_length`, `seed`) as `AfnSettings`. A leftover
    `afn.mlflow.tracking_uri` is refused first, in one line naming the fix."""
    afn = params.get("afn")
    refuse_own_tracking_uri((afn or {}).get("mlflow") if isinstance(afn, Mapping) else None)
    values = block(afn, "afn", AFN_KEYS)
    block(values["mlflow"], "afn.mlflow", MLFLOW_KEYS)
    plots = block(values["plots"], "afn.plots", ("n_heatmap_pairs",))
    layer = values["layer"]
    if layer is not None and (isinstance(layer, bool) or not isinstance(layer, int) or layer < 1):
        raise ValueError(f"parameter afn.layer={layer!r}: must be null or an encoder block from 1 (0 is the "
                         "embedding output)")
    seed = params.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"parameter seed={seed!r}: must be an integer")
    return AfnSettings(
        layer=layer, percentile=_percentile(values["percentile"]),
        batch_size=positive_int(values["batch_size"], "afn.batch_size"),
        num_threads=positive_int(values["num_threads"], "afn.num_threads", none=True),
        corpus=corpus_settings(values["corpus"]), pairs=pair_settings(values["pairs"]),
        plots=PlotSettings(positive_int(plots["n_heatmap_pairs"], "afn.plots.n_heatmap_pairs", minimum=0)),
        encoder=encoder_name(params.get("encoder")),
        max_length=positive_int(params.get("max_length"), "max_length"), seed=seed)


def check_user_file(raw: RawText | None, configured: str | None, parameter: str, entry: str) -> None:
    """A user file named in the parameters must be the one the catalog entry opened: the entry reads the path from
    the run's `--params`, so a path written into a parameters file would otherwise be left out unread."""
    if configured is not None and (raw is None or Path(raw.path) != Path(configured)):
        opened = "no file" if raw is None else repr(raw.path)
        raise ValueError(f"parameter {parameter}={configured!r} is not the file the catalog entry {entry} opened "
                         f"({opened}): give the path with `kedro run --params {parameter}=PATH`")


def afn_tracking(afn: Mapping[str, Any] | None) -> tuple[str, str | None]:
    """`afn.mlflow`: the AFN run's experiment (default: afn) and artifact location (None: the store's default), as
    the MLflow hook reads them when it opens the run, before the pipeline's first node parses the whole block (which
    refuses a leftover `afn.mlflow.tracking_uri`: the run it opened is then closed as failed)."""
    afn = afn if isinstance(afn, Mapping) else {}
    mlflow = block(afn.get("mlflow") or {}, "afn.mlflow", (), (*MLFLOW_KEYS, "tracking_uri"))
    return str(mlflow.get("experiment") or "afn"), mlflow.get("artifact_location")
