#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of datamask-select's facility location on a kNN graph (--neighbors, --graph,
--knn-build).

    knn_test.py PROGRAM TEST_NAME

The graph and the objective are recomputed here from their definitions in double precision
(brute-force neighbours, the best selected neighbour per item), independently of the library.
"""
import array
import json
import math
import os
import random
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_test as ct  # noqa: E402  (the corpus, .npy writers and runners)


def cosine_rows(rows):
    return [ct.unit(r) for r in rows]


def brute_graph(rows, k):
    """Each row's k most similar rows under cosine (itself included), ties to the smaller row."""
    u = cosine_rows(rows)
    graph = []
    for v in range(len(u)):
        sims = [(sum(a * b for a, b in zip(u[v], u[j])), j) for j in range(len(u))]
        sims.sort(key=lambda t: (-t[0], t[1]))
        graph.append(sims[:k])
    return graph


def ref_sparse(graph, sel):
    s = set(sel)
    tot = 0.0
    for row in graph:
        best = 0.0
        for sim, j in row:
            if j in s:
                best = max(best, sim)
                break
        tot += best
    return tot / len(graph)


def write_graph(prefix, ids_rows, sims_rows, ids_descr="<i8", sims_descr="<f4", ids_shape=None, sims_shape=None):
    n, k = len(ids_rows), len(ids_rows[0])
    fmt = {"<i8": "q", "<f4": "f", "<f8": "d"}
    ids_flat = [x for r in ids_rows for x in r]
    sims_flat = [x for r in sims_rows for x in r]
    ct.write(prefix + ".ids.npy", ct.npy_bytes(ids_descr, ids_shape or (n, k),
                                                struct.pack("<%d%s" % (len(ids_flat), fmt[ids_descr]), *ids_flat)))
    ct.write(prefix + ".sims.npy", ct.npy_bytes(sims_descr, sims_shape or (n, k),
                                                 struct.pack("<%d%s" % (len(sims_flat), fmt[sims_descr]), *sims_flat)))


BASE = ["--lambda", "0", "--ratio", "0.1", "--objective", "facility", "--quiet"]


def selected_rows(ids, out):
    pos = {v: i for i, v in enumerate(ids)}
    return [pos[v] for v in ct.read_npy_ids(out)]


def test_neighbors():
    rows, q, ids, e, qf, idf = ct.standard_files(n=300, d=8)
    # K = n: sparse facility location is dense facility location (positive maxima here).
    ct.run(["--embeddings", e, "--ids", idf, "--neighbors", "300", "--optimizer", "lazy", "--out", ct.path("a.npy"),
            "--report", ct.path("a.json")] + BASE)
    rep = json.load(open(ct.path("a.json")))
    sel = selected_rows(ids, ct.path("a.npy"))
    got = rep["blocks"][0]["objective"]["terms"]["facility_knn"]["raw"]
    assert ct.close(got, ct.ref_facility(rows, sel, range(300)), rel=1e-5), got
    # K = 8 with the default optimizer: auto takes lazy greedy (facility location alone); the
    # report records K, how the graph was made and its build time.
    p = ct.run(["--embeddings", e, "--ids", idf, "--neighbors", "8", "--out", ct.path("b.npy"), "--report",
                ct.path("b.json")] + BASE[:-1])
    assert "optimizer: lazy" in p.stderr, p.stderr
    assert "kNN graph of block 1/1: 300 items x K = 8" in p.stderr, p.stderr
    rep = json.load(open(ct.path("b.json")))
    assert rep["configuration"]["optimizer"] == "lazy"
    assert rep["configuration"]["neighbors"] == 8
    built = rep["configuration"]["graph-built"]
    assert built["neighbors"] == 8 and "exact" in built["source"] and built["bytes"] == 300 * 8 * 12, built
    assert "graph" in rep["total"]["seconds"]
    sel = selected_rows(ids, ct.path("b.npy"))
    got = rep["blocks"][0]["objective"]["terms"]["facility_knn"]["raw"]
    assert ct.close(got, ref_sparse(brute_graph(rows, 8), sel), rel=1e-5), got
    # A block smaller than K: K is capped at the block's size.
    ct.run(["--embeddings", e, "--ids", idf, "--neighbors", "1000", "--optimizer", "greedy", "--out",
            ct.path("c.npy"), "--report", ct.path("c.json")] + BASE)
    assert sorted(ct.read_npy_ids(ct.path("c.npy"))) == sorted(ct.read_npy_ids(ct.path("a.npy")))
    assert json.load(open(ct.path("c.json")))["configuration"]["graph-built"]["neighbors"] == 300


def test_graph():
    rows, q, ids, e, qf, idf = ct.standard_files(n=300, d=8)
    graph = brute_graph(rows, 8)
    # Rows written in reverse order: the program sorts them.
    write_graph(ct.path("g"), [[j for _, j in r][::-1] for r in graph], [[s for s, _ in r][::-1] for r in graph])
    ct.run(["--embeddings", e, "--ids", idf, "--graph", ct.path("g"), "--optimizer", "continuous", "--out",
            ct.path("g.npy"), "--report", ct.path("g.json")] + BASE)
    rep = json.load(open(ct.path("g.json")))
    assert rep["configuration"]["optimizer"] == "continuous"
    built = rep["configuration"]["graph-built"]
    assert built["neighbors"] == 8 and "loaded from" in built["source"], built
    sel = selected_rows(ids, ct.path("g.npy"))
    got = rep["blocks"][0]["objective"]["terms"]["facility_knn"]["raw"]
    assert ct.close(got, ref_sparse(graph, sel), rel=1e-6), got
    # Several blocks: refused (the graph's rows are the corpus's).
    ct.expect_bad(["--embeddings", e, "--ids", idf, "--graph", ct.path("g"), "--block-size", "100"] + BASE,
                  ["--graph", "one block"])


def test_bad_graph():
    rows, q, ids, e, qf, idf = ct.standard_files(n=50, d=4)
    good = brute_graph(rows, 3)
    gi = [[j for _, j in r] for r in good]
    gs = [[s for s, _ in r] for r in good]
    args = ["--embeddings", e, "--ids", idf, "--graph", ct.path("bad")] + BASE

    def bad(names, ids_rows=gi, sims_rows=gs, **kw):
        write_graph(ct.path("bad"), ids_rows, sims_rows, **kw)
        ct.expect_bad(args, names)

    out_of_range = [r[:] for r in gi]
    out_of_range[7][1] = 50
    bad(["bad.ids.npy", "row 7", "outside [0, 50)"], out_of_range)
    negative = [r[:] for r in gi]
    negative[3][2] = -1
    bad(["bad.ids.npy", "holds id -1"], negative)
    repeated = [r[:] for r in gi]
    repeated[4][2] = repeated[4][0]
    bad(["bad.ids.npy", "twice"], repeated)
    for value in (float("nan"), float("inf")):
        nonfinite = [r[:] for r in gs]
        nonfinite[9][0] = value
        bad(["bad.sims.npy", "row 9", "finite"], gi, nonfinite)
    bad(["bad.ids.npy", "rows, expected 50"], gi[:49], gs[:49])
    bad(["bad.sims.npy", "must match"], gi, [r[:2] for r in gs], sims_shape=(50, 2))
    bad(["bad.ids.npy", "2-D"], gi, gs, ids_shape=(150,))
    bad(["bad.ids.npy", "dtype '<f8' for graph ids", "int64"], [[float(x) for x in r] for r in gi], gs, ids_descr="<f8")
    write_graph(ct.path("bad"), gi, gs)
    os.remove(ct.path("bad.sims.npy"))
    ct.expect_bad(args, ["bad.sims.npy"])
    # Option combinations.
    write_graph(ct.path("bad"), gi, gs)
    ct.expect_bad(args + ["--neighbors", "4"], ["--neighbors or --graph"])
    ct.expect_bad(["--embeddings", e, "--ids", idf, "--neighbors", "4", "--lambda", "0", "--quiet"],
                  ["--neighbors", "no --objective facility"])
    ct.expect_bad(["--embeddings", e, "--ids", idf, "--neighbors", "0"] + BASE, ["--neighbors"])


def test_resume():
    """A block finished in an earlier run keeps its graph record: the resumed report equals the first."""
    rows, q, ids, e, qf, idf = ct.standard_files(n=300, d=8)
    args = ["--embeddings", e, "--ids", idf, "--neighbors", "8", "--block-size", "150", "--checkpoint",
            ct.path("ckpt")] + BASE
    ct.run(args + ["--out", ct.path("a.npy"), "--report", ct.path("a.json")])
    ct.run(args + ["--resume", "--out", ct.path("b.npy"), "--report", ct.path("b.json")])
    first, resumed = (json.load(open(ct.path(f))) for f in ("a.json", "b.json"))
    assert len(first["blocks"]) == 2 and all(b["from_checkpoint"] for b in resumed["blocks"]), resumed["blocks"]
    assert [b["graph"] for b in resumed["blocks"]] == [b["graph"] for b in first["blocks"]], resumed["blocks"]
    assert resumed["configuration"]["graph-built"] == first["configuration"]["graph-built"]
    g = first["blocks"][0]["graph"]
    assert g["neighbors"] == 8 and "exact" in g["source"] and g["bytes"] == first["blocks"][0]["items"] * 8 * 12, g


def test_knn_build():
    rows, q, ids, e, qf, idf = ct.standard_files(n=300, d=8)
    # Clustered, every cluster probed: the exact graph, so the same selection as the exact build.
    common = ["--embeddings", e, "--ids", idf, "--neighbors", "8", "--optimizer", "lazy"] + BASE
    ct.run(common + ["--knn-build", "exact", "--out", ct.path("x.npy"), "--report", ct.path("x.json")])
    ct.run(common + ["--knn-build", "clustered", "--knn-clusters", "6", "--knn-probes", "6", "--out",
                     ct.path("c.npy"), "--report", ct.path("c.json")])
    assert ct.read_npy_ids(ct.path("c.npy")) == ct.read_npy_ids(ct.path("x.npy"))
    rep = json.load(open(ct.path("c.json")))
    conf = rep["configuration"]
    assert conf["knn-build"] == "clustered" and conf["knn-clusters"] == 6 and conf["knn-probes"] == 6, conf
    source = conf["graph-built"]["source"]
    assert source.startswith("clustered") and "C = 6, P = 6" in source and "recall@K 1 " in source, source
    assert json.load(open(ct.path("x.json")))["configuration"]["graph-built"]["source"].startswith("exact")
    # The defaults (auto: exact at this size); P below C: an approximate graph, its recall reported.
    ct.run(["--embeddings", e, "--ids", idf, "--neighbors", "8", "--out", ct.path("a.npy"), "--report",
            ct.path("a.json")] + BASE)
    conf = json.load(open(ct.path("a.json")))["configuration"]
    assert conf["knn-build"] == "auto" and conf["graph-built"]["source"].startswith("exact"), conf
    ct.run(common + ["--knn-build", "clustered", "--knn-clusters", "20", "--knn-probes", "2", "--out",
                     ct.path("p.npy"), "--report", ct.path("p.json")])
    source = json.load(open(ct.path("p.json")))["configuration"]["graph-built"]["source"]
    assert "C = 20, P = 2" in source and "recall@K" in source, source
    # Without --neighbors the settings are refused, and left out of the configuration.
    ct.run(["--embeddings", e, "--ids", idf, "--optimizer", "lazy", "--out", ct.path("d.npy"), "--report",
            ct.path("d.json")] + BASE)
    assert not any(k.startswith("knn-") for k in json.load(open(ct.path("d.json")))["configuration"])
    plain = ["--embeddings", e, "--ids", idf] + BASE
    ct.expect_bad(plain + ["--knn-build", "clustered"], ["--knn-build", "no --neighbors"])
    ct.expect_bad(common + ["--knn-build", "exact", "--knn-probes", "3"], ["--knn-probes", "--knn-build is exact"])
    ct.expect_bad(common + ["--knn-build", "fast"], ["--knn-build"])
    ct.expect_bad(common + ["--knn-clusters", "-1"], ["--knn-clusters"])
    ct.expect_bad(common + ["--knn-probes", "x"], ["--knn-probes"])


def random_embeddings(name, n, d, seed=5):
    """n x d uniform float32 rows, written fast (the graph-build scenarios need tens of thousands)."""
    rnd = random.Random(seed)
    return ct.write(ct.path(name), ct.npy_bytes("<f4", (n, d), array.array("f", [rnd.random() - 0.5 for _ in range(n * d)]).tobytes()))


# The exact graph of 40,000 x 64 rows, K = 32: about 10 s on a 2-core machine.
BUILD = ["--lambda", "0", "--objective", "facility", "--neighbors", "32", "--knn-build", "exact", "--ratio", "0.1"]


def test_build_interrupt():
    """The graph's build reports progress (rows) and stops within about a second of SIGINT."""
    e = random_embeddings("big.npy", 40000, 64)
    proc = subprocess.Popen([ct.PROG, "--embeddings", e, "--out", ct.path("o.npy")] + BUILD, stderr=subprocess.PIPE,
                            text=True)
    seen = []
    try:
        for line in proc.stderr:  # the first progress line of the build; main's build printed none
            seen.append(line)
            if "rows" in line and "kNN graph of block" in line:
                break
            assert "kNN graph of block 1/1:" not in line, "the graph was built without a progress line:\n" + "".join(seen)
        else:
            raise AssertionError("no progress line from the graph's build:\n" + "".join(seen))
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        rest = proc.stderr.read()
        proc.wait(timeout=60)
        waited = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (proc.returncode, "".join(seen) + rest)
    assert "kNN graph of block 1/1:" not in rest, "the build ran to its end:\n" + rest  # stopped inside it
    assert waited < 5.0, "the build stopped %.1f s after SIGINT" % waited
    assert not os.path.exists(ct.path("o.npy"))


def test_build_rate():
    """The iterations' rate leaves the graph's build out: it matches the block's optimising time."""
    e = random_embeddings("mid.npy", 20000, 64)
    # The iterations alone (no polish: its time is not the iterations').
    p = ct.run(["--embeddings", e, "--optimizer", "continuous", "--no-polish", "--report", ct.path("r.json"),
                "--out", ct.path("o.npy")] + BUILD)
    last = [l for l in p.stderr.splitlines() if l.startswith("progress: 100/100 iterations")]
    assert last, p.stderr
    rate = float(last[0].split(", ")[-2].split()[0])
    block = json.load(open(ct.path("r.json")))["blocks"][0]
    measured = 100 / block["seconds"]["optimize"]
    with_graph = 100 / (block["seconds"]["optimize"] + block["graph"]["seconds"])
    # Nearer the optimising rate than the rate a clock started before the build would give (a
    # ratio, not a fixed margin: on a loaded machine the optimising time grows with the build's).
    assert abs(math.log(rate / measured)) < abs(math.log(rate / with_graph)), (rate, measured, with_graph, p.stderr)
    graph = [l for l in p.stderr.splitlines() if "rows" in l and "kNN graph of block" in l]
    assert graph and "20000/20000 rows (100%)" in graph[-1], p.stderr


if __name__ == "__main__":
    ct.run_scenario(globals(), "dmknn-")
