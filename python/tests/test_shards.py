# SPDX-License-Identifier: Apache-2.0
"""A corpus kept as shards, each with its own scores and ids (``datamask.Shards``, and Parquet
files through ``datamask.parquet_shards``): the same selection as the shards concatenated, and a
worker that loads the shards of its own groups only."""
import os

import numpy as np
import pytest

import datamask

SIZES = (900, 600, 700, 800)  # groups at block_size 1000: {900, 600}, {700, 800}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shards")
    rng = np.random.default_rng(5)
    parts = []
    for i, rows in enumerate(SIZES):
        x = rng.standard_normal((rows, 10)).astype(np.float32)
        q = rng.random(rows)
        # int64 ids beyond float64's exact integers, distinct across shards
        ids = (1 << 61) + rng.choice(10**12, rows, replace=False).astype(np.int64) + i * 10**12
        names = [str(folder / f"{i}.{kind}.npy") for kind in ("embeddings", "quality", "ids")]
        for name, a in zip(names, (x, q, ids)):
            np.save(name, a)
        parts.append(names)
    return parts


def whole(parts):
    return [np.concatenate([np.load(p[k]) for p in parts]) for k in range(3)]


ARGS = dict(block_size=1000, ratio=0.1, optimizer="continuous", iterations=20, seed=2)


def test_shards_select_what_the_concatenation_selects(corpus):
    x, q, ids = whole(corpus)
    shards = datamask.Shards(*[[p[k] for p in corpus] for k in range(3)])
    want = datamask.select([np.load(p[0]) for p in corpus], q, ids=ids, **ARGS)
    got = datamask.select(shards, **ARGS)
    np.testing.assert_array_equal(got.ids, want.ids)
    plan = datamask.plan(shards, **ARGS)
    for world in (3, 6):  # 4 blocks: two of 6 workers run none
        workers = [datamask.select(shards, worker=(r, world), plan=plan, **ARGS) for r in range(world)]
        assert {w.ids.dtype for w in workers} == {np.dtype(np.int64)}  # the ids' type, blocks or none
        np.testing.assert_array_equal(np.concatenate([w.ids for w in workers]), want.ids)
    # evaluate takes shards too
    f = datamask.evaluate(shards, None, want.ids[:50], lam=0.5)
    assert f == datamask.evaluate(x, q, want.ids[:50], corpus_ids=ids, lam=0.5)


def test_a_worker_of_shards_reads_no_other_shard(corpus, tmp_path):
    """The other group's scores and ids name files that do not exist: a worker never opens them."""
    shards = datamask.Shards(*[[p[k] for p in corpus] for k in range(3)])
    plan = datamask.plan(shards, **ARGS)
    missing = str(tmp_path / "missing.npy")
    for rank, gone in ((0, (2, 3)), (1, (0, 1))):
        broken = datamask.Shards(shards.embeddings, [missing if i in gone else q for i, q in enumerate(shards.quality)],
                                 [missing if i in gone else v for i, v in enumerate(shards.ids)])
        got = datamask.select(broken, worker=(rank, 2), plan=plan, **ARGS)
        np.testing.assert_array_equal(got.ids, datamask.select(shards, worker=(rank, 2), plan=plan, **ARGS).ids)
    with pytest.raises(FileNotFoundError):  # the whole corpus reads them
        datamask.select(broken, **ARGS)


def test_the_plan_reads_no_embeddings_it_does_not_need(corpus, tmp_path):
    """A NaN outside what the plan reads (quality only: no calibration sample) is the worker's to
    find, naming its shard; the plan does not scan every embedding."""
    emb, q, ids = ([p[k] for p in corpus] for k in range(3))
    x = np.load(emb[3])
    x[5, 2] = np.nan
    emb[3] = str(tmp_path / "nan.npy")
    np.save(emb[3], x)
    shards = datamask.Shards(emb, q, ids)
    args = dict(block_size=1000, ratio=0.1, lam=1.0, prune=0.2)
    plan = datamask.plan(shards, **args)
    assert plan.prune_threshold is not None
    datamask.select(shards, worker=(0, 2), plan=plan, **args)
    with pytest.raises(datamask.InvalidInput, match=r"shard 3 \(.*nan.npy\): row 5, column 2 is NaN"):
        datamask.select(shards, worker=(1, 2), plan=plan, **args)


def test_bad_shards_are_named(corpus):
    emb, q, ids = ([p[k] for p in corpus] for k in range(3))
    with pytest.raises(datamask.InvalidInput, match="Shards.quality: 3 entries for 4"):
        datamask.Shards(emb, q[:3])
    with pytest.raises(datamask.InvalidInput, match="quality: give it in the shards"):
        datamask.select(datamask.Shards(emb), np.zeros(3000), **ARGS)
    short = [np.load(q[0]), np.load(q[1])[:-1], np.load(q[2]), np.load(q[3])]
    with pytest.raises(datamask.InvalidInput, match=r"shard 1 \(.*1.embeddings.npy\): quality column 0 has 599 scores for 600"):
        datamask.select(datamask.Shards(emb, short, ids), **ARGS)
    twice = [np.load(ids[0])] * 4
    with pytest.raises(datamask.InvalidInput, match="ids"):
        datamask.select(datamask.Shards(emb, q, twice), **ARGS)


def test_a_shard_given_by_its_shape_is_never_read(corpus):
    """The binding refuses a shape-only shard that a call would read (every row held)."""
    x, q, ids = whole(corpus)
    request = datamask._call(x, q, None, None, "ids", dict(ratio=0.1), "pairwise", None, None, 0, None)[1]
    shards = [(900, 10), np.load(corpus[1][0]), np.load(corpus[2][0]), np.load(corpus[3][0])]
    with pytest.raises(datamask.InvalidInput, match=r"embeddings\[0\]: was given as its shape alone"):
        datamask._core.select((shards, [np.ascontiguousarray(q)], [], None, []), request, 1000, False, None, None,
                              (0, 1, 0, -1), None)


pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install pyarrow)")
pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow.parquet is not installed")


@pytest.fixture(scope="module")
def parquet(corpus, tmp_path_factory):
    folder = tmp_path_factory.mktemp("parquet")
    for i, (e, q, ids) in enumerate(corpus):
        x = np.load(e)
        table = pa.table({"chunk_id": np.load(ids), "quality_score": np.load(q),
                          "feature_arr": pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), x.shape[1]),
                          "text": [f"document {j}" for j in range(len(x))]})
        pq.write_table(table, folder / f"part-{i}.parquet", row_group_size=256)
    return folder


def test_parquet_shards_select_what_npy_shards_select(corpus, parquet, monkeypatch):
    shards = datamask.Shards(*[[p[k] for p in corpus] for k in range(3)])
    files = datamask.parquet_shards(parquet)
    assert [r for r, _ in map(files._rows, range(4))] == list(SIZES)
    want = datamask.select(shards, **ARGS)
    np.testing.assert_array_equal(datamask.select(files, **ARGS).ids, want.ids)
    plan = datamask.plan(files, **ARGS)
    loaded = []
    original = datamask.ParquetShards._embeddings
    monkeypatch.setattr(datamask.ParquetShards, "_embeddings", lambda self, i: loaded.append(i) or original(self, i))
    got = []
    for rank in range(2):
        loaded.clear()
        got.append(datamask.select(files, worker=(rank, 2), plan=plan, **ARGS))
        assert loaded == ([0, 1] if rank == 0 else [2, 3])  # its group's files only
    np.testing.assert_array_equal(np.concatenate([g.ids for g in got]), want.ids)


def test_parquet_shards_name_a_missing_column(parquet):
    with pytest.raises(datamask.InvalidInput, match=r"quality_columns: no column 'score' in .*part-0.parquet"):
        datamask.select(datamask.parquet_shards(parquet, quality_columns="score"), **ARGS)


def test_parquet_shards_without_scores_or_with_an_empty_file(parquet, tmp_path):
    files = sorted(parquet.glob("*.parquet"))
    diverse = datamask.select(datamask.parquet_shards(files, quality_columns=None), lam=0.0, **ARGS)
    assert len(diverse.ids) == round(0.1 * sum(SIZES))
    empty = tmp_path / "empty.parquet"
    pq.write_table(pq.read_table(files[0]).slice(0, 0), empty)
    with pytest.raises(datamask.InvalidInput, match=r"empty.parquet: no rows"):
        datamask.select(datamask.parquet_shards(files + [empty]), **ARGS)


def test_parquet_to_shards_selects_what_parquet_selects(parquet, tmp_path):
    """Converted by two tasks, a batch at a time: the same corpus, the same selection, and the plan
    of the .npy shards memory-maps them."""
    files = datamask.parquet_shards(parquet)
    names = [datamask.parquet_to_shards(parquet, tmp_path / "npy", worker=(r, 2), batch_rows=100) for r in range(2)]
    assert [len(n) for n in names] == [2, 2]  # files 0, 2 and 1, 3
    assert sorted(f"{n}.embeddings.npy" for n in names[0] + names[1]) == sorted(
        f for f in os.listdir(tmp_path / "npy") if f.endswith(".embeddings.npy"))
    shards = datamask.shards_in(tmp_path / "npy")
    assert [np.load(e, mmap_mode="r").shape for e in shards.embeddings] == [(n, 10) for n in SIZES]
    np.testing.assert_array_equal(datamask.select(shards, **ARGS).ids, datamask.select(files, **ARGS).ids)
    assert np.load(shards.ids[0]).dtype == np.int64


def test_parquet_embeddings_one_column_per_dimension(corpus, parquet, tmp_path):
    """Embeddings stored as d float columns select what the list column selects, in place, read
    whole and converted."""
    folder = tmp_path / "wide"
    folder.mkdir()
    for f in sorted(parquet.glob("*.parquet")):
        t = pq.read_table(f)
        x = np.stack(t.column("feature_arr").to_numpy(zero_copy_only=False))
        wide = {f"e{j}": x[:, j] for j in range(x.shape[1])}
        pq.write_table(pa.table({"chunk_id": t.column("chunk_id"), "quality_score": t.column("quality_score"), **wide}),
                       folder / f.name, row_group_size=256)
    dims = [f"e{j}" for j in range(10)]
    want = datamask.select(datamask.parquet_shards(parquet), **ARGS).ids
    np.testing.assert_array_equal(datamask.select(datamask.parquet_shards(folder, embedding_column=dims), **ARGS).ids, want)
    one = datamask.read_parquet(str(folder / "part-0.parquet"), embedding_column=dims)
    np.testing.assert_array_equal(one.embeddings[0], np.load(corpus[0][0]))
    datamask.parquet_to_shards(folder, tmp_path / "npy", embedding_column=dims, batch_rows=100)
    np.testing.assert_array_equal(datamask.select(datamask.shards_in(tmp_path / "npy"), **ARGS).ids, want)
    with pytest.raises(datamask.InvalidInput, match="embedding_column: no column 'e10'"):
        datamask.select(datamask.parquet_shards(folder, embedding_column=dims + ["e10"]), **ARGS)
