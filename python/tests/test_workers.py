# SPDX-License-Identifier: Apache-2.0
"""A worker's share (issue 46): ``select(worker=(rank, world), plan=...)`` runs the blocks of one
worker of a spread selection, reading its own shards and rows; the workers' ids, in rank order,
are one process's, and the program's shards on the same files select the same."""
import os
import subprocess
import tracemalloc
import warnings

import numpy as np
import pytest

import datamask

PROGRAM = os.environ.get("DATAMASK_SELECT")
SIZES = (3000, 2000, 1500, 2500, 3000)  # groups at block_size 2000: {3000}, {2000}, {1500, 2500}, {3000}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Five float16 shards as .npy files, uint64 ids and float32 scores in one file each."""
    folder = tmp_path_factory.mktemp("workers")
    rng = np.random.default_rng(3)
    files = []
    for i, rows in enumerate(SIZES):
        centres = rng.standard_normal((8, 12))
        x = (centres[rng.integers(0, 8, rows)] + 0.4 * rng.standard_normal((rows, 12))).astype(np.float16)
        files.append(str(folder / f"part-{i}.npy"))
        np.save(files[-1], x)
    n = sum(SIZES)
    np.save(folder / "ids.npy", (np.uint64(1) << np.uint64(63)) + rng.permutation(n).astype(np.uint64) * np.uint64(7))
    np.save(folder / "q.npy", rng.random(n).astype(np.float32))
    return files, str(folder / "ids.npy"), str(folder / "q.npy"), folder


RUNS = [dict(ratio=0.1, iterations=20), dict(ratio=0.1, prune=0.3, optimizer="pg", steps=10, rollouts=8)]


@pytest.mark.parametrize("run", RUNS)
def test_workers_select_what_one_process_selects(corpus, run):
    files, ids, q, _ = corpus
    args = dict(ids=ids, block_size=2000, seed=3, **run)
    whole = datamask.select(files, q, **args)
    assert len(whole.blocks) == 7  # {3000}: 2 blocks, {2000}: 1, {1500, 2500}: 2, {3000}: 2
    p = datamask.plan(files, q, **args)
    assert (p.prune_threshold is not None) == ("prune" in run) and p.calibration  # several blocks: calibrated once
    for world in (2, 3, 7, 11):
        got = [datamask.select(files, q, worker=(r, world), plan=p, **args) for r in range(world)]
        np.testing.assert_array_equal(np.concatenate([g.ids for g in got]), whole.ids)
        assert [b["block"] for g in got for b in g.blocks] == list(range(7))
        blocks = [b for g in got for b in g.blocks]
        assert [b["objective"] for b in blocks] == [b["objective"] for b in whole.blocks]  # the plan's scales
    with pytest.warns(UserWarning, match="without plan= this worker reads every row"):
        alone = datamask.select(files, q, worker=(1, 3), **args)
    np.testing.assert_array_equal(alone.ids, datamask.select(files, q, worker=(1, 3), plan=p, **args).ids)


def test_a_plan_of_other_options_is_refused(corpus, tmp_path):
    files, ids, q, _ = corpus
    p = datamask.plan(files, q, ids=ids, block_size=2000, ratio=0.1)
    with pytest.raises(datamask.InvalidInput, match="plan: made for other inputs or options"):
        datamask.select(files, q, ids=ids, block_size=2000, ratio=0.2, worker=(0, 2), plan=p)
    with pytest.raises(datamask.InvalidInput, match="plan: made for other inputs or options"):
        datamask.select(files[:4], q, ids=ids, block_size=2000, ratio=0.1, worker=(0, 2), plan=p)
    two = [q, np.load(q) * 2]  # two score columns: the plan is for their weights too
    p2 = datamask.plan(files, two, ids=ids, block_size=2000, ratio=0.1, prune=0.5)
    with pytest.raises(datamask.InvalidInput, match="plan: made for other inputs or options"):
        datamask.select(files, two, ids=ids, block_size=2000, ratio=0.1, prune=0.5, quality_weights=[1, 0],
                        worker=(0, 2), plan=p2)
    # threads do not change the selection: the plan serves a call that sets them
    datamask.select(files, q, ids=ids, block_size=2000, ratio=0.1, threads=1, worker=(0, 2), plan=p)
    p.save(tmp_path / "plan.json")
    assert datamask.Plan.load(tmp_path / "plan.json") == p  # exact doubles
    with pytest.raises(datamask.InvalidInput, match="worker: \\(2, 2\\)"):
        datamask.select(files, q, ids=ids, block_size=2000, ratio=0.1, worker=(2, 2), plan=p)
    with pytest.raises(TypeError, match="worker: expected \\(rank, world_size\\)"):
        datamask.select(files, q, ids=ids, block_size=2000, ratio=0.1, worker=3, plan=p)


def test_a_worker_reads_its_rows_only(corpus):
    """The scores and ids a worker converts are its groups' rows (Python's allocations, memory-
    mapped inputs), not the corpus's."""
    files, ids, q, folder = corpus
    n = sum(SIZES)
    big_q = np.lib.format.open_memmap(folder / "big-q.npy", "w+", np.float64, (n * 40,))  # 40 rows a row: 40x
    big_q[:] = np.repeat(np.load(q), 40)
    big_q.flush()
    del big_q
    parts = [str(folder / f"big-{i}.npy") for i in range(40)]
    for i, name in enumerate(parts):  # 40 files of n rows: groups of one file each at block_size n
        if not os.path.exists(name):
            np.save(name, np.concatenate([np.load(f) for f in files]))
    args = dict(block_size=n, ratio=0.1, iterations=5, lam=1.0)  # quality only: nothing to calibrate
    p = datamask.plan(parts, str(folder / "big-q.npy"), **args)
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            sel = datamask.select(parts, str(folder / "big-q.npy"), worker=(5, 40), plan=p, **args)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [b["block"] for b in sel.blocks] == [5]
    assert peak < 3 * n * 8, f"a worker of 40 allocated {peak} bytes: more than its rows' scores"


def test_a_run_that_needs_nothing_of_the_corpus_needs_no_plan(corpus):
    """Quality alone (lam=1) prunes nothing and calibrates nothing: a worker reads its rows, no warning."""
    files, ids, q, _ = corpus
    args = dict(ids=ids, block_size=2000, ratio=0.1, lam=1.0)
    whole = datamask.select(files, q, **args)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = [datamask.select(files, q, worker=(r, 3), **args) for r in range(3)]
    np.testing.assert_array_equal(np.concatenate([g.ids for g in got]), whole.ids)


@pytest.mark.skipif(not (PROGRAM and os.access(PROGRAM, os.X_OK)),
                    reason="datamask-select not built: set DATAMASK_SELECT to its path (scripts/python-test does)")
def test_the_program_selects_what_the_workers_select(corpus, tmp_path):
    files, ids, q, folder = corpus
    emb = tmp_path / "emb"
    emb.mkdir()
    for f in files:
        os.symlink(f, emb / os.path.basename(f))
    subprocess.run([PROGRAM, "--embeddings", str(emb), "--ids", ids, "--quality", q, "--block-size", "2000",
                    "--ratio", "0.1", "--iterations", "20", "--seed", "3", "--quiet", "--out", str(tmp_path / "s.npy")],
                   check=True)
    p = datamask.plan(files, q, ids=ids, block_size=2000, ratio=0.1, iterations=20, seed=3)
    got = [datamask.select(files, q, ids=ids, block_size=2000, ratio=0.1, iterations=20, seed=3, worker=(r, 3), plan=p)
           for r in range(3)]
    np.testing.assert_array_equal(np.concatenate([g.ids for g in got]), np.load(tmp_path / "s.npy"))
