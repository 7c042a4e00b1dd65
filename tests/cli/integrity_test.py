#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of what datamask-select trusts and what it leaves behind: records changed by
hand are refused, concurrent runs leave one run's outputs, paths that are not UTF-8 work, and a
signal during the final write lets the set be written whole.

    integrity_test.py PROGRAM TEST_NAME
"""
import fcntl
import json
import os
import shutil
import signal
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_test as ct  # noqa: E402  (the corpus, .npy writers and runners)
import knn_test  # noqa: E402  (the graph writer)

# A greedy baseline: quick, and (stochastic) its selection depends on --seed.
GREEDY = ["--count", "40", "--optimizer", "stochastic", "--quiet", "--threads", "1"]


def corpus(n=400, seed=1, tag=""):
    rows, q, ids = ct.make_corpus(n, 8, seed=seed)
    e = ct.npy_f32(ct.path("emb%s.npy" % tag), rows)
    qf = ct.npy_vec(ct.path("q%s.npy" % tag), q)
    idf = ct.npy_vec(ct.path("ids%s.npy" % tag), ids, "<i8")
    return rows, ids, ["--embeddings", e, "--quality", qf, "--ids", idf]


def refused(args, names):
    p = ct.run(args, expect=2)
    for nm in names:
        assert nm in p.stderr, "'%s' not in: %s" % (nm, p.stderr)


def edit_json(file, change, **dump):
    doc = ct.parse_doc(open(file).read())
    change(doc)
    with open(file, "w") as f:
        json.dump(doc, f, **dump)


def test_damaged_records():
    """A part or a finished block's record changed by hand is refused (exit 2, naming the file):
    by its checksum, and on --resume or a shard run again by the ids of the block's items."""
    rows, ids, inputs = corpus()
    stranger = 7  # an id of no item (the corpus's ids are above 10**12)
    assert stranger not in ids
    # Parts: two shards of two blocks, merged.
    parts = ct.path("parts")
    for i in range(2):
        ct.run(inputs + GREEDY + ["--block-size", "200", "--shard", "%d/2" % i, "--parts", parts])
    part1 = os.path.join(parts, "part-00001-of-00002.json")
    ct.run(["merge", "--out", ct.path("m.npy"), parts])
    whole = open(part1).read()
    edit_json(part1, lambda d: None, indent=1)  # spacing is not content
    ct.run(["merge", "--out", ct.path("m2.npy"), parts])
    assert ct.read_npy_ids(ct.path("m2.npy")) == ct.read_npy_ids(ct.path("m.npy"))
    # The part's ids are in a .npy beside it, each block's checksum in its record.
    ids1 = part1[:-len(".json")] + ".ids.npy"
    with open(ids1, "rb") as f:
        ids_whole = f.read()
    start = 10 + struct.unpack("<H", ids_whole[8:10])[0]
    with open(ids1, "wb") as f:
        f.write(ids_whole[:start] + struct.pack("<q", stranger) + ids_whole[start + 8:])
    refused(["merge", "--out", ct.path("m3.npy"), parts], [ids1, "checksum"])
    assert not os.path.exists(ct.path("m3.npy"))
    # A shard run again reuses its finished part only if its picks are its blocks' items: the
    # checksum made to match is refused there too, where the corpus is at hand.
    def matching(d):
        first = d["blocks"][0]["selected"]
        with open(ids1, "rb") as f:
            data = f.read()[start:start + 8 * first]
        d["blocks"][0]["ids_checksum"] = "%016x" % ct.hash_bytes(data)
        ct.seal(d)
    edit_json(part1, matching)
    refused(inputs + GREEDY + ["--block-size", "200", "--shard", "1/2", "--parts", parts],
            [part1, "id %d is not an item of block" % stranger])
    with open(part1, "w") as f:
        f.write(whole)
    with open(ids1, "wb") as f:
        f.write(ids_whole)
    # A finished run's checkpoint (one block), resumed: an id changed in block-0.done is refused.
    ck = ct.path("ck")
    run_ck = inputs + GREEDY + ["--checkpoint", ck, "--out", ct.path("c.npy")]
    ct.run(run_ck)
    done = os.path.join(ck, "block-0.done")
    record = open(done).read()
    edit_json(done, lambda d: d["ids"].__setitem__(0, stranger))
    refused(run_ck + ["--resume"], [done, "checksum"])
    # A record whose checksum matches but whose ids are not the block's items: the id changed and
    # the checksum made to match, or the same block (same size and quota) of a run on other ids.
    edit_json(done, lambda d: ct.seal(d))
    refused(run_ck + ["--resume"], [done, "id %d is not an item of block 0" % stranger])
    _, other_ids, other_inputs = corpus(seed=2, tag="2")
    assert not set(other_ids) & set(ids)
    ck2 = ct.path("ck2")
    ct.run(other_inputs + GREEDY + ["--checkpoint", ck2, "--out", ct.path("c2.npy")])
    shutil.copyfile(os.path.join(ck2, "block-0.done"), done)
    refused(run_ck + ["--resume"], [done, "is not an item of block 0"])
    # The record as written resumes to the run's selection.
    with open(done, "w") as f:
        f.write(record)
    ct.run(run_ck + ["--resume", "--out", ct.path("r.npy")])
    assert ct.read_npy_ids(ct.path("r.npy")) == ct.read_npy_ids(ct.path("c.npy"))


def test_concurrent_outputs():
    """Runs of four seeds writing the same --out and --report at once, many times: the two files
    left are always one run's (the report's seed selects the ids in --out)."""
    _, _, inputs = corpus(300)
    base = [ct.PROG] + inputs + GREEDY
    expected = {}
    for seed in range(1, 5):
        ct.run(inputs + GREEDY + ["--seed", str(seed), "--out", ct.path("ref%d.npy" % seed)])
        expected[seed] = ct.read_npy_ids(ct.path("ref%d.npy" % seed))
    assert len({tuple(v) for v in expected.values()}) == 4, "the seeds should select differently"
    out, rep = ct.path("sel.npy"), ct.path("rep.json")
    mixed = 0
    rounds = 80
    for _ in range(rounds):
        procs = [subprocess.Popen(base + ["--seed", str(seed), "--out", out, "--report", rep],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for seed in range(1, 5)]
        for p in procs:
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
        seed = json.load(open(rep))["configuration"]["seed"]
        mixed += ct.read_npy_ids(out) != expected[seed]
    assert mixed == 0, "%d of %d rounds left --out of one run and --report of another" % (mixed, rounds)
    assert sorted(os.listdir(ct.TMP)) == sorted(["emb.npy", "q.npy", "ids.npy", "rep.json", "sel.npy"] +
                                                ["ref%d.npy" % s for s in range(1, 5)]), os.listdir(ct.TMP)


def test_nonutf8_paths():
    """Paths that are not UTF-8 (an output, an input, a graph, the parts' folder) work; the JSON
    documents give them with \\xNN for each byte that is not UTF-8."""
    def run(args):  # the program prints the paths as given
        return ct.run(args, errors="surrogateescape")

    bad = os.fsdecode(b"\xe9")  # one byte that is not UTF-8 (Python holds it as a surrogate escape)
    rows, ids, inputs = corpus(300)
    shutil.copyfile(ct.path("emb.npy"), ct.path("emb-%s.npy" % bad))
    inputs[1] = ct.path("emb-%s.npy" % bad)
    run(inputs + GREEDY + ["--out", ct.path("plain.npy")])
    out = ct.path("sel-%s.npy" % bad)
    run(inputs + GREEDY + ["--out", out, "--report", ct.path("rep.json")])
    assert ct.read_npy_ids(out) == ct.read_npy_ids(ct.path("plain.npy"))
    conf = json.load(open(ct.path("rep.json")))["configuration"]
    assert conf["out"].endswith("sel-\\xe9.npy") and conf["embeddings"][0].endswith("emb-\\xe9.npy"), conf
    # Shards of a corpus so named, their parts in a folder so named, merged to an output so named.
    parts = ct.path("parts-%s" % bad)
    for i in range(2):
        run(inputs + GREEDY + ["--block-size", "150", "--shard", "%d/2" % i, "--parts", parts])
    run(inputs + GREEDY + ["--block-size", "150", "--out", ct.path("one.npy")])
    merged = ct.path("m-%s.npy" % bad)
    run(["merge", "--out", merged, "--report", ct.path("m.json"), parts])
    assert ct.read_npy_ids(merged) == ct.read_npy_ids(ct.path("one.npy"))
    assert json.load(open(ct.path("m.json")))["configuration"]["out"].endswith("m-\\xe9.npy")
    # A graph so named: its files are named in the report's and the parts' graph records.
    prefix = ct.path("g-%s" % bad)
    knn_test.write_graph(prefix, [[v, (v + 1) % 300] for v in range(300)], [[1.0, 0.5]] * 300)
    graph = inputs + ["--graph", prefix, "--lambda", "0", "--count", "30", "--objective", "facility", "--quiet"]
    run(graph + ["--report", ct.path("g.json"), "--checkpoint", ct.path("gck")])
    source = json.load(open(ct.path("g.json")))["blocks"][0]["graph"]["source"]
    assert "g-\\xe9.ids.npy" in source, source
    run(graph + ["--report", ct.path("g2.json"), "--checkpoint", ct.path("gck"), "--resume"])
    run(graph + ["--shard", "0/1", "--parts", ct.path("gparts")])


def test_signal_while_writing():
    """SIGTERM once the outputs are being written: the set is written whole, then exit 143 saying
    so. The renames wait on a lock of the outputs' folder, held here until the signal is sent."""
    _, _, inputs = corpus(300)
    ct.run(inputs + GREEDY + ["--out", ct.path("ref.npy")])
    folder = ct.path("outs")
    os.mkdir(folder)
    out, rep = os.path.join(folder, "sel.npy"), os.path.join(folder, "rep.json")
    lock = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = subprocess.Popen([ct.PROG] + inputs + GREEDY + ["--out", out, "--report", rep],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # The report is written last: once its temporary exists, the program is writing.
        ct.wait_for(lambda: os.path.exists("%s.tmp.%d" % (rep, proc.pid)), proc)
        proc.send_signal(signal.SIGTERM)
    finally:
        os.close(lock)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, (proc.returncode, err)
    assert "signal 15 while writing the outputs; the write was completed" in err, err
    assert ct.read_npy_ids(out) == ct.read_npy_ids(ct.path("ref.npy"))
    assert json.load(open(rep))["total"]["selected"] == 40
    assert sorted(os.listdir(folder)) == ["rep.json", "sel.npy"], os.listdir(folder)


if __name__ == "__main__":
    ct.run_scenario(globals(), "dmintegrity-")
