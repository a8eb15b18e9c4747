"""Complete-or-absent catalog datasets: a failed write leaves the previous output (or none), never a part,
and Kedro still sees their plain configuration."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from learned_attribution.datasets import (AtomicCSVDataset, AtomicMatplotlibDataset,  # noqa: E402
                                          AtomicParquetDataset, AtomicPartitionedDataset, AtomicTextDataset)


def test_files_are_replaced_whole_and_leave_no_temporary_file(tmp_path):
    for dataset, data in ((AtomicParquetDataset(filepath=str(tmp_path / "t.parquet")), pd.DataFrame({"a": [1]})),
                          (AtomicCSVDataset(filepath=str(tmp_path / "t.csv")), pd.DataFrame({"a": [2]})),
                          (AtomicTextDataset(filepath=str(tmp_path / "t.md")), "# hi"),
                          (AtomicMatplotlibDataset(filepath=str(tmp_path / "t.png")), plt.figure())):
        dataset.save(data)
        assert dataset.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv", "t.md", "t.parquet", "t.png"]
    assert AtomicParquetDataset(filepath=str(tmp_path / "t.parquet")).load()["a"].tolist() == [1]


def test_a_failed_partitioned_write_is_absent_not_partial(tmp_path):
    folder = tmp_path / "parts"
    dataset = AtomicPartitionedDataset(path=str(folder), dataset="pandas.ParquetDataset", filename_suffix=".parquet",
                                       overwrite=True)

    def crash():
        raise RuntimeError("killed")

    with pytest.raises(Exception, match="killed"):
        dataset.save({"part-0": pd.DataFrame({"a": [1]}), "part-1": crash})
    assert not folder.exists() and not dataset.exists()  # part-0 was written, but only under parts.partial/
    dataset.save({"part-0": pd.DataFrame({"a": [1]}), "part-1": lambda: pd.DataFrame({"a": [2]})})
    assert dataset.exists() and sorted(p.name for p in folder.iterdir()) == ["part-0.parquet", "part-1.parquet"]
    with pytest.raises(Exception, match="killed"):
        dataset.save({"part-0": pd.DataFrame({"a": [9]}), "part-1": crash})
    loaded = pd.concat([load() for _, load in sorted(dataset.load().items())])
    assert loaded["a"].tolist() == [1, 2]  # the complete earlier output, untouched


def test_kedro_sees_the_plain_configuration(tmp_path):
    dataset = AtomicParquetDataset(filepath=str(tmp_path / "t.parquet"), save_args={"index": False})
    assert dataset._init_config() == {"type": "learned_attribution.datasets.AtomicParquetDataset",
                                      "filepath": str(tmp_path / "t.parquet"), "save_args": {"index": False}}
