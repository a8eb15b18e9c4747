"""Complete-or-absent catalog datasets: a failed write leaves the previous output (or none), never a part,
and Kedro still sees their plain configuration."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from kedro.io import DatasetError  # noqa: E402

from learned_attribution.core.atomic import atomic_file  # noqa: E402
from learned_attribution.adapters.kedro_datasets import (AtomicCSVDataset, AtomicMatplotlibDataset,  # noqa: E402
                                          AtomicParquetDataset, AtomicPartitionedDataset, AtomicTextDataset,
                                          UnlabeledTextsDataset)


def test_files_are_replaced_whole_and_leave_no_temporary_file(tmp_path):
    for dataset, data in ((AtomicParquetDataset(filepath=str(tmp_path / "t.parquet")), pd.DataFrame({"a": [1]})),
                          (AtomicCSVDataset(filepath=str(tmp_path / "t.csv")), pd.DataFrame({"a": [2]})),
                          (AtomicTextDataset(filepath=str(tmp_path / "t.md")), "# hi"),
                          (AtomicMatplotlibDataset(filepath=str(tmp_path / "t.png")), plt.figure())):
        dataset.save(data)
        assert dataset.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv", "t.md", "t.parquet", "t.png"]
    assert AtomicParquetDataset(filepath=str(tmp_path / "t.parquet")).load()["a"].tolist() == [1]


def test_a_failed_file_write_keeps_the_previous_file_and_no_temporary_one(tmp_path):
    dataset = AtomicCSVDataset(filepath=str(tmp_path / "t.csv"))
    dataset.save(pd.DataFrame({"a": [1]}))
    with pytest.raises(DatasetError, match="has no attribute 'to_csv'"):
        dataset.save(12)
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"] and dataset.load()["a"].tolist() == [1]
    with pytest.raises(RuntimeError, match="killed"), atomic_file(tmp_path / "t.csv") as partial:
        partial.write_text("a\n9\n")
        raise RuntimeError("killed")  # interrupted after the temporary file was written, before the rename
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"] and dataset.load()["a"].tolist() == [1]


def test_unlabeled_texts_are_read_with_their_ids_and_never_written(tmp_path):
    path = tmp_path / "texts.jsonl"
    path.write_text('{"id": "a", "text": "a fine film"}\n{"words": ["two", "words"]}\n')
    dataset = UnlabeledTextsDataset(filepath=str(path))
    texts = dataset.load()
    assert texts["example_id"].tolist() == ["a", "2"] and texts["text"].tolist() == ["a fine film", ["two", "words"]]
    with pytest.raises(DatasetError, match="read-only"):
        dataset.save(texts)
    path.write_text('{"id": "a"}\n')
    with pytest.raises(DatasetError, match=r"texts.jsonl line 1: expected an object with a 'text'"):
        dataset.load()


def test_a_failed_partitioned_write_is_absent_not_partial(tmp_path):
    folder = tmp_path / "parts"
    dataset = AtomicPartitionedDataset(path=str(folder), dataset="pandas.ParquetDataset", filename_suffix=".parquet",
                                       overwrite=True)

    def crash():
        raise RuntimeError("killed")

    with pytest.raises(DatasetError, match="killed"):
        dataset.save({"part-0": pd.DataFrame({"a": [1]}), "part-1": crash})
    assert not folder.exists() and not dataset.exists()  # part-0 was written, but only under parts.partial/
    dataset.save({"part-0": pd.DataFrame({"a": [1]}), "part-1": lambda: pd.DataFrame({"a": [2]})})
    assert dataset.exists() and sorted(p.name for p in folder.iterdir()) == ["part-0.parquet", "part-1.parquet"]
    with pytest.raises(DatasetError, match="killed"):
        dataset.save({"part-0": pd.DataFrame({"a": [9]}), "part-1": crash})
    loaded = pd.concat([load() for _, load in sorted(dataset.load().items())])
    assert loaded["a"].tolist() == [1, 2]  # the complete earlier output, untouched


def test_kedro_sees_the_plain_configuration(tmp_path):
    dataset = AtomicParquetDataset(filepath=str(tmp_path / "t.parquet"), save_args={"index": False})
    assert dataset._init_config() == {"type": "learned_attribution.adapters.kedro_datasets.AtomicParquetDataset",
                                      "filepath": str(tmp_path / "t.parquet"), "save_args": {"index": False}}
