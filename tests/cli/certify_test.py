#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of datamask-select --certify: the report's certificates per block and in
total, the progress and summary lines, and that checkpoints and merged parts keep them.

    certify_test.py PROGRAM TEST_NAME [CERTIFY_REFERENCE]

The checks that do not need the library are recomputed here: the quality-only bound (the mean of
the S best scores), the totals over blocks (the selection-weighted sums) and the certified share's
formula; the `library` scenario compares the program's numbers with datamask::certify's
(certify_reference.cpp).
"""
import json
import math
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_test as ct  # noqa: E402  (the corpus, .npy writers and runners)

FIELDS = ["method", "bound", "gap", "certified_share", "random_mean", "seconds", "random_seconds"]


def files(n=1500, d=12, seed=3):
    rows, q, ids = ct.make_corpus(n, d, seed=seed)
    e = ct.npy_f32(ct.path("emb.npy"), rows)
    qf = ct.npy_vec(ct.path("q.npy"), q)
    idf = ct.npy_vec(ct.path("ids.npy"), ids, "<i8")
    return rows, q, ids, ["--embeddings", e, "--quality", qf, "--ids", idf]


def report(name):
    with open(ct.path(name)) as f:
        return json.load(f)


def check_certified(c, f, method=None):
    """A certificate with a bound: every field, finite, bound >= f, gap = bound - f >= 0, and the
    share by its formula."""
    assert all(k in c for k in FIELDS), c
    if method is not None:
        assert c["method"] == method, c
    for k in ["bound", "gap", "certified_share", "random_mean", "seconds", "random_seconds"]:
        assert isinstance(c[k], float) and math.isfinite(c[k]), (k, c)
    assert c["gap"] >= 0.0 and c["bound"] >= f, (c, f)
    assert ct.close(c["gap"], c["bound"] - f, 1e-12, 1e-12), (c, f)
    share = (f - c["random_mean"]) / (c["bound"] - c["random_mean"])
    assert ct.close(c["certified_share"], share, 1e-12, 1e-12), (c, share)
    assert 0.0 < c["certified_share"] <= 1.0, c
    assert "reason" not in c, c


def check_totals(rep):
    """The total certificate: the blocks' numbers weighted by their share of the selection, as the
    total objective is."""
    blocks = [b for b in rep["blocks"] if b["selected"] > 0]
    s = sum(b["selected"] for b in blocks)
    tot = rep["total"]["certificate"]
    f = rep["total"]["objective"]["total"]
    assert ct.close(f, sum(b["selected"] / s * b["objective"]["total"] for b in blocks), 1e-9, 1e-12)
    bound = sum(b["selected"] / s * b["certificate"]["bound"] for b in blocks)
    rnd = sum(b["selected"] / s * b["certificate"]["random_mean"] for b in blocks)
    assert ct.close(tot["bound"], bound, 1e-12, 1e-12), (tot, bound)
    assert ct.close(tot["random_mean"], rnd, 1e-12, 1e-12), (tot, rnd)
    assert ct.close(tot["seconds"], sum(b["certificate"]["seconds"] for b in blocks), 1e-9, 1e-12)
    assert ct.close(tot["random_seconds"], sum(b["certificate"]["random_seconds"] for b in blocks), 1e-9, 1e-12)
    check_certified(tot, f, blocks[0]["certificate"]["method"])


def without_seconds(rep):
    """A report's certificates and objectives, less their seconds (a rerun's clock differs)."""
    out = []
    for b in rep["blocks"] + [rep["total"]]:
        c = dict(b.get("certificate") or {})
        c.pop("seconds", None)
        c.pop("random_seconds", None)
        out.append((b["objective"], c))
    return out


def test_fields():
    """Pairwise + quality over two blocks (the continuous learner): every field per block and in
    total, the progress and summary lines; the selection is that of a run without --certify."""
    rows, q, ids, inputs = files()
    base = inputs + ["--ratio", "0.1", "--block-size", "800", "--optimizer", "continuous", "--iterations", "40"]
    plain = ct.run(base + ["--quiet", "--out", ct.path("a.npy"), "--report", ct.path("a.json")])
    p = ct.run(base + ["--certify", "--out", ct.path("c.npy"), "--report", ct.path("c.json")])
    assert ct.read_npy_ids(ct.path("a.npy")) == ct.read_npy_ids(ct.path("c.npy")), "--certify changed the selection"
    a, rep = report("a.json"), report("c.json")
    assert "certificate" not in a["total"] and all("certificate" not in b for b in a["blocks"])
    assert "certify" not in a["total"]["seconds"]
    assert [b["objective"] for b in a["blocks"]] == [b["objective"] for b in rep["blocks"]]
    assert rep["configuration"]["certify"] is True and "certify" not in a["configuration"]
    assert len(rep["blocks"]) == 2, rep["blocks"]
    for b in rep["blocks"]:
        check_certified(b["certificate"], b["objective"]["total"], "frank-wolfe")
    check_totals(rep)
    assert rep["total"]["seconds"]["certify"] == rep["total"]["certificate"]["seconds"]
    for b in range(2):
        assert "certificate of block %d/2: certified share " % (b + 1) in p.stderr, p.stderr
    share = 100 * rep["total"]["certificate"]["certified_share"]
    assert "certified share %.4f%%" % share in p.stdout, p.stdout
    assert "certified share" not in plain.stdout, plain.stdout


def test_quality_only():
    """lambda = 1: the bound is exact, the S best quality scores over the scale (computed here)."""
    rows, q, ids, inputs = files(600, 8)
    ct.run(inputs + ["--ratio", "0.1", "--lambda", "1", "--certify", "--quiet", "--report", ct.path("r.json")])
    rep = report("r.json")
    b = rep["blocks"][0]
    term = b["objective"]["terms"]["quality"]
    s = b["selected"]
    best = sum(sorted(q, reverse=True)[:s]) / s
    c = b["certificate"]
    check_certified(c, b["objective"]["total"], "top-S")
    assert ct.close(c["bound"], term["weight"] * best / term["scale"], 1e-12, 1e-12), (c, term, best)
    assert c["gap"] < 1e-9 and c["certified_share"] > 1 - 1e-9, c  # the top S is the optimum


def test_facility():
    """Facility location + quality, dense and on a kNN graph (lazy greedy): the Lagrangian dual."""
    rows, q, ids, inputs = files(700, 8)
    for extra in [[], ["--neighbors", "16"]]:
        ct.run(inputs + ["--ratio", "0.1", "--objective", "facility", "--certify", "--quiet", "--report",
                         ct.path("r.json")] + extra)
        rep = report("r.json")
        assert rep["configuration"]["optimizer"] == "lazy"
        b = rep["blocks"][0]
        check_certified(b["certificate"], b["objective"]["total"], "lagrangian-dual")
        assert rep["total"]["certificate"] == b["certificate"]


def test_disf():
    """DiSF has no bound: "no certificate", in the report (method none, numbers null, the reason),
    on the progress and summary lines; alone or in a mix."""
    rows, q, ids, inputs = files(600, 8)
    for objective in [["--objective", "disf"], ["--objective", "pairwise", "--objective", "disf"]]:
        p = ct.run(inputs + objective + ["--ratio", "0.1", "--block-size", "400", "--optimizer", "continuous",
                                         "--iterations", "20", "--certify", "--report", ct.path("r.json")])
        rep = report("r.json")
        for c in [b["certificate"] for b in rep["blocks"] if b["selected"] > 0] + [rep["total"]["certificate"]]:
            assert c["method"] == "none", c
            assert c["bound"] is None and c["gap"] is None and c["certified_share"] is None, c
            assert c["random_mean"] is None and c["random_seconds"] < 1e-3, c  # no share: no subsets drawn
            assert "disf" in c["reason"] and "no certificate" in c["reason"], c
        assert "no certificate" in p.stdout and "no certificate" in p.stderr, (p.stdout, p.stderr)
        assert "certified share" not in p.stdout, p.stdout


def test_library():
    """The program's certificate of its --demo selection is datamask::certify's for the same f,
    scales, selection and budget (certify_reference.cpp; --certify-steps 4: certify_settings'
    iterations)."""
    ref = os.path.abspath(sys.argv[3])
    for lam, steps in [("0.5", []), ("0.2", []), ("0.5", ["--certify-steps", "4"])]:
        ct.run(["--demo", "--lambda", lam, "--iterations", "30", "--certify", "--quiet", "--out", ct.path("s.txt"),
                "--report", ct.path("r.json")] + steps)
        rep = report("r.json")
        b = rep["blocks"][0]
        t = b["objective"]["terms"]
        got = subprocess.run([ref, ct.path("s.txt"), lam, repr(t["quality"]["scale"]), repr(t["pairwise"]["scale"])]
                             + steps[1:], stdout=subprocess.PIPE, text=True, check=True).stdout.split()
        bound, rnd, share = (float(x) for x in got)
        c = b["certificate"]
        check_certified(c, b["objective"]["total"], "frank-wolfe")
        assert ct.close(c["bound"], bound, 1e-12, 1e-12), (c, bound)
        assert ct.close(c["random_mean"], rnd, 1e-12, 1e-12), (c, rnd)
        assert ct.close(c["certified_share"], share, 1e-9, 1e-12), (c, share)


def test_budget():
    """--certify-steps and --certify-memory: the dual's fewer steps give a bound no tighter (the
    method is deterministic, so its first steps are the default run's); without room for the
    dense pairs every step recomputes them, a bound as valid. The configuration records both
    (each can change the certificate's digits), only with --certify; both are refused without
    it."""
    rows, q, ids, inputs = files(700, 8)
    base = inputs + ["--ratio", "0.1", "--objective", "facility", "--quiet"]
    certs = {}
    for name, extra in [("default", []), ("steps", ["--certify-steps", "3"]), ("memory", ["--certify-memory", "0"]),
                        ("knn", ["--neighbors", "16"]), ("knn-steps", ["--neighbors", "16", "--certify-steps", "3"])]:
        ct.run(base + ["--certify", "--report", ct.path("r.json")] + extra)
        rep = report("r.json")
        b = rep["blocks"][0]
        check_certified(b["certificate"], b["objective"]["total"], "lagrangian-dual")
        certs[name] = b["certificate"]
        assert rep["configuration"]["certify-steps"] == (3 if "steps" in name else 0), rep["configuration"]
        assert rep["configuration"]["certify-memory"] == (0 if name == "memory" else 1024), rep["configuration"]
    for few, full in [("steps", "default"), ("knn-steps", "knn")]:
        assert certs[few]["bound"] >= certs[full]["bound"], (certs[few], certs[full])
    assert certs["steps"]["bound"] > certs["default"]["bound"], (certs["steps"], certs["default"])
    for option in [["--certify-steps", "3"], ["--certify-memory", "0"]]:
        p = ct.run(base + option, expect=2)
        assert option[0] in p.stderr and "--certify is asked for" in p.stderr, p.stderr
    p = ct.run(base + ["--certify", "--certify-steps", "-1"], expect=2)
    assert "--certify-steps" in p.stderr, p.stderr
    ct.run(base + ["--report", ct.path("plain.json")])
    plain = report("plain.json")["configuration"]
    assert "certify-steps" not in plain and "certify-memory" not in plain, plain  # only with --certify


def test_resume():
    """A resumed run reports the certificates of an uninterrupted one (finished blocks from their
    records, whose checksums cover them); a resume that changes --certify is refused."""
    rows, q, ids, inputs = files(2400, 12, seed=9)
    base = inputs + ["--ratio", "0.1", "--optimizer", "pg", "--rollouts", "32", "--steps", "200", "--min-active", "300",
                     "--block-size", "1000", "--certify", "--quiet"]
    ct.run(base + ["--out", ct.path("full.npy"), "--report", ct.path("full.json")])
    ck = ct.path("ck")
    proc = subprocess.Popen([ct.PROG] + base + ["--out", ct.path("r.npy"), "--report", ct.path("r.json"),
                                                "--checkpoint", ck, "--checkpoint-every", "25"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ct.wait_for(lambda: os.path.exists(os.path.join(ck, "block-1.snapshot")), proc)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 143, proc.returncode
    done0 = os.path.join(ck, "block-0.done")
    record = json.load(open(done0))
    assert "certificate" in record and "certificate" in record["exact"], record.keys()
    # A certificate changed by hand is refused (the record's checksum covers it).
    changed = dict(record, certificate=dict(record["certificate"], bound=1e9))
    with open(done0, "w") as f:
        json.dump(changed, f)
    p = ct.run(base + ["--checkpoint", ck, "--resume"], expect=2)
    assert "block-0.done" in p.stderr and "checksum" in p.stderr, p.stderr
    with open(done0, "w") as f:
        json.dump(record, f)
    p = ct.run([a for a in base if a != "--certify"] + ["--checkpoint", ck, "--resume"], expect=2)
    assert "refused" in p.stderr and "certify" in p.stderr, p.stderr
    ct.run(base + ["--out", ct.path("r.npy"), "--report", ct.path("r.json"), "--checkpoint", ck, "--resume"])
    assert ct.read_npy_ids(ct.path("r.npy")) == ct.read_npy_ids(ct.path("full.npy"))
    full, resumed = report("full.json"), report("r.json")
    assert resumed["blocks"][0]["from_checkpoint"]
    assert without_seconds(full) == without_seconds(resumed), (without_seconds(full), without_seconds(resumed))
    check_totals(resumed)


def test_merge():
    """Shards merged report the certificates of one process."""
    rows, q, ids, inputs = files(2000, 12, seed=5)
    base = inputs + ["--ratio", "0.1", "--block-size", "700", "--optimizer", "continuous", "--iterations", "30",
                     "--certify", "--quiet"]
    ct.run(base + ["--out", ct.path("one.npy"), "--report", ct.path("one.json")])
    parts = ct.path("parts")
    for i in range(2):
        ct.run(base + ["--shard", "%d/2" % i, "--parts", parts])
    ct.run(["merge", "--out", ct.path("m.npy"), "--report", ct.path("m.json"), parts])
    assert ct.read_npy_ids(ct.path("m.npy")) == ct.read_npy_ids(ct.path("one.npy"))
    one, merged = report("one.json"), report("m.json")
    assert len(one["blocks"]) >= 3, one["blocks"]
    assert without_seconds(one) == without_seconds(merged), (without_seconds(one), without_seconds(merged))
    check_totals(merged)


if __name__ == "__main__":
    ct.run_scenario(globals(), "dmcertify-")
