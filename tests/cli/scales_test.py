#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The scales of f as datamask-select reports them (Python standard library only).

    scales_test.py PROGRAM TEST_NAME

constant_term: a term that calibration finds constant up to rounding gets scale 1 and is marked
so (report field and a warning), instead of a std of rounding noise that decides the selection.
corpus_calibration: a corpus in several blocks (or shards) is calibrated once, so every block
divides by the scales the same corpus in one block has, bit for bit; --scaling
calibrated-per-block keeps each block's own.
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_test as c  # noqa: E402  (its .npy writers, corpus and runner)


def report(path):
    with open(path) as f:
        return json.load(f)


def block_scales(rep):
    return [[t["scale"] for t in b["objective"]["terms"].values()] for b in rep["blocks"] if b["selected"] > 0]


def test_constant_term():
    # Two rows of any data are perfectly correlated, so DiSF of every 2-subset is the same
    # -(1/10^4) * d(d - 1): its std over the calibration subsets is rounding noise.
    rnd = random.Random(3)
    rows = [[rnd.gauss(0, 1) for _ in range(8)] for _ in range(3)]
    e = c.npy_f32(c.path("e.npy"), rows)
    q = [0.468, 0.558, 0.3]
    qf = c.npy_vec(c.path("q.npy"), q, "<f8")
    for opt in ("continuous", "pg", "greedy"):
        out, rep = c.path("sel-%s.txt" % opt), c.path("rep-%s.json" % opt)
        p = c.run(["--embeddings", e, "--quality", qf, "--count", "2", "--objective", "disf", "--optimizer", opt,
                   "--out", out, "--report", rep])
        terms = report(rep)["total"]["objective"]["terms"]
        assert terms["disf"]["constant"] is True and terms["disf"]["scale"] == 1.0, (opt, terms)
        assert terms["quality"]["constant"] is False and terms["quality"]["scale"] != 1.0, (opt, terms)
        assert "warning: the disf term is constant" in p.stderr, p.stderr
        # DiSF cannot tell the subsets apart, so quality decides: the top 2 by quality.
        assert sorted(c.read_text_ids(out)) == [0, 1], (opt, c.read_text_ids(out))
    # A term that varies is not marked, and nothing is said.
    rows, qs, ids, e, qf, idf = c.standard_files(600, 16)
    p = c.run(["--embeddings", e, "--quality", qf, "--count", "60", "--objective", "disf", "--report", c.path("r.json")])
    assert all(t["constant"] is False for t in report(c.path("r.json"))["total"]["objective"]["terms"].values())
    assert "constant" not in p.stderr, p.stderr
    # Quality is computed in double: scores with a large common offset still vary.
    qf = c.npy_vec(c.path("q-offset.npy"), [1e4 + 0.01 * x for x in qs], "<f8")
    c.run(["--embeddings", e, "--quality", qf, "--count", "60", "--objective", "disf", "--report", c.path("r.json")])
    assert report(c.path("r.json"))["total"]["objective"]["terms"]["quality"]["constant"] is False


def test_corpus_calibration():
    rows, q, ids, e, qf, idf = c.standard_files(3000, 16)
    base = ["--embeddings", e, "--quality", qf, "--ids", idf, "--objective", "pairwise", "--objective", "disf",
            "--ratio", "0.1", "--quiet"]
    one = report_of(base + ["--block-size", "3000"], "one.json")
    assert len(one["blocks"]) == 1
    scales = block_scales(one)[0]
    for size in ("1000", "700"):
        rep = report_of(base + ["--block-size", size], "b%s.json" % size)
        assert len(rep["blocks"]) > 1
        assert all(s == scales for s in block_scales(rep)), (size, block_scales(rep), scales)
        per_block = block_scales(report_of(base + ["--block-size", size, "--scaling", "calibrated-per-block"],
                                           "p%s.json" % size))
        assert all(s != scales for s in per_block), per_block
    # Shards calibrate the same sample: the merged report holds the same scales.
    parts = c.path("parts")
    for i in (0, 1):
        c.run(base + ["--block-size", "700", "--shard", "%d/2" % i, "--parts", parts])
    c.run(["merge", "--report", c.path("merged.json"), parts])
    assert all(s == scales for s in block_scales(report(c.path("merged.json"))))
    # The policy gradient and a greedy baseline optimise the same f.
    for opt in (["pg", "--steps", "20"], ["stochastic"]):
        rep = report_of(base + ["--block-size", "700", "--optimizer"] + opt, "o-%s.json" % opt[0])
        assert all(s == scales for s in block_scales(rep)), (opt, block_scales(rep))


def report_of(args, name):
    c.run(args + ["--report", c.path(name)])
    return report(c.path(name))


if __name__ == "__main__":
    c.run_scenario(globals(), "dmscales-")
