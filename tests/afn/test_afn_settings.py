"""`afn_settings`: conf/base and conf/smoke parsed into `AfnSettings`, and the one-line errors naming the parameter."""
from pathlib import Path

import pytest
import yaml

from learned_attribution.core.data.schema import RawText
from learned_attribution.services.config import (AfnSettings, CorpusSettings, PairSettings, PlotSettings,
                                                       afn_settings, check_user_file)

PROJECT = Path(__file__).resolve().parents[2]


def test_conf_base_parses_to_the_documented_defaults(make_settings):
    settings = make_settings()
    assert settings == AfnSettings(
        layer=None, percentile=75, batch_size=32, num_threads=None,
        corpus=CorpusSettings(n_phrases=732, min_words=4, max_words=12, splits=("train", "dev", "test"),
                              user_sentences_file=None),
        pairs=PairSettings(n_context_pairs=200, min_words=4, max_words=12, splits=("train", "dev", "test"),
                           example_pairs=(("a day at the park", "a walk at the beach"),
                                          ("the prime minister of Canada gave a beautiful speech",
                                           "the prime minister of Canada gave a boring speech")),
                           user_pairs_file=None, prompt_prefixes=(("summarize:", "translate:"),),
                           n_prompt_sentences=200),
        plots=PlotSettings(n_heatmap_pairs=4), encoder="packaged:all-MiniLM-L6-v2", max_length=128, seed=13)
    assert isinstance(settings.percentile, int)  # as written: the report prints "75"


def test_the_smoke_environment_overrides_the_slices(afn_params):
    smoke = yaml.safe_load((PROJECT / "conf/smoke/parameters_afn.yml").read_text())["afn"]
    params = afn_params(smoke["corpus"], smoke["pairs"], num_threads=smoke["num_threads"], plots=smoke["plots"])
    settings = afn_settings(params)
    assert (settings.corpus.n_phrases, settings.corpus.splits) == (40, ("dev",))
    assert (settings.pairs.n_context_pairs, settings.pairs.splits, settings.pairs.n_prompt_sentences) == \
        (12, ("dev", "test"), 10)
    assert settings.pairs.example_pairs == (("a day at the park", "a walk at the beach"),)
    assert settings.num_threads == 1 and settings.plots.n_heatmap_pairs == 3


def test_splits_keep_the_data_order(make_settings):
    assert make_settings(corpus={"splits": ["test", "train"]}).corpus.splits == ("train", "test")
    with pytest.raises(ValueError, match=r"^parameter afn.corpus.splits=\['validation'\]: choose from"):
        make_settings(corpus={"splits": ["validation"]})
    with pytest.raises(ValueError, match=r"^parameter afn.pairs.splits=\[\]"):
        make_settings(pairs={"splits": []})


def test_a_leftover_own_tracking_uri_is_refused_first_in_one_line(afn_params):
    params = afn_params(mlflow={"experiment": "afn", "artifact_location": None, "tracking_uri": "sqlite:///o.db"},
                        percentile="not even read")
    with pytest.raises(ValueError, match=r"^parameter afn.mlflow.tracking_uri=sqlite:///o.db is not read: every "
                                         r"pipeline logs to mlflow.tracking_uri \(conf/base/parameters.yml\); move "
                                         r"the value there and delete this key$"):
        afn_settings(params)


@pytest.mark.parametrize("overrides, message", [
    ({"colour": "red"}, r"unknown parameter\(s\) afn.colour;"),
    ({"corpus": {"n_phrase": 3}}, r"unknown parameter\(s\) afn.corpus.n_phrase;"),
    ({"plots": {}}, r"parameter\(s\) afn.plots.n_heatmap_pairs missing"),
    ({"mlflow": {"experiment": "afn"}}, r"parameter\(s\) afn.mlflow.artifact_location missing"),
    ({"corpus": {"n_phrases": 0}}, r"^parameter afn.corpus.n_phrases=0: must be an integer of at least 1"),
    ({"corpus": {"min_words": 5, "max_words": 4}}, r"^parameters afn.corpus.min_words=5 / max_words=4"),
    ({"pairs": {"n_context_pairs": -1}}, r"^parameter afn.pairs.n_context_pairs=-1"),
    ({"pairs": {"example_pairs": [["only one"]]}},
     r"^parameter afn.pairs.example_pairs\[0\]=\['only one'\]: expected \[sentence_a, sentence_b\]"),
    ({"pairs": {"prompt_prefixes": [["summarize:", " "]]}},
     r"^parameter afn.pairs.prompt_prefixes\[0\]=\['summarize:', ' '\]: expected two non-empty prefixes"),
    ({"percentile": 101}, r"^parameter afn.percentile=101: must lie in 0..100"),
    ({"layer": 0}, r"^parameter afn.layer=0: must be null or an encoder block"),
    ({"layer": "4"}, r"^parameter afn.layer='4': must be null or an encoder block"),
    ({"layer": True}, r"^parameter afn.layer=True: must be null or an encoder block"),
    ({"batch_size": 0}, r"^parameter afn.batch_size=0"),
    ({"num_threads": True}, r"^parameter afn.num_threads=True"),
    ({"num_threads": 0}, r"^parameter afn.num_threads=0"),
    ({"max_length": "long"}, r"^parameter max_length='long'"),
])
def test_bad_values_name_the_parameter(afn_params, overrides, message):
    corpus, pairs = overrides.pop("corpus", None), overrides.pop("pairs", None)
    params = afn_params(corpus, pairs, **overrides)
    with pytest.raises(ValueError, match=message) as error:
        afn_settings(params)
    assert "\n" not in str(error.value)


def test_a_user_file_must_be_the_one_the_catalog_opened():
    raw = RawText("data/my.txt", "a day\n")
    check_user_file(raw, "./data/my.txt", "afn.corpus.user_sentences_file", "afn.user_sentences")  # same file
    check_user_file(raw, None, "afn.corpus.user_sentences_file", "afn.user_sentences")  # the catalog's own path
    check_user_file(None, None, "afn.corpus.user_sentences_file", "afn.user_sentences")
    with pytest.raises(ValueError, match=r"^parameter afn.pairs.user_pairs_file='p.tsv' is not the file the catalog "
                                         r"entry afn.user_pairs opened \(no file\): give the path with `kedro run "
                                         r"--params afn.pairs.user_pairs_file=PATH`$"):
        check_user_file(None, "p.tsv", "afn.pairs.user_pairs_file", "afn.user_pairs")
