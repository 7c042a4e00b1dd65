# SPDX-License-Identifier: Apache-2.0
"""Parquet in (the DATAMASK script's layout), the same selection as from numpy."""

import numpy as np
import pytest

import datamask

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install pyarrow)")
pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow.parquet is not installed")


def corpus(n=1500, d=12):
    rng = np.random.default_rng(4)
    return rng.standard_normal((n, d)).astype(np.float32), rng.random(n), rng.permutation(n).astype(np.int64) * 7


@pytest.mark.parametrize("layout", ["fixed_size_list", "list", "list_float64"])
def test_parquet_round_trip(tmp_path, layout):
    x, q, ids = corpus()
    values = x.astype(np.float64) if layout == "list_float64" else x
    flat = pa.array(values.reshape(-1))
    if layout == "fixed_size_list":
        emb = pa.FixedSizeListArray.from_arrays(flat, x.shape[1])
    else:
        offsets = pa.array(np.arange(0, x.size + 1, x.shape[1], dtype=np.int32))
        emb = pa.ListArray.from_arrays(offsets, flat)
    table = pa.table({"chunk_id": ids, "quality_score": q, "feature_arr": emb})
    path = tmp_path / "corpus.parquet"
    pq.write_table(table, path, row_group_size=500)

    c = datamask.read_parquet(str(path))
    assert sum(len(e) for e in c.embeddings) == len(x)
    assert all(e.flags.c_contiguous for e in c.embeddings)
    np.testing.assert_array_equal(np.concatenate(c.embeddings), values)
    np.testing.assert_array_equal(c.ids, ids)

    got = datamask.select(c.embeddings, c.quality, ids=c.ids, ratio=0.1, seed=9)
    want = datamask.select(x, q, ids=ids, ratio=0.1, seed=9)
    np.testing.assert_array_equal(got.ids, want.ids)


@pytest.mark.parametrize("layout", ["fixed_size_list", "list"])
def test_float32_lists_are_views_of_arrows_buffer(layout):
    x, _, _ = corpus(n=40, d=6)
    flat = pa.array(x.reshape(-1))
    if layout == "fixed_size_list":
        chunk = pa.FixedSizeListArray.from_arrays(flat, x.shape[1])
    else:
        chunk = pa.ListArray.from_arrays(pa.array(np.arange(0, x.size + 1, x.shape[1], dtype=np.int32)), flat)
    chunk = chunk.slice(10)  # an offset into the values too
    e = datamask._parquet._embedding_chunk(chunk, "feature_arr")
    values = chunk.flatten()
    assert e.dtype == np.float32 and e.shape == (30, 6)
    assert e.ctypes.data == values.buffers()[1].address + 4 * values.offset
    np.testing.assert_array_equal(e, x[10:])


def test_parquet_rows_of_different_lengths_are_refused(tmp_path):
    table = pa.table({"chunk_id": [1, 2], "quality_score": [0.1, 0.2],
                      "feature_arr": pa.array([[1.0, 2.0], [3.0]], type=pa.list_(pa.float32()))})
    pq.write_table(table, tmp_path / "bad.parquet")
    with pytest.raises(datamask.InvalidInput, match="feature_arr: rows have different lengths"):
        datamask.read_parquet(str(tmp_path / "bad.parquet"))


@pytest.mark.parametrize("keyword", ["embedding_column", "quality_columns", "id_column"])
def test_a_missing_column_is_named_with_the_columns_there(tmp_path, keyword):
    table = pa.table({"chunk_id": [1, 2], "quality_score": [0.1, 0.2],
                      "feature_arr": pa.array([[1.0, 2.0], [3.0, 4.0]], type=pa.list_(pa.float32()))})
    path = tmp_path / "c.parquet"
    pq.write_table(table, path)
    message = f"{keyword}: no column 'nope' in {path}; its columns: chunk_id, quality_score, feature_arr"
    with pytest.raises(datamask.InvalidInput) as e:
        datamask.read_parquet(str(path), **{keyword: "nope"})
    assert str(e.value) == message


def test_a_folder_of_parquet_files_is_read_as_one(tmp_path):
    # As pyarrow's read_table reads it: the files in name order.
    for i in range(2):
        table = pa.table({"chunk_id": [2 * i, 2 * i + 1], "quality_score": [0.1 * i, 0.2],
                          "feature_arr": pa.array([[1.0, 2.0], [3.0, 4.0]], type=pa.list_(pa.float32()))})
        pq.write_table(table, tmp_path / f"part-{i}.parquet")
    c = datamask.read_parquet(str(tmp_path), embedding_column="feature_arr", quality_columns="quality_score",
                              id_column="chunk_id")
    assert sorted(c.ids.tolist()) == [0, 1, 2, 3]
    with pytest.raises(datamask.InvalidInput, match="no column 'nope'"):
        datamask.read_parquet(str(tmp_path), embedding_column="nope")


def shards(tmp_path, n=3000, files=3):
    """`files` Parquet files of a corpus with text, uint64 ids, scores and embeddings."""
    rng = np.random.default_rng(8)
    x, q = rng.standard_normal((n, 6)).astype(np.float32), rng.random(n)
    ids = (np.uint64(1) << np.uint64(63)) + rng.permutation(n).astype(np.uint64) * np.uint64(3)
    folder = tmp_path / "in"
    folder.mkdir()
    per = n // files
    for f in range(files):
        lo, hi = f * per, (f + 1) * per
        table = pa.table({"chunk_id": ids[lo:hi], "text": [f"doc {i}" for i in range(lo, hi)], "quality_score": q[lo:hi],
                          "feature_arr": pa.FixedSizeListArray.from_arrays(pa.array(x[lo:hi].reshape(-1)), 6)})
        pq.write_table(table, folder / f"part-{f}.parquet", row_group_size=400)
    return folder, x, q, ids


def test_filter_parquet_writes_the_selected_documents(tmp_path):
    folder, x, q, ids = shards(tmp_path)
    sel = datamask.select(x, q, ids=ids, ratio=0.1, seed=2)
    written = datamask.filter_parquet(folder, sel, tmp_path / "out", batch_rows=256)
    assert [p.rsplit("/", 1)[1] for p in written] == ["part-0.parquet", "part-1.parquet", "part-2.parquet"]
    got = pq.read_table(tmp_path / "out")
    assert got.schema == pq.read_table(folder).schema  # every column kept
    want = np.isin(ids, sel.ids)  # the rows, in input order
    np.testing.assert_array_equal(got.column("chunk_id").to_numpy(), ids[want])
    assert got.column("text").to_pylist() == [f"doc {i}" for i in np.flatnonzero(want)]
    np.testing.assert_array_equal(np.stack(got.column("feature_arr").to_numpy(zero_copy_only=False)), x[want])


def test_filter_parquet_refuses_what_it_cannot_match(tmp_path):
    folder, x, q, ids = shards(tmp_path)
    out = tmp_path / "out"
    stranger = np.append(ids[:10], np.uint64(5))  # an id in no input
    with pytest.raises(datamask.InvalidInput, match="11 ids selected, but 10 rows"):
        datamask.filter_parquet(folder, stranger, out)
    assert list(out.iterdir()) == []  # nothing left
    with pytest.raises(datamask.InvalidInput, match="id_column: no column 'idx'"):
        datamask.filter_parquet(folder, ids[:10], out, id_column="idx")
    with pytest.raises(datamask.InvalidInput, match="is an input"):
        datamask.filter_parquet(folder, ids[:10], folder)
    signed = ids[:10].astype(np.int64)  # the same bits as int64: other ids (negative), found nowhere
    with pytest.raises(datamask.InvalidInput, match="10 ids selected, but 0 rows"):
        datamask.filter_parquet(folder, signed, out)
