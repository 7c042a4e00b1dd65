# SPDX-License-Identifier: Apache-2.0
"""Inputs: zero-copy views, one conversion, and every bad input raising InvalidInput."""

import tracemalloc

import numpy as np
import pytest

import datamask
from datamask import _core


def data(n=400, d=8, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)).astype(dtype), rng.random(n)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_float32_and_float16_are_read_without_a_copy(dtype):
    x, _ = data(dtype=dtype)
    (seen,) = datamask._shards(x)
    assert seen is x
    assert _core.buffer_address(seen) == x.ctypes.data  # the core reads the caller's buffer


def test_bfloat16_is_read_as_stored_and_selects_as_float32():
    # bfloat16 has no NumPy type: ml_dtypes' arrays, and .npy files of them ('<V2'), hold 2-byte
    # voids; the core reads their bits in place (a uint16 view) as the floats they are.
    x, q = data(n=600, d=8)
    bits = (x.view(np.uint32) >> 16).astype(np.uint16)  # truncated: any bfloat16 values will do
    wide = (bits.astype(np.uint32) << 16).view(np.float32)
    brain = bits.view("V2")
    (seen,) = datamask._shards(brain)
    assert seen.dtype == np.uint16 and _core.buffer_address(seen) == brain.ctypes.data  # no copy
    assert _core.corpus_view_address([seen]) == brain.ctypes.data  # a bfloat16 block, where it lies
    run = dict(count=60, iterations=5, lam=0.5)
    a = datamask.select(brain, q, **run)
    b = datamask.select(wide, q, **run)
    assert np.array_equal(a.ids, b.ids) and a.objective.total == b.objective.total
    # Scores in bfloat16 too (the program reads them from '<V2' files): as their float32 values.
    qbits = (q.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    qwide = (qbits.astype(np.uint32) << 16).view(np.float32)
    c = datamask.select(wide, qbits.view("V2"), **run)
    e = datamask.select(wide, qwide, **run)
    assert np.array_equal(c.ids, e.ids) and c.objective.total == e.objective.total


def test_a_one_block_float32_corpus_is_read_in_place():
    # select reads a one-block corpus (n <= block_size) of one float32 shard where it lies: the
    # library's view of the corpus points into the caller's buffer.
    x, _ = data(n=20000, d=64)
    assert _core.corpus_view_address([x]) == x.ctypes.data


def test_a_float16_corpus_is_read_where_it_lies():
    # One float16 shard is a one-block corpus of float16 rows: the block views the caller's
    # buffer as stored (no float32 copy).
    x, _ = data(n=2000, d=8)
    x16 = x.astype(np.float16)
    assert _core.corpus_view_address([x16]) == x16.ctypes.data


@pytest.mark.parametrize("shards", ["float16 and float32", "two float32 shards"])
def test_several_shards_are_gathered_block_by_block(shards):
    # No whole-corpus view: each block is gathered (in float32 where the shards' kinds differ)
    # when it runs.
    x, _ = data(n=2000, d=8)
    arrays = [x[:1000].astype(np.float16), x[1000:]] if shards == "float16 and float32" else [x[:1000], x[1000:]]
    assert _core.corpus_view_address(arrays) == 0


def peak_python_allocations(fn):
    """The peak of memory allocated through Python's allocators (numpy's arrays included; the
    C++ core's allocations are not seen)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# count=20 of 20,000 makes calibration subsets of one item, on which pairwise similarity is 0:
# a constant term, as the warning says.
@pytest.mark.filterwarnings("ignore:the pairwise term is constant")
def test_float64_is_converted_once_to_float32_in_python():
    x32, q = data(n=20000, d=64)
    x64 = x32.astype(np.float64)
    run = dict(count=20, iterations=2, polish=False, lam=0.5)
    peak32 = peak_python_allocations(lambda: datamask.select(x32, q, **run))
    peak64 = peak_python_allocations(lambda: datamask.select(x64, q, **run))
    assert peak32 < 0.1 * x32.nbytes  # no Python-side copy of float32
    # one float32 copy of the float64 input, not two
    assert x32.nbytes <= peak64 < 1.5 * x32.nbytes
    np.testing.assert_array_equal(datamask.select(x32, q, **run).ids, datamask.select(x64, q, **run).ids)


def test_other_layouts_are_converted_once():
    x, q = data()
    fortran = np.asfortranarray(x)
    (seen,) = datamask._shards(fortran)
    assert seen is not fortran and seen.flags.c_contiguous and seen.dtype == np.float32
    np.testing.assert_array_equal(datamask.select(fortran, q).ids, datamask.select(x, q).ids)
    ints = (x * 100).astype(np.int32)
    assert datamask._shards(ints)[0].dtype == np.float32


def test_a_sequence_of_arrays_is_read_as_shards():
    x, q = data()
    parts = [x[:100], x[100:250], x[250:]]
    # One block: the shards are one corpus, rows in order.
    np.testing.assert_array_equal(datamask.select(x, q, ratio=0.2, block_size=400).ids,
                                  datamask.select(parts, q, ratio=0.2, block_size=400).ids)
    # Several: the shards are the files of datamask-select's layout, consecutive shards grouped to
    # at least a block's rows ({100, 150}: 250 rows, 2 blocks; {150}: 1 block), each block drawn from
    # its group, so a worker reads its own shards only.
    sel = datamask.select(parts, q, ratio=0.2, block_size=150)
    assert [b["items"] for b in sel.blocks][2] == 150 and len(sel.blocks) == 3
    assert sum(b["items"] for b in sel.blocks[:2]) == 250
    assert set(sel.ids[:sum(b["selected"] for b in sel.blocks[:2])]) <= set(range(250))


X, Q = data(n=100, d=4)
NAN = X.copy()
NAN[3, 1] = np.nan
INF = X.astype(np.float16)
INF[7, 2] = np.inf
QNAN = Q.copy()
QNAN[5] = np.nan
# A kNN graph of X (any rows will do for the checks): each row 0..3 shifted by the row number.
G_IDS = (np.arange(100)[:, None] + np.arange(4)[None, :]) % 100
G_SIMS = np.tile(np.array([1.0, 0.5, 0.25, 0.125]), (100, 1))


def bad_graph(ids=None, sims=None):
    """The graph above with one entry replaced: ids or sims = (row, column, value)."""
    g_ids, g_sims = G_IDS.copy(), G_SIMS.copy()
    for array, change in ((g_ids, ids), (g_sims, sims)):
        if change is not None:
            array[change[0], change[1]] = change[2]
    return g_ids, g_sims


FAC = dict(objective="facility")

# (arguments, keywords, what the message must say)
BAD = {
    "1-D embeddings": ((X[0], Q), {}, "embeddings: embeddings must be a 2-D array (n x d), found 1 dimension"),
    "empty": ((X[:0], Q[:0]), {}, "embeddings: empty array (0 x 4)"),
    "NaN": ((NAN, Q), {}, "embeddings: row 3, column 1 is NaN"),
    "infinite float16": ((INF, Q), {}, "embeddings: row 7, column 2 is infinite"),
    "strings": ((np.full((3, 2), "a"), Q[:3]), {}, "unsupported dtype"),
    "shards of different d": (([X, X[:, :3]], np.concatenate([Q, Q])), {}, "embeddings[1]: has 3 columns"),
    "quality length": ((X, Q[:99]), {}, "quality: has 99 rows, expected 100"),
    "quality NaN": ((X, QNAN), {}, "quality: score at row 5 is NaN"),
    "quality missing": ((X,), {}, "quality: required unless lam=0"),
    "ids length": ((X, Q), dict(ids=np.arange(99)), "ids: has 99 rows, expected 100"),
    "duplicate ids": ((X, Q), dict(ids=np.r_[np.arange(99), 5]), "ids: duplicate id 5 at rows 5 and 99"),
    "float ids": ((X, Q), dict(ids=np.arange(100.0)), "ids: expected integer ids"),
    "ratio 0": ((X, Q), dict(ratio=0.0), "ratio: must be in (0, 1], found 0"),
    "ratio above 1": ((X, Q), dict(ratio=1.5), "ratio: must be in (0, 1]"),
    "count above n": ((X, Q), dict(count=101), "count"),
    "ratio and count": ((X, Q), dict(ratio=0.1, count=5), "count: give ratio or count, not both"),
    "lam": ((X, Q), dict(lam=2.0), "lam: must be in [0, 1], found 2"),
    "rollouts": ((X, Q), dict(optimizer="pg", rollouts=1), "rollouts: G must be at least 2, found 1"),
    "objective name": ((X, Q), dict(objective="cosine"), "objective: must be one of pairwise, facility, disf"),
    "objective twice": ((X, Q), dict(objective=["disf", "disf"]), "objective: 'disf' given twice"),
    "objective weights": ((X, Q), dict(objective=["disf"], objective_weights=[1, 2]), "objective_weights: 2 weights for 1"),
    "optimizer name": ((X, Q), dict(optimizer="adam"), "optimizer"),
    "continuous facility": ((X, Q), dict(optimizer="continuous", objective="facility"),
                            'optimizer="continuous": dense facility location has no relaxation'),
    "neighbors without facility": ((X, Q), dict(neighbors=4), "neighbors: sets facility location's kNN graph"),
    "negative neighbors": ((X, Q), dict(objective="facility", neighbors=-1), "neighbors: must be >= 0"),
    "graph id out of range": ((X, Q), dict(FAC, graph=bad_graph(ids=(7, 1, 100))),
                              "graph ids: row 7, column 1 holds id 100, outside [0, 100)"),
    "graph negative id": ((X, Q), dict(FAC, graph=bad_graph(ids=(3, 2, -1))), "graph ids: row 3, column 2 holds id -1"),
    "graph repeated id": ((X, Q), dict(FAC, graph=bad_graph(ids=(4, 2, 4))), "graph ids: row 4 lists id 4 twice"),
    "graph NaN": ((X, Q), dict(FAC, graph=bad_graph(sims=(9, 0, np.nan))), "graph sims: row 9, column 0 is NaN"),
    "graph infinite": ((X, Q), dict(FAC, graph=bad_graph(sims=(9, 3, -np.inf))), "graph sims: row 9, column 3 is infinite"),
    "graph beyond float": ((X, Q), dict(FAC, graph=bad_graph(sims=(2, 0, 1e300))),
                           "graph sims: row 2, column 0 is 1e+300, beyond the float range"),
    "graph rows": ((X, Q), dict(FAC, graph=(G_IDS[:99], G_SIMS[:99])), "graph ids: has 99 rows, expected 100"),
    "graph shapes differ": ((X, Q), dict(FAC, graph=(G_IDS, G_SIMS[:, :3])),
                            "graph sims: has shape 100 x 3, but graph ids has 100 x 4; the two must match"),
    "graph 1-D": ((X, Q), dict(FAC, graph=(G_IDS.ravel(), G_SIMS.ravel())), "graph ids: expected a 2-D array (n x K), found 1 dimension"),
    "graph no columns": ((X, Q), dict(FAC, graph=(G_IDS[:, :0], G_SIMS[:, :0])), "graph ids: has 0 columns"),
    "graph float ids": ((X, Q), dict(FAC, graph=(G_IDS.astype(float), G_SIMS)), "graph ids: expected integer neighbour ids"),
    "graph text sims": ((X, Q), dict(FAC, graph=(G_IDS, G_SIMS.astype(str))), "graph sims: expected real similarities"),
    "graph 0-d": ((X, Q), dict(FAC, graph=(np.int64(3), np.float64(1.0))), "graph ids: expected a 2-D array (n x K), found 0 dimensions"),
    "graph ragged": ((X, Q), dict(FAC, graph=([[0, 1], [1]], [[1.0, 0.5], [1.0]])), "graph: not a pair of n x K arrays"),
    "graph not a pair": ((X, Q), dict(FAC, graph=G_IDS), "graph: expected a pair (ids, sims)"),
    "graph and neighbors": ((X, Q), dict(FAC, graph=(G_IDS, G_SIMS), neighbors=4), "graph: give neighbors"),
    "graph without facility": ((X, Q), dict(graph=(G_IDS, G_SIMS)), "graph: sets facility location's kNN graph"),
    "graph over blocks": ((X, Q), dict(FAC, graph=(G_IDS, G_SIMS), block_size=60),
                          "graph: its rows are the corpus rows, so it needs the corpus in one block; the 100 items form"),
    "continuous option with pg": ((X, Q), dict(optimizer="pg", step_size=0.1), "step_size: sets the continuous learner"),
    "pg option with continuous": ((X, Q), dict(steps=10), "steps: sets the policy-gradient learner"),
    "pg option with a greedy": ((X, Q), dict(optimizer="lazy", rollouts=8),
                                "rollouts: sets the policy-gradient learner, but the optimizer is lazy"),
    "epsilon with another optimizer": ((X, Q), dict(optimizer="lazy", epsilon=0.1),
                                       "epsilon: sets stochastic greedy (the baseline, or the continuous learner's "
                                       "stochastic start), but the optimizer is lazy"),
    "choice": ((X, Q), dict(optimizer="pg", init="random"), "init"),
    "lr_min above lr_max": ((X, Q), dict(optimizer="pg", lr_max=0.1, lr_min=0.2), "lr_min: must not exceed lr_max"),
    "continuous step size": ((X, Q), dict(step_size=-1.0), "step_size: must be > 0, found -1"),
    "prune": ((X, Q), dict(prune=1.0), "prune: must be in [0, 1)"),
    "quality weights": ((X, Q), dict(quality_weights=[1, 1]), "quality_weights: 2 weights for 1 score columns"),
    "block size": ((X, Q), dict(block_size=1), "block_size: must be at least 2"),
    "scales count": ((X, Q), dict(scales=[1.0]), "scales"),
    "choice spelling": ((X, Q), dict(step_rule="bogus"), "step_rule: expected plain, normalized or adam, found 'bogus'"),
    "choice spelling 2": ((X, Q), dict(quality_aggregate="bogus"), "quality_aggregate: expected mean or sum, found 'bogus'"),
    "choice type": ((X, Q), dict(optimizer="pg", init=3), "init: expected uniform or quality, found 3"),
    "bool for a number": ((X, Q), dict(lam=True), "lam: expected a number, found True"),
    "bool for an integer": ((X, Q), dict(seed=False), "seed: expected an integer in [0, 2^64 - 1], found False"),
    "lam text without quality": ((X,), dict(lam="0.5"), "lam: expected a number, found '0.5'"),
    "prune text without quality": ((X,), dict(lam=0.0, prune="x"), "prune: expected a number, found 'x'"),
    "number type": ((X, Q), dict(min_active="many"), "min_active: expected an integer in [1, 2^63 - 1], found 'many'"),
    "negative seed": ((X, Q), dict(seed=-1), "seed: expected an integer in [0, 2^64 - 1], found -1"),
    "seed beyond uint64": ((X, Q), dict(seed=2**70), "seed: expected an integer in [0, 2^64 - 1], found 1180591620717411303424"),
    "count beyond int64": ((X, Q), dict(count=2**63), "count: expected an integer in [0, 2^63 - 1], found 9223372036854775808"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_raises_invalid_input_naming_it(case):
    args, kw, message = BAD[case]
    with pytest.raises(datamask.InvalidInput) as e:
        datamask.select(*args, **kw)
    assert isinstance(e.value, ValueError)
    assert message in str(e.value)


def test_an_unknown_keyword_is_a_type_error_with_a_suggestion():
    with pytest.raises(TypeError, match="did you mean 'rollouts'"):
        datamask.select(X, Q, rollout=3)


def test_evaluate_names_its_arguments():
    with pytest.raises(datamask.InvalidInput, match=r"^ids: id 1000 \(position 1\) is not in the corpus"):
        datamask.evaluate(X, Q, [1, 1000])
    with pytest.raises(datamask.InvalidInput, match=r"^ids: id 1 is given twice \(positions 0 and 2\)"):
        datamask.evaluate(X, Q, [1, 2, 1])
    with pytest.raises(datamask.InvalidInput, match="^corpus_ids: duplicate id 5 at rows 5 and 99"):
        datamask.evaluate(X, Q, [1], corpus_ids=np.r_[np.arange(99), 5])
    with pytest.raises(datamask.InvalidInput, match="^corpus_ids: has 99 rows, expected 100"):
        datamask.evaluate(X, Q, [1], corpus_ids=np.arange(99))


# (auto would run naive greedy on 10 of 50 items: it costs less than the ascent there)
@pytest.mark.parametrize("optimizer, what", [("continuous", "the relaxation"), ("greedy", "the greedy state")])
def test_disf_with_a_huge_d_is_refused_before_allocating(optimizer, what):
    # One d x d matrix of doubles is 128 GiB here (it was MemoryError, std::bad_alloc).
    x = np.zeros((50, 1 << 17), np.float32)
    with pytest.raises(datamask.InvalidInput, match=r"^embeddings: d = 131072 is too large for DiSF: " + what + r" .* bytes"):
        datamask.select(x, Q[:50], objective="disf", count=10, optimizer=optimizer)


def test_what_a_new_user_broke_is_refused_naming_it():
    """Issue 45: a shard twice, an objective or progress of the wrong type, a block size for
    evaluate, scores whose quality term overflows."""
    with pytest.raises(datamask.InvalidInput, match=r"^embeddings\[1\]: shares its rows with embeddings\[0\]"):
        datamask.select([X, X], np.r_[Q, Q])
    with pytest.raises(datamask.InvalidInput, match=r"^embeddings\[1\]: shares its rows with embeddings\[0\]"):
        datamask.select([X[:60], X[40:]], Q)  # overlapping views of one array
    datamask.select([X[:50], X[50:]], Q)  # views that share no row are two shards
    with pytest.raises(TypeError, match="^objective: expected a name .* found int 42"):
        datamask.select(X, Q, objective=42)
    with pytest.raises(TypeError, match="^progress: expected True, False or a callable .* found int 5"):
        datamask.select(X, Q, progress=5)
    with pytest.raises(TypeError, match="^datamask.evaluate: takes no 'block_size': it scores the subset as one block"):
        datamask.evaluate(X, Q, [1, 2], block_size=100000)
    with pytest.raises(datamask.InvalidInput, match="^the quality term: is inf .* the quality scores overflow"):
        datamask.select(X, np.linspace(0.8, 1.0, len(Q)) * 1.7e308)


def test_huge_scores_calibrate_as_any_others():
    """Scores times 2^530 (exact): the same ids, f and constant marks; the quality scale 2^530 times."""
    small = datamask.select(X, Q, count=10)
    big = datamask.select(X, Q * 2.0 ** 530, count=10)
    np.testing.assert_array_equal(small.ids, big.ids)
    assert small.objective.total == big.objective.total and not big.objective["quality"].constant
    assert big.objective["quality"].scale == small.objective["quality"].scale * 2.0 ** 530
