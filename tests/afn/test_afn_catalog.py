"""The afn catalog: the user files read from the run's `--params` by `OptionalRawTextDataset`, every dataset of the
pipeline declared (but the parsed settings, in memory), its outputs under `afn_data_root`."""
from pathlib import Path

import pytest
from kedro.config import OmegaConfigLoader
from kedro.io import DataCatalog, DatasetError

from learned_attribution.adapters.kedro_datasets import OptionalRawTextDataset
from learned_attribution.core.data.schema import RawText
from learned_attribution.pipelines.afn.pipeline import create_pipeline
from learned_attribution.settings import CONFIG_LOADER_ARGS

PROJECT = Path(__file__).resolve().parents[2]


def _catalog_config(runtime_params: dict) -> dict:
    loader = OmegaConfigLoader(str(PROJECT / "conf"), runtime_params=runtime_params,
                               **{**CONFIG_LOADER_ARGS, "default_run_env": "smoke"})
    return {name: entry for name, entry in loader["catalog"].items() if name.startswith("afn.")}


def test_an_unset_user_file_loads_none_and_is_not_a_raw_input():
    dataset = OptionalRawTextDataset(None, parameter="afn.corpus.user_sentences_file")
    assert dataset.load() is None and dataset.exists() and not dataset.is_raw_input and dataset.path is None


def test_a_user_file_loads_with_its_path_and_a_missing_one_names_the_parameter(tmp_path):
    file = tmp_path / "sentences.txt"
    file.write_text("a day at the park .\n", encoding="utf-8")
    dataset = OptionalRawTextDataset(str(file), parameter="afn.corpus.user_sentences_file")
    assert dataset.load() == RawText(str(file), "a day at the park .\n")
    assert dataset.is_raw_input and dataset.path == file  # hashed into the MLflow run's inputs
    missing = OptionalRawTextDataset(str(tmp_path / "missing.txt"), parameter="afn.corpus.user_sentences_file")
    with pytest.raises(DatasetError, match=r"^parameter afn.corpus.user_sentences_file='.*missing.txt': no such file \(working directory "):
        missing.load()
    with pytest.raises(DatasetError, match="read-only"):
        dataset.save(RawText("x", ""))


def test_the_catalog_reads_the_user_files_from_the_run_parameters(tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("a day\ta walk\n", encoding="utf-8")
    # kedro run --params "afn.pairs.user_pairs_file=<pairs>" arrives as nested runtime parameters
    config = _catalog_config({"afn": {"pairs": {"user_pairs_file": str(pairs)}}})
    assert config["afn.user_pairs"]["filepath"] == str(pairs) and config["afn.user_sentences"]["filepath"] is None
    catalog = DataCatalog.from_config(config)
    assert catalog.load("afn.user_pairs") == RawText(str(pairs), "a day\ta walk\n")
    assert catalog.load("afn.user_sentences") is None


def test_every_dataset_of_the_pipeline_is_declared_under_afn_data_root():
    config = _catalog_config({"afn_data_root": "/tmp/afn_root"})
    datasets = create_pipeline().datasets() - {"raw_sst2_trees_train", "raw_sst2_trees_dev", "raw_sst2_trees_test"}
    datasets = {name for name in datasets if not name.startswith("params:")}
    assert datasets - set(config) == {"afn.settings", "afn.compute_settings"}  # in memory
    assert set(config) - datasets == set()
    outputs = {name: entry["filepath"] for name, entry in config.items() if name not in ("afn.user_sentences",
                                                                                         "afn.user_pairs")}
    assert all(path.startswith("/tmp/afn_root/") for path in outputs.values())
    assert outputs["afn.report"] == "/tmp/afn_root/08_reporting/afn_report.md"
    assert outputs["afn.headline"] == "/tmp/afn_root/08_reporting/afn/headline.json"
    assert outputs["afn.token_strengths"] == "/tmp/afn_root/07_model_output/afn_token_strengths.parquet"
