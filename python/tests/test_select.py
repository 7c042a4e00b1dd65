# SPDX-License-Identifier: Apache-2.0
"""datamask.select against datamask-select: the same ids and report totals on the same inputs.

The program is found through the environment variable DATAMASK_SELECT (scripts/python-test sets
it to the build folder's datamask-select); these tests are skipped, saying so, without it.
"""

import json
import os
import re
import subprocess

import numpy as np
import pytest

import datamask

PROGRAM = os.environ.get("DATAMASK_SELECT", "")
needs_program = pytest.mark.skipif(
    not (PROGRAM and os.access(PROGRAM, os.X_OK)),
    reason="datamask-select not built: set DATAMASK_SELECT to its path (scripts/python-test does)",
)


def corpus(n=3000, d=16, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((12, d))
    x = centers[rng.integers(0, 12, n)] + 0.3 * rng.standard_normal((n, d))
    q = rng.random(n)
    ids = rng.permutation(10 * n)[:n].astype(np.int64) + 1000
    return x.astype(dtype), q, ids


def run_program(tmp_path, shards, q, ids, args):
    paths = []
    for i, s in enumerate(shards):
        p = tmp_path / f"emb{i}.npy"
        np.save(p, s)
        paths += ["--embeddings", str(p)]
    np.save(tmp_path / "q.npy", q)
    np.save(tmp_path / "ids.npy", ids)
    out, report = tmp_path / "out.npy", tmp_path / "report.json"
    cmd = [PROGRAM, *paths, "--quality", str(tmp_path / "q.npy"), "--ids", str(tmp_path / "ids.npy"),
           "--out", str(out), "--report", str(report), "--quiet", *args]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return np.load(out), json.loads(report.read_text())


# (program arguments, the same as keywords of datamask.select)
CASES = {
    "continuous_pairwise": (["--ratio", "0.1", "--seed", "3"], dict(ratio=0.1, seed=3)),
    "pg_disf": (["--optimizer", "pg", "--objective", "disf", "--steps", "15", "--rollouts", "16", "--seed", "5"],
                dict(optimizer="pg", objective="disf", steps=15, rollouts=16, seed=5)),
    "lazy_facility_prune": (["--optimizer", "lazy", "--objective", "facility", "--count", "120", "--prune", "0.2"],
                            dict(optimizer="lazy", objective="facility", count=120, prune=0.2)),
    "blocks_mix": (["--block-size", "1000", "--objective", "pairwise", "--objective", "disf",
                    "--objective-weights", "1,0.5", "--lambda", "0.3", "--iterations", "20", "--no-polish"],
                   dict(block_size=1000, objective=["pairwise", "disf"], objective_weights=[1, 0.5], lam=0.3,
                        iterations=20, polish=False)),
    "knn_facility_blocks": (["--objective", "facility", "--neighbors", "8", "--block-size", "1500",
                             "--optimizer", "continuous", "--iterations", "30"],
                            dict(objective="facility", neighbors=8, block_size=1500, optimizer="continuous",
                                 iterations=30)),
    "greedy_facility_cache_off": (["--optimizer", "greedy", "--objective", "facility", "--count", "40",
                                   "--facility-cache", "0"],
                                  dict(optimizer="greedy", objective="facility", count=40, facility_cache=0)),
}


@needs_program
@pytest.mark.parametrize("case", sorted(CASES))
def test_same_ids_and_totals_as_the_program(tmp_path, case):
    args, kw = CASES[case]
    x, q, ids = corpus()
    expected, report = run_program(tmp_path, [x], q, ids, args)
    sel = datamask.select(x, q, ids=ids, **kw)
    assert sel.ids.dtype == np.int64
    np.testing.assert_array_equal(sel.ids, expected)
    # A module and a program built for different backends (a CUDA module beside a CPU program)
    # select the same ids, but their calibrated scales differ in the last bits (the device sums
    # in double): the same bits only on the same backend.
    assert report["configuration"]["backend"] in ("eigen", "cuda", "thrust-omp")
    same = (lambda v: v) if report["configuration"]["backend"] == datamask.backend else pytest.approx
    objective = report["total"]["objective"]
    assert sel.objective.total == same(objective["total"])
    for t in sel.objective.terms:
        assert (t.raw, t.scale, t.weight) == tuple(same(objective["terms"][t.name][k]) for k in ("raw", "scale", "weight"))
    # Each block's record, as the report's block has it: the same fields in the same order, the
    # same counts; its kNN graph record too (the seconds are each run's own).
    for mine, theirs in zip(sel.blocks, report["blocks"], strict=True):
        assert list(mine) == list(theirs) and list(mine["objective"]) == list(theirs["objective"])
        for k in ("block", "items", "kept", "selected", "optimizer", "steps_run", "zero_variance_steps",
                  "nonfinite_steps", "from_checkpoint"):
            assert mine[k] == theirs[k], (k, mine, theirs)
        assert ("graph" in mine) == ("graph" in theirs)
        if "graph" in mine:
            assert {k: mine["graph"][k] for k in ("neighbors", "source", "bytes")} == \
                {k: theirs["graph"][k] for k in ("neighbors", "source", "bytes")}
            assert mine["graph"]["seconds"] > 0


CERTIFY_CASES = ["continuous_pairwise", "lazy_facility_prune", "knn_facility_blocks", "blocks_mix"]


@needs_program
@pytest.mark.parametrize("case", CERTIFY_CASES)
def test_certify_gives_the_programs_certificates(tmp_path, case):
    """select(certify=True): the certificates of datamask-select --certify, per block and in total
    (the seconds are each run's own); the selection is that of a run without it."""
    args, kw = CASES[case]
    x, q, ids = corpus()
    expected, report = run_program(tmp_path, [x], q, ids, args + ["--certify"])
    sel = datamask.select(x, q, ids=ids, certify=True, **kw)
    np.testing.assert_array_equal(sel.ids, expected)
    np.testing.assert_array_equal(datamask.select(x, q, ids=ids, **kw).ids, expected)
    same = (lambda v: v) if report["configuration"]["backend"] == datamask.backend else pytest.approx
    fields = ("method", "bound", "gap", "certified_share", "random_mean", "reason")
    theirs = [b["certificate"] for b in report["blocks"]] + [report["total"]["certificate"]]
    mine = [b["certificate"] for b in sel.blocks] + [vars(sel.certificate)]
    for a, b in zip(mine, theirs, strict=True):
        for k in fields:
            if k == "method":
                assert a[k] == b[k]
            elif k == "reason":
                assert a.get(k, "") == b.get(k, "")
            elif b[k] is None:
                assert a[k] is None, (k, a, b)
            else:
                assert a[k] == same(b[k]), (k, a, b)
    c = sel.certificate
    assert sel.seconds["certify"] == c.seconds > 0
    if case == "blocks_mix":  # DiSF has no bound: no certificate
        assert not c.certified and c.bound is None and c.certified_share is None and "disf" in c.reason
    else:
        assert c.certified and c.bound >= sel.objective.total and c.gap >= 0 and 0 < c.certified_share <= 1
    assert datamask.select(x, q, ids=ids, **kw).certificate is None


@needs_program
def test_certify_budget_as_the_program(tmp_path):
    """certify_steps and certify_memory: the program's --certify-steps and --certify-memory (fewer
    dual steps: a bound no tighter than the default's); refused without certify, as there."""
    args, kw = CASES["lazy_facility_prune"]
    x, q, ids = corpus()
    _, report = run_program(tmp_path, [x], q, ids, args + ["--certify", "--certify-steps", "3", "--certify-memory", "0"])
    assert report["configuration"]["certify-steps"] == 3 and report["configuration"]["certify-memory"] == 0
    sel = datamask.select(x, q, ids=ids, certify=True, certify_steps=3, certify_memory=0, **kw)
    same = (lambda v: v) if report["configuration"]["backend"] == datamask.backend else pytest.approx
    assert sel.certificate.bound == same(report["total"]["certificate"]["bound"])
    fewer = datamask.select(x, q, ids=ids, certify=True, certify_steps=3, **kw).certificate
    assert fewer.certified and fewer.bound >= datamask.select(x, q, ids=ids, certify=True, **kw).certificate.bound
    for option in ("certify_steps", "certify_memory"):
        with pytest.raises(datamask.InvalidInput, match=f"{option}: sets the certificate's budget, but no certify"):
            datamask.select(x, q, ids=ids, **{option: 3}, **kw)


@needs_program
def test_float16_shards_as_the_program(tmp_path):
    x, q, ids = corpus(dtype=np.float16)
    shards = [x[:1200], x[1200:]]
    expected, _ = run_program(tmp_path, shards, q, ids, ["--ratio", "0.05", "--block-size", "2000"])
    sel = datamask.select(shards, q, ids=ids, ratio=0.05, block_size=2000)
    np.testing.assert_array_equal(sel.ids, expected)


@needs_program
@pytest.mark.parametrize("dtype", [np.uint64, np.int64])
def test_ids_keep_their_type_as_the_program(tmp_path, dtype):
    # Hash ids use all 64 bits: uint64 ids at and above 2^63 come back as uint64, as the program
    # writes them; negative int64 ids stay int64. Three blocks: the blocks follow the ids' hash.
    x, q, _ = corpus()
    rng = np.random.default_rng(1)
    if dtype == np.uint64:
        ids = np.uint64(2**63) + rng.permutation(10**6)[: len(x)].astype(np.uint64) * np.uint64(2**40)
    else:
        ids = -rng.permutation(10**6)[: len(x)].astype(np.int64) * 2**40
    args, kw = ["--ratio", "0.1", "--block-size", "1000", "--iterations", "20"], dict(ratio=0.1, block_size=1000, iterations=20)
    expected, report = run_program(tmp_path, [x], q, ids, args)
    assert expected.dtype == dtype and report["configuration"]["ids-dtype"] == np.dtype(dtype).name
    sel = datamask.select(x, q, ids=ids, **kw)
    assert sel.ids.dtype == dtype
    np.testing.assert_array_equal(sel.ids, expected)
    assert set(sel.ids.tolist()) <= set(ids.tolist())
    # evaluate finds the ids in the corpus, and names one that is not there as it was given.
    one = datamask.select(x, q, ids=ids, ratio=0.1, iterations=20)
    assert datamask.evaluate(x, q, one.ids, corpus_ids=ids, iterations=20).total == pytest.approx(one.objective.total)
    missing = ids.max() + dtype(1) if dtype == np.uint64 else ids.min() - 1
    with pytest.raises(datamask.InvalidInput, match=f"ids: id {missing} \\(position 0\\) is not in the corpus"):
        datamask.evaluate(x, q, np.array([missing], dtype=dtype), corpus_ids=ids)


def test_same_seed_same_selection_any_thread_count():
    # n = 20,000: the library's loops then exceed detail::parallel_min_work and run on 2 threads.
    x, q, _ = corpus(n=20000)
    for extra in ({}, dict(optimizer="pg", steps=5, rollouts=8)):
        a = datamask.select(x, q, seed=7, threads=1, **extra)
        b = datamask.select(x, q, seed=7, threads=2, **extra)
        np.testing.assert_array_equal(a.ids, b.ids)
        assert a.objective.total == b.objective.total
        assert len(a) == 2000 and len(np.unique(a.ids)) == 2000


def test_threads_above_the_cpus_are_capped_with_a_warning():
    # As datamask-select's --threads: more threads than CPUs only wait on each other.
    x, q, _ = corpus(n=2000)
    with pytest.warns(UserWarning, match=r"^threads: 1000 is more than this process can run at once .*; using \d+$"):
        a = datamask.select(x, q, count=50, threads=1000)
    np.testing.assert_array_equal(a.ids, datamask.select(x, q, count=50, threads=1).ids)


def test_report_parts():
    x, q, ids = corpus(n=2000)
    sel = datamask.select(x, q, ids=ids, count=50, optimizer="pg", steps=5, rollouts=8)
    assert sel.optimizer == "pg"
    assert set(sel.ids) <= set(ids)
    assert [h["step"] for h in sel.history] == [1, 2, 3, 4, 5]
    assert sel.objective["quality"].weight == 0.5
    total = sum(t.weight * t.raw / t.scale for t in sel.objective.terms)
    assert sel.objective.total == pytest.approx(total, rel=1e-12)
    assert sel.seconds["total"] >= sel.seconds["optimize"] > 0


def test_evaluate_gives_a_selections_objective():
    x, q, ids = corpus(n=2000)
    sel = datamask.select(x, q, ids=ids, ratio=0.1, seed=2, lam=0.4)
    ev = datamask.evaluate(x, q, sel.ids, corpus_ids=ids, seed=2, lam=0.4, ratio=0.1)
    assert ev.total == pytest.approx(sel.objective.total, rel=1e-12)
    # another subset of the same size scores lower than the optimised one
    other = datamask.evaluate(x, q, ids[:200], corpus_ids=ids, seed=2, lam=0.4)
    assert other.total < ev.total


def test_evaluate_gives_a_knn_selections_objective():
    # f with facility location on the kNN graph, as select optimised and reported it
    x, q, ids = corpus(n=1500)
    kw = dict(objective="facility", neighbors=8, seed=1, optimizer="continuous", iterations=20)
    sel = datamask.select(x, q, ids=ids, ratio=0.1, **kw)
    ev = datamask.evaluate(x, q, sel.ids, corpus_ids=ids, **kw)
    assert ev.total == pytest.approx(sel.objective.total, rel=1e-12)
    dense = datamask.evaluate(x, q, sel.ids, corpus_ids=ids, objective="facility", seed=1)
    assert dense.total != ev.total


def cosine_graph(x, k):
    """Each row's k most similar rows under cosine in double (itself first), ties to the smaller row."""
    u = x.astype(np.float64)
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    sims = u @ u.T
    order = np.lexsort((np.broadcast_to(np.arange(len(u)), sims.shape), -sims), axis=1)[:, :k]
    return order.astype(np.int64), np.take_along_axis(sims, order, axis=1)


def sparse_facility(ids, sims, rows):
    """Facility location on the graph: the mean over items of the best selected neighbour (0: none)."""
    chosen = np.zeros(len(ids), dtype=bool)
    chosen[rows] = True
    hit = chosen[ids]
    return float(np.where(hit, sims.astype(np.float32).astype(np.float64), 0.0).max(axis=1, initial=0.0).mean())


def test_a_given_graph_is_the_one_optimised_and_scored():
    # graph=(ids, sims): the caller's graph, its rows in any order; the reported term is facility
    # location on exactly that graph, and evaluate scores a subset on it without building one.
    x, q, ids = corpus(n=600)
    g_ids, g_sims = cosine_graph(x, 8)
    kw = dict(objective="facility", lam=0.0, ratio=0.1, seed=1, optimizer="continuous", iterations=30)
    sel = datamask.select(x, q, ids=ids, graph=(g_ids, g_sims), **kw)
    (block,) = sel.blocks
    assert block["graph"]["neighbors"] == 8 and block["graph"]["source"] == "given as arrays, K = 8"
    assert block["graph"]["seconds"] > 0  # the time checking and sorting it took
    row_of = {v: i for i, v in enumerate(ids)}
    rows = np.array([row_of[v] for v in sel.ids])
    (term,) = [t for t in sel.objective.terms if t.name == "facility_knn"]
    assert term.raw == pytest.approx(sparse_facility(g_ids, g_sims, rows), rel=1e-6)
    # Rows reversed and in float32: sorted again, the same graph, the same selection.
    again = datamask.select(x, q, ids=ids, graph=(g_ids[:, ::-1], g_sims[:, ::-1].astype(np.float32)), **kw)
    np.testing.assert_array_equal(again.ids, sel.ids)
    ev = datamask.evaluate(x, q, sel.ids, corpus_ids=ids, graph=(g_ids, g_sims), **kw)
    assert ev.total == pytest.approx(sel.objective.total, rel=1e-12)
    other = datamask.evaluate(x, q, ids[:60], corpus_ids=ids, graph=(g_ids, g_sims), **kw)
    (other_term,) = [t for t in other.terms if t.name == "facility_knn"]
    assert other_term.raw == pytest.approx(sparse_facility(g_ids, g_sims, np.arange(60)), rel=1e-6)
    # The library's own exact graph of the same K selects the same items.
    built = datamask.select(x, q, ids=ids, neighbors=8, **kw)
    np.testing.assert_array_equal(built.ids, sel.ids)


def test_evaluate_scores_a_several_block_selection_as_one_block():
    # As the README says: not the selection's own f, which is combined over its blocks.
    x, q, ids = corpus(n=2000)
    sel = datamask.select(x, q, ids=ids, ratio=0.1, seed=2, block_size=800)
    assert len(sel.blocks) > 1
    ev = datamask.evaluate(x, q, sel.ids, corpus_ids=ids, seed=2, ratio=0.1)
    assert ev.total != pytest.approx(sel.objective.total, rel=1e-6)


@pytest.mark.parametrize("optimizer", ["greedy", "lazy", "stochastic"])
def test_greedy_baselines(optimizer):
    x, q, _ = corpus(n=600)
    sel = datamask.select(x, q, count=30, optimizer=optimizer)
    assert len(np.unique(sel.ids)) == 30
    assert sel.optimizer == optimizer


@needs_program
def test_demo_corpus_matches_the_programs_demo(tmp_path):
    # datamask-select --demo generates its corpus from --seed
    out = tmp_path / "out.npy"
    subprocess.run([PROGRAM, "--demo", "--ratio", "0.02", "--seed", "4", "--iterations", "10", "--out", str(out),
                    "--quiet"], check=True, stdout=subprocess.DEVNULL)
    x, q = datamask.demo_corpus(4)
    assert x.shape == (20000, 32) and x.dtype == np.float32 and q.shape == (20000,)
    sel = datamask.select(x, q, ratio=0.02, seed=4, iterations=10)
    np.testing.assert_array_equal(sel.ids, np.load(out))


def test_every_option_of_the_program_is_a_keyword():
    opts = datamask.options()
    assert opts["lam"].default == 0.5 and opts["steps"].default == 1000
    if not (PROGRAM and os.access(PROGRAM, os.X_OK)):
        pytest.skip("datamask-select not built: set DATAMASK_SELECT to its path")
    text = subprocess.run([PROGRAM, "--help"], check=True, stdout=subprocess.PIPE, text=True).stdout
    program_only = {"help", "version", "embeddings", "quality", "ids", "out", "report", "log", "plot", "checkpoint",
                    "checkpoint-every", "resume", "quiet", "demo", "no-polish",
                    # which blocks one process of a spread run takes: not a setting of the selection
                    "shard", "parts", "plan",
                    # a graph file written by the user's pipeline: the program's input, not a keyword
                    "graph"}
    named = {"objective", "objective-weights", "quality-weights", "optimizer", "block-size", "neighbors", "certify"}
    names = re.findall(r"^\s+--([a-z0-9-]+)", text, flags=re.M)
    assert len(names) > 40
    for name in names:
        if name in program_only or name in named:
            continue
        key = "lam" if name == "lambda" else name.replace("-", "_")
        assert key in opts, f"--{name} has no keyword in datamask.select"
    block_size_help = text.split("--block-size", 1)[1].split("\n  --", 1)[0]
    assert f"default {datamask._core.default_block_size}" in " ".join(block_size_help.split())


# (program arguments after the inputs, keywords, a change to the data) -> the same problem text
MESSAGES = {
    "NaN": ([], {}, "nan"),
    "duplicate ids": ([], {}, "dup"),
    "ratio": (["--ratio", "0"], dict(ratio=0.0), None),
    "lambda": (["--lambda", "2"], dict(lam=2.0), None),
    "count": (["--count", "101"], dict(count=101), None),
}


@needs_program
@pytest.mark.parametrize("case", sorted(MESSAGES))
def test_bad_input_messages_are_the_programs(tmp_path, case):
    args, kw, change = MESSAGES[case]
    rng = np.random.default_rng(0)
    x, q, ids = rng.standard_normal((100, 4)).astype(np.float32), rng.random(100), np.arange(100)
    if change == "nan":
        x[3, 1] = np.nan
    if change == "dup":
        ids[99] = 5
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "q.npy", q)
    np.save(tmp_path / "ids.npy", ids)
    run = subprocess.run([PROGRAM, "--embeddings", str(tmp_path / "x.npy"), "--quality", str(tmp_path / "q.npy"),
                          "--ids", str(tmp_path / "ids.npy"), "--out", str(tmp_path / "out.npy"), *args],
                         stderr=subprocess.PIPE, text=True)
    assert run.returncode == 2
    program_problem = run.stderr.strip().split(": ", 2)[2].replace(" (see --help)", "")
    with pytest.raises(datamask.InvalidInput) as e:
        datamask.select(x, q, ids=ids, **kw)
    assert str(e.value).split(": ", 1)[1] == program_problem


def block_scales(sel):
    return [[t["scale"] for t in b["objective"]["terms"].values()] for b in sel.blocks if b["selected"] > 0]


def test_a_corpus_in_blocks_is_calibrated_once():
    # One f for a corpus: every block divides by the scales the corpus in one block has.
    x, q, ids = corpus(n=3000)
    kw = dict(ids=ids, ratio=0.1, objective=["pairwise", "disf"], iterations=20)
    one = block_scales(datamask.select(x, q, block_size=3000, **kw))
    assert len(one) == 1
    blocks = block_scales(datamask.select(x, q, block_size=1000, **kw))
    assert len(blocks) == 3 and all(s == one[0] for s in blocks)
    own = block_scales(datamask.select(x, q, block_size=1000, scaling="calibrated-per-block", **kw))
    assert all(s != one[0] for s in own)


def test_a_constant_term_is_marked_and_scaled_by_one():
    # DiSF of two rows is the same for every pair: its calibrated std is rounding noise.
    x = np.random.default_rng(3).standard_normal((3, 8)).astype(np.float32)
    with pytest.warns(UserWarning, match="disf term is constant"):
        sel = datamask.select(x, np.array([0.468, 0.558, 0.3]), count=2, objective="disf")
    disf = next(t for t in sel.objective.terms if t.name == "disf")
    assert disf.constant and disf.scale == 1.0
    assert sorted(sel.ids.tolist()) == [0, 1]
