#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of datamask-select (Python standard library only, no NumPy).

    cli_test.py PROGRAM TEST_NAME

Each test writes its .npy/.csv inputs into a fresh temporary directory, runs the program and
checks what it wrote. The report's objective values are recomputed here from scratch in double
precision (quality mean, pairwise similarity, facility location), an independent reference for
the library's own evaluation.
"""
import json
import math
import os
import random
import resource
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time

PROG = None
TMP = None
REF = None  # tests/cli/continuous_reference.cpp, built as datamask_continuous_reference


# --- .npy writing and reading -------------------------------------------------------------------

def npy_bytes(descr, shape, payload, version=1, fortran=False):
    shape_txt = "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, "True" if fortran else "False", shape_txt)
    pre = 10 if version == 1 else 12
    pad = (64 - (pre + len(d) + 1) % 64) % 64
    d = d + " " * pad + "\n"
    head = b"\x93NUMPY" + bytes([version, 0])
    head += struct.pack("<H", len(d)) if version == 1 else struct.pack("<I", len(d))
    return head + d.encode("latin1") + payload


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def f32(rows):
    return b"".join(struct.pack("<%df" % len(r), *r) for r in rows)


def npy_f32(path, rows, **kw):
    return write(path, npy_bytes("<f4", (len(rows), len(rows[0])), f32(rows), **kw))


def npy_vec(path, values, descr="<f4"):
    fmt = {"<f4": "f", "<f8": "d", "<i8": "q", ">f4": "f"}[descr]
    endian = ">" if descr[0] == ">" else "<"
    return write(path, npy_bytes(descr, (len(values),), struct.pack(endian + "%d%s" % (len(values), fmt), *values)))


def read_npy_ids(path, descr="<i8"):
    with open(path, "rb") as f:
        b = f.read()
    assert b[:6] == b"\x93NUMPY", path
    hl = struct.unpack("<H", b[8:10])[0]
    header = b[10:10 + hl].decode()
    assert "'%s'" % descr in header, header
    n = (len(b) - 10 - hl) // 8
    return list(struct.unpack("<%d%s" % (n, "Q" if descr == "<u8" else "q"), b[10 + hl:]))


def read_text_ids(path):
    with open(path) as f:
        lines = [l.strip() for l in f if l.strip()]
    if lines and lines[0] == "id":
        lines = lines[1:]
    return [int(x) for x in lines]


# --- the library's content hash; the checksums of parts and checkpoint records ------------------

M64 = (1 << 64) - 1


def mix64(x):
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def hash_bytes(data):
    """datamask::hash_bytes (run/pipeline.hpp), computed here independently of the program: each 1 MiB
    chunk's 8-byte words (then its last bytes) mixed in order, the chunks' hashes combined."""
    h = mix64(len(data))
    for lo in range(0, len(data), 1 << 20):
        hi = min(len(data), lo + (1 << 20))
        c = 0x9E3779B97F4A7C15 ^ hi
        words = (hi - lo) // 8
        for w in struct.unpack_from("<%dQ" % words, data, lo):
            c = ((c ^ mix64(w)) * 0x100000001B3) & M64
        for b in data[lo + 8 * words:hi]:
            c = ((c ^ b) * 0x100000001B3) & M64
        h = (mix64(h ^ mix64(c)) + 0x632BE59BD9B4E019) & M64
    return h


def sealed_bytes(body):
    """A document that is not JSON (a snapshot) sealed as the program seals it: a last line
    "checksum <hex>" of every byte before it."""
    return body + b"\nchecksum %016x\n" % hash_bytes(body)


class program_float(float):
    """A number as the program wrote it: its value, and its text. The program's checksum is over
    its own text of each number, which is not always Python's shortest one (0.00448948372 is
    written 0.0044894837199999996), so `seal` writes this text back."""

    def __new__(cls, text):
        x = super().__new__(cls, text)
        x.text = text
        return x


def parse_doc(text):
    """A part or a block record the program wrote, its numbers kept with their text (for `seal`)."""
    return json.loads(text, parse_float=program_float)


def compact(x):
    """The compact JSON text of x, each number read by `parse_doc` in the program's own text."""
    if isinstance(x, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + compact(v) for k, v in x.items()) + "}"
    if isinstance(x, list):
        return "[" + ",".join(compact(v) for v in x) + "]"
    if isinstance(x, program_float):
        return x.text
    return json.dumps(x, ensure_ascii=False)


def seal(doc):
    """Recomputes the checksums of a part or a block record changed here (innermost first), as
    the program computes them: the hash of the compact JSON text without the checksum field. A
    test changes a document so, to reach the checks behind the checksum; read it with
    `parse_doc`, so that its numbers keep the program's text."""
    if isinstance(doc, list):
        for x in doc:
            seal(x)
    elif isinstance(doc, dict):
        for k, v in doc.items():
            if k != "checksum":
                seal(v)
        if "checksum" in doc:
            body = {k: v for k, v in doc.items() if k != "checksum"}
            doc["checksum"] = "%016x" % hash_bytes(compact(body).encode("utf-8"))
    return doc


# --- a corpus ------------------------------------------------------------------------------------

def make_corpus(n=600, d=16, seed=1, clusters=8):
    rnd = random.Random(seed)
    centres = [[rnd.gauss(0, 1) for _ in range(d)] for _ in range(clusters)]
    rows, q = [], []
    for i in range(n):
        c = rnd.randrange(clusters) if rnd.random() < 0.5 else 0
        rows.append([struct.unpack("<f", struct.pack("<f", centres[c][j] + 0.3 * rnd.gauss(0, 1)))[0] for j in range(d)])
        q.append(struct.unpack("<f", struct.pack("<f", math.cos(c) + 0.2 * rnd.gauss(0, 1)))[0])
    ids = rnd.sample(range(10**12, 10**12 + 10**9), n)
    return rows, q, ids


def standard_files(n=600, d=16):
    rows, q, ids = make_corpus(n, d)
    e = npy_f32(os.path.join(TMP, "emb.npy"), rows)
    qf = npy_vec(os.path.join(TMP, "q.npy"), q)
    idf = npy_vec(os.path.join(TMP, "ids.npy"), ids, "<i8")
    return rows, q, ids, e, qf, idf


def run(args, expect=0, **kw):
    p = subprocess.run([PROG] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if expect is not None and p.returncode != expect:
        raise AssertionError("exit %d (expected %d) for %s\nstdout:\n%s\nstderr:\n%s" %
                             (p.returncode, expect, " ".join(args), p.stdout, p.stderr))
    return p


# The policy-gradient learner, few steps: most scenarios are about the program around it (the
# default optimizer, auto, picks the continuous learner for these objectives).
FAST = ["--optimizer", "pg", "--rollouts", "16", "--steps", "40", "--min-active", "200", "--quiet"]


def path(name):
    return os.path.join(TMP, name)


# --- brute-force reference values ----------------------------------------------------------------

def unit(v):
    s = math.sqrt(sum(x * x for x in v))
    return [x / s for x in v] if s > 0 else [0.0] * len(v)


def ref_quality(q, sel):
    return sum(q[i] for i in sel) / len(sel)


def ref_pairwise(rows, sel):
    u = [unit(rows[i]) for i in sel]
    k = len(u)
    tot = 0.0
    for a in range(k):
        for b in range(k):
            if a != b:
                tot += sum(x * y for x, y in zip(u[a], u[b]))
    return -tot / (k * (k - 1))


def ref_facility(rows, sel, block_rows):
    us = [unit(rows[i]) for i in sel]
    tot = 0.0
    for v in block_rows:
        uv = unit(rows[v])
        tot += max(sum(x * y for x, y in zip(uv, s)) for s in us)
    return tot / len(block_rows)


def close(a, b, rel=1e-9, abs_=1e-12):
    return abs(a - b) <= abs_ + rel * max(abs(a), abs(b))


def check_ids(sel, ids, count):
    assert len(sel) == count, (len(sel), count)
    assert len(set(sel)) == len(sel), "duplicate ids in the selection"
    s = set(ids)
    assert all(x in s for x in sel), "an id not in the input"


# --- tests -------------------------------------------------------------------------------------

def test_help():
    p = run(["--help"])
    for opt in ["--embeddings", "--quality", "--quality-weights", "--ids", "--ratio", "--count", "--objective",
                "--objective-weights", "--lambda", "--kernel", "--optimizer", "--rollouts", "--steps",
                "--active-fraction", "--lr-max", "--lr-min", "--schedule", "--init", "--prune", "--block-size",
                "--seed", "--threads", "--logprob", "--scaling", "--out", "--report", "--log", "--plot",
                "--checkpoint", "--resume", "--demo"]:
        assert opt in p.stdout, opt + " missing from --help"
    assert "default" in p.stdout
    # One or two lines per option, the long story in docs/: no line over 186 characters (the
    # option column's 26, then the description), in the subcommands' help too.
    for sub in ([], ["plan"], ["merge"]):
        long = [line for line in run(sub + ["--help"]).stdout.splitlines() if len(line) > 186]
        assert not long, (sub, long)


def test_demo():
    # No optimizer named: auto picks the continuous learner (pairwise has a relaxation).
    p = run(["--demo", "--iterations", "30", "--out", path("d.npy"), "--report", path("d.json"), "--log",
             path("d.csv"), "--plot", path("d.svg")])
    assert "selected 2000 of 20000" in p.stdout and "optimizer continuous" in p.stdout, p.stdout
    assert "optimizer: continuous (auto" in p.stderr, p.stderr
    ids = read_npy_ids(path("d.npy"))
    check_ids(ids, list(range(20000)), 2000)
    rep = json.load(open(path("d.json")))
    assert rep["total"]["selected"] == 2000
    assert rep["configuration"]["optimizer"] == "continuous", rep["configuration"]
    assert rep["configuration"]["optimizer-requested"] == "auto", rep["configuration"]
    assert open(path("d.svg")).read().startswith("<svg")
    log = open(path("d.csv")).read().splitlines()
    assert log[0] == "block,iteration,step_size,relaxed_f" and len(log) == 31, log[:2]
    # The paper's learner is one flag away.
    p = run(["--demo", "--optimizer", "pg", "--steps", "30", "--log", path("p.csv")])
    assert "optimizer pg" in p.stdout, p.stdout
    assert len(open(path("p.csv")).read().splitlines()) == 31


def test_exact_count():
    rows, q, ids, e, qf, idf = standard_files()
    for extra, count in [(["--ratio", "0.1"], 60), (["--count", "37"], 37), (["--count", "0"], 60), (["--ratio", "0.055"], 33),
                         (["--ratio", "1"], 600)]:
        run(["--embeddings", e, "--quality", qf, "--ids", idf, "--out", path("s.npy")] + extra + FAST)
        check_ids(read_npy_ids(path("s.npy")), ids, count)
    # Without --ids the ids are the row numbers.
    run(["--embeddings", e, "--quality", qf, "--out", path("s.txt"), "--count", "50"] + FAST)
    check_ids(read_text_ids(path("s.txt")), list(range(600)), 50)


def check_report(rep, rows, q, ids, sel_ids, objectives):
    blk = rep["blocks"][0]
    assert blk["selected"] == len(sel_ids)
    pos = {v: i for i, v in enumerate(ids)}
    sel = [pos[v] for v in sel_ids]
    terms = blk["objective"]["terms"]
    ref = {"quality": ref_quality(q, sel), "pairwise": ref_pairwise(rows, sel)}
    if "facility" in objectives:
        ref["facility"] = ref_facility(rows, sel, range(len(rows)))
    for name, value in ref.items():
        got = terms[name]["raw"]
        tol = 1e-5 if name == "facility" else 1e-9
        assert close(got, value, rel=tol, abs_=tol), (name, got, value)
    total = sum(t["weight"] * t["raw"] / t["scale"] for t in terms.values())
    assert close(total, blk["objective"]["total"], 1e-12), (total, blk["objective"]["total"])
    assert rep["total"]["objective"] == blk["objective"]
    assert rep["version"]
    return terms


def test_report_values():
    rows, q, ids, e, qf, idf = standard_files()
    run(["--embeddings", e, "--quality", qf, "--ids", idf, "--ratio", "0.1", "--objective", "pairwise",
         "--objective", "facility", "--objective-weights", "1,0.5", "--out", path("s.npy"),
         "--report", path("r.json"), "--log", path("l.csv"), "--plot", path("p.svg")] + FAST)
    rep = json.load(open(path("r.json")))
    terms = check_report(rep, rows, q, ids, read_npy_ids(path("s.npy")), ["facility"])
    assert abs(terms["quality"]["weight"] - 0.5) < 1e-15
    assert abs(terms["facility"]["weight"] - 0.25) < 1e-15
    assert all(t["scale"] > 0 for t in terms.values())
    assert rep["configuration"]["objective"] == ["pairwise", "facility"]
    assert rep["total"]["steps_run"] == 40
    for ph in ["load", "optimize", "evaluate", "write"]:
        assert ph in rep["total"]["seconds"], ph
    log = open(path("l.csv")).read().splitlines()
    assert log[0] == "block,step,lr,reward_mean,reward_max,quality,pairwise,facility", log[0]
    assert len(log) == 41
    # Fixed scales: the scales this run calibrated, given back, reproduce its selection and
    # report; a much larger quality scale (quality weighs nothing) selects something else.
    scales = [terms[t]["scale"] for t in ("quality", "pairwise", "facility")]
    fixed = ["--embeddings", e, "--quality", qf, "--ids", idf, "--ratio", "0.1", "--objective", "pairwise",
             "--objective", "facility", "--objective-weights", "1,0.5"] + FAST
    run(fixed + ["--scales", ",".join(repr(v) for v in scales), "--out", path("fx.npy"), "--report", path("fx.json")])
    assert read_npy_ids(path("fx.npy")) == read_npy_ids(path("s.npy"))
    fx = json.load(open(path("fx.json")))
    assert fx["configuration"]["scaling"] == "fixed", fx["configuration"]["scaling"]
    fterms = check_report(fx, rows, q, ids, read_npy_ids(path("fx.npy")), ["facility"])
    assert [fterms[t]["scale"] for t in ("quality", "pairwise", "facility")] == scales
    run(fixed + ["--scales", ",".join(repr(v) for v in [scales[0] * 1e3] + scales[1:]), "--out", path("fy.npy")])
    assert sorted(read_npy_ids(path("fy.npy"))) != sorted(read_npy_ids(path("s.npy")))
    # Raw scaling: every scale is 1.
    run(["--embeddings", e, "--quality", qf, "--ids", idf, "--ratio", "0.1", "--scaling", "raw",
         "--out", path("s.npy"), "--report", path("r.json")] + FAST)
    rep = json.load(open(path("r.json")))
    terms = check_report(rep, rows, q, ids, read_npy_ids(path("s.npy")), [])
    assert all(t["scale"] == 1 for t in terms.values())
    # lambda 1: exactly the top S by quality; no quality needed with lambda 0.
    run(["--embeddings", e, "--quality", qf, "--ids", idf, "--count", "25", "--lambda", "1", "--out", path("t.npy")] + FAST)
    top = sorted(range(600), key=lambda i: (-q[i], ids[i]))[:25]
    assert sorted(read_npy_ids(path("t.npy"))) == sorted(ids[i] for i in top)
    run(["--embeddings", e, "--lambda", "0", "--count", "25", "--out", path("t.npy")] + FAST)
    check_ids(read_npy_ids(path("t.npy")), list(range(600)), 25)


def test_formats():
    rows, q, ids, e, qf, idf = standard_files()
    base = ["--quality", qf, "--ids", idf, "--ratio", "0.1"] + FAST
    run(["--embeddings", e, "--out", path("a.npy")] + base)
    a = read_npy_ids(path("a.npy"))
    run(["--embeddings", e, "--out", path("a.csv")] + base)
    assert read_text_ids(path("a.csv")) == a
    assert open(path("a.csv")).readline().strip() == "id"
    run(["--embeddings", e, "--out", path("a.txt")] + base)
    assert read_text_ids(path("a.txt")) == a
    # Shards, as a list and as a directory, read in order as one corpus: same selection.
    os.mkdir(path("shards"))
    s0 = npy_f32(path("shards/part-0.npy"), rows[:250])
    s1 = npy_f32(path("shards/part-1.npy"), rows[250:])
    run(["--embeddings", s0, "--embeddings", s1, "--out", path("b.npy")] + base)
    assert read_npy_ids(path("b.npy")) == a
    write(path("shards/notes.txt"), b"not a shard")  # a directory contributes its .npy files only
    run(["--embeddings", path("shards"), "--out", path("c.npy")] + base)
    assert read_npy_ids(path("c.npy")) == a
    os.mkdir(path("no-shards"))
    write(path("no-shards/notes.txt"), b"not a shard")
    expect_bad(["--embeddings", path("no-shards")] + base,
               ["no-shards", "directory holds no .npy files"])
    # .npy format version 2 header.
    npy_f32(path("emb_v2.npy"), rows, version=2)
    run(["--embeddings", path("emb_v2.npy"), "--out", path("v2.npy")] + base)
    assert read_npy_ids(path("v2.npy")) == a
    # 16-bit embeddings: float16 ('<f2') and bfloat16 (ml_dtypes' '<V2', numpy's '|V2' view) are
    # read as the floats they are, so each selects exactly what the float32 file of the same
    # (rounded) values selects.
    half = b"".join(struct.pack("<%de" % len(r), *r) for r in rows)
    write(path("emb16.npy"), npy_bytes("<f2", (600, 16), half))
    run(["--embeddings", path("emb16.npy"), "--out", path("h.npy")] + base)
    h = read_npy_ids(path("h.npy"))
    check_ids(h, ids, 60)
    widened = [list(struct.unpack("<%de" % len(r), struct.pack("<%de" % len(r), *r))) for r in rows]
    run(["--embeddings", npy_f32(path("emb16as32.npy"), widened), "--out", path("h32.npy")] + base)
    assert read_npy_ids(path("h32.npy")) == h

    def bfloat16_bits(x):  # float32's bits rounded to their top 16, to nearest even
        u = struct.unpack("<I", struct.pack("<f", x))[0]
        return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    bits = [[bfloat16_bits(x) for x in r] for r in rows]
    brain = b"".join(struct.pack("<%dH" % len(r), *r) for r in bits)
    widened = [[struct.unpack("<f", struct.pack("<I", b << 16))[0] for b in r] for r in bits]
    run(["--embeddings", npy_f32(path("embbf16as32.npy"), widened), "--out", path("b32.npy")] + base)
    b32 = read_npy_ids(path("b32.npy"))
    for descr in ["<V2", "|V2"]:
        write(path("embbf16.npy"), npy_bytes(descr, (600, 16), brain))
        run(["--embeddings", path("embbf16.npy"), "--out", path("b.npy")] + base)
        assert read_npy_ids(path("b.npy")) == b32, descr
    # Quality as CSV with two columns and weights == two .npy columns with the same weights.
    q2 = [x * 0.5 + 0.1 for x in q]
    with open(path("q.csv"), "w") as f:
        f.write("score_a,score_b\n")
        for x, y in zip(q, q2):
            f.write("%r,%r\n" % (x, y))
    npy_vec(path("q2.npy"), q2, "<f8")
    run(["--embeddings", e, "--quality", path("q.csv"), "--quality-weights", "1,2", "--ids", idf, "--ratio", "0.1",
         "--out", path("csv.npy")] + FAST)
    run(["--embeddings", e, "--quality", qf, "--quality", path("q2.npy"), "--quality-weights", "1,2", "--ids", idf,
         "--ratio", "0.1", "--out", path("npyq.npy")] + FAST)
    assert read_npy_ids(path("csv.npy")) == read_npy_ids(path("npyq.npy"))


def test_blocks():
    rows, q, ids = make_corpus(3000, 8, seed=5)
    e = npy_f32(path("emb.npy"), rows)
    qf = npy_vec(path("q.npy"), q)
    idf = npy_vec(path("ids.npy"), ids, "<i8")
    for extra, count in [(["--ratio", "0.07"], 210), (["--count", "301"], 301)]:
        run(["--embeddings", e, "--quality", qf, "--ids", idf, "--block-size", "1000", "--out", path("s.npy"),
             "--report", path("r.json"), "--prune", "0.2"] + extra + FAST)
        sel = read_npy_ids(path("s.npy"))
        check_ids(sel, ids, count)
        rep = json.load(open(path("r.json")))
        blocks = rep["blocks"]
        assert len(blocks) == 3
        assert sum(b["items"] for b in blocks) == 3000
        assert sum(b["selected"] for b in blocks) == count
        for b in blocks:  # S_b is within one of the exact quota
            assert abs(b["selected"] - count * b["items"] / 3000) < 1.0, b
        # Pruning is global: nothing below the global 20% quantile is selected.
        thr = sorted(q)[int(0.2 * 3000)]
        assert abs(rep["prune_threshold"] - thr) < 1e-6
        pos = {v: i for i, v in enumerate(ids)}
        assert all(q[pos[v]] >= thr for v in sel)
        # Each block's report values against the reference, block by block.
        start = 0
        for b in blocks:
            part = sel[start:start + b["selected"]]
            start += b["selected"]
            members = [pos[v] for v in part]
            t = b["objective"]["terms"]
            assert close(t["quality"]["raw"], ref_quality(q, members), 1e-9)
            assert close(t["pairwise"]["raw"], ref_pairwise(rows, members), 1e-9)
        tt = rep["total"]["objective"]
        total = sum(t["weight"] * t["raw"] / t["scale"] for t in tt["terms"].values())
        assert close(total, tt["total"], 1e-9)
    # The block split follows the ids, not the file order: shuffling the rows keeps the selection set.
    perm = list(range(3000))
    random.Random(3).shuffle(perm)
    npy_f32(path("emb_p.npy"), [rows[i] for i in perm])
    npy_vec(path("q_p.npy"), [q[i] for i in perm])
    npy_vec(path("ids_p.npy"), [ids[i] for i in perm], "<i8")
    run(["--embeddings", path("emb_p.npy"), "--quality", path("q_p.npy"), "--ids", path("ids_p.npy"),
         "--block-size", "1000", "--count", "301", "--prune", "0.2", "--out", path("p.npy")] + FAST)
    assert sorted(read_npy_ids(path("p.npy"))) == sorted(sel)


def test_deterministic():
    rows, q, ids, e, qf, idf = standard_files()
    base = ["--embeddings", e, "--quality", qf, "--ids", idf, "--ratio", "0.1"] + FAST
    run(base + ["--out", path("a.npy"), "--threads", "1"])
    run(base + ["--out", path("b.npy"), "--threads", "2"])
    assert read_npy_ids(path("a.npy")) == read_npy_ids(path("b.npy"))
    run(base + ["--out", path("c.npy"), "--seed", "7"])
    assert read_npy_ids(path("a.npy")) != read_npy_ids(path("c.npy"))


def expect_bad(args, names, out=None):
    out = out or path("bad_out.npy")
    if os.path.exists(out):
        os.remove(out)
    p = run(FAST + args + ["--out", out], expect=2)  # args after FAST: the last value of an option wins
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, "expected one line on stderr, got:\n" + p.stderr
    for nm in names:
        assert nm in lines[0], "'%s' not in: %s" % (nm, lines[0])
    assert not os.path.exists(out), "an output was written despite the error"
    leftovers = [f for f in os.listdir(TMP) if ".tmp." in f]
    assert not leftovers, leftovers
    if os.environ.get("CLI_TEST_VERBOSE"):
        print(lines[0])
    return lines[0]


def test_bad_inputs():
    rows, q, ids, e, qf, idf = standard_files()
    good = open(e, "rb").read()
    write(path("text.npy"), b"id,score\n1,0.5\n")
    expect_bad(["--embeddings", path("text.npy"), "--quality", qf], ["text.npy", "not a .npy file"])
    write(path("trunc.npy"), good[:-100])
    expect_bad(["--embeddings", path("trunc.npy"), "--quality", qf], ["trunc.npy", "truncated"])
    write(path("hdr.npy"), good[:40])
    expect_bad(["--embeddings", path("hdr.npy"), "--quality", qf], ["hdr.npy", "truncated"])
    write(path("int.npy"), npy_bytes("<i8", (600, 2), struct.pack("<1200q", *range(1200))))
    expect_bad(["--embeddings", path("int.npy"), "--quality", qf], ["int.npy", "unsupported dtype"])
    write(path("f8.npy"), npy_bytes("<f8", (600, 2), struct.pack("<1200d", *([0.5] * 1200))))
    expect_bad(["--embeddings", path("f8.npy"), "--quality", qf], ["f8.npy", "unsupported dtype"])
    write(path("be.npy"), npy_bytes(">f4", (600, 16), struct.pack(">9600f", *[x for r in rows for x in r])))
    expect_bad(["--embeddings", path("be.npy"), "--quality", qf], ["be.npy", "big-endian"])
    write(path("fortran.npy"), npy_bytes("<f4", (600, 16), f32(rows), fortran=True))
    expect_bad(["--embeddings", path("fortran.npy"), "--quality", qf], ["fortran.npy", "Fortran"])
    expect_bad(["--embeddings", e, "--quality", qf, "--scales", "1"], ["--scales", "1 values for 2 terms"])
    expect_bad(["--embeddings", e, "--quality", qf, "--scales", "1,0"], ["--scales", "must be > 0"])
    expect_bad(["--embeddings", e, "--quality", qf, "--scales", "1,x"], ["--scales", "'x'"])
    expect_bad(["--embeddings", e, "--quality", qf, "--scales", "1,1", "--scaling", "raw"], ["--scales", "--scaling raw"])
    expect_bad(["--embeddings", e, "--quality", qf, "--scaling", "fixed"], ["--scaling", "fixed needs --scales"])
    npy_vec(path("q_short.npy"), q[:599])
    expect_bad(["--embeddings", e, "--quality", path("q_short.npy")], ["q_short.npy", "599 rows", "600"])
    npy_vec(path("ids_long.npy"), ids + [5], "<i8")
    expect_bad(["--embeddings", e, "--quality", qf, "--ids", path("ids_long.npy")], ["ids_long.npy", "601 rows"])
    npy_f32(path("shard_d.npy"), [r[:8] for r in rows[:10]])
    expect_bad(["--embeddings", e, "--embeddings", path("shard_d.npy"), "--quality", qf], ["shard_d.npy", "columns"])
    bad_rows = [list(r) for r in rows]
    bad_rows[17][3] = float("nan")
    npy_f32(path("nan.npy"), bad_rows)
    expect_bad(["--embeddings", path("nan.npy"), "--quality", qf], ["nan.npy", "row 17", "NaN"])
    bad_rows[17][3] = float("inf")
    npy_f32(path("inf.npy"), bad_rows)
    expect_bad(["--embeddings", path("inf.npy"), "--quality", qf], ["inf.npy", "infinite"])
    q_inf = list(q)
    q_inf[5] = float("inf")
    npy_vec(path("q_inf.npy"), q_inf)
    expect_bad(["--embeddings", e, "--quality", path("q_inf.npy")], ["q_inf.npy", "row 5", "infinite"])
    q_nan = list(q)
    q_nan[9] = float("nan")
    with open(path("q_nan.csv"), "w") as f:
        f.write("\n".join(repr(x) for x in q_nan) + "\n")
    expect_bad(["--embeddings", e, "--quality", path("q_nan.csv")], ["q_nan.csv", "row 9", "NaN"])
    dup = list(ids)
    dup[400] = dup[3]
    npy_vec(path("dup.npy"), dup, "<i8")
    expect_bad(["--embeddings", e, "--quality", qf, "--ids", path("dup.npy")], ["dup.npy", "duplicate id", "rows 3 and 400"])
    expect_bad(["--embeddings", e, "--quality", qf, "--ratio", "0"], ["--ratio"])
    expect_bad(["--embeddings", e, "--quality", qf, "--ratio", "1.5"], ["--ratio"])
    expect_bad(["--embeddings", e, "--quality", qf, "--ratio", "0.0001"], ["--ratio", "at least 1"])
    expect_bad(["--embeddings", e, "--quality", qf, "--count", "601"], ["--count", "601", "600"])
    expect_bad(["--embeddings", e, "--quality", qf, "--count", "-1"], ["--count"])
    expect_bad(["--embeddings", e, "--quality", qf, "--prune", "0.95", "--ratio", "0.1"], ["prune"])
    expect_bad(["--embeddings", e, "--quality", qf], ["no_such_dir", "does not exist"],
               out=path("no_such_dir/out.npy"))
    expect_bad(["--embeddings", e, "--quality", qf, "--report", path("no_such_dir/r.json")], ["no_such_dir"])
    expect_bad(["--embeddings", e, "--quality", qf], ["x.parquet", ".npy"], out=path("x.parquet"))
    expect_bad(["--embeddings", e], ["--quality", "lambda"])
    expect_bad(["--embeddings", path("missing.npy"), "--quality", qf], ["missing.npy", "cannot open"])
    expect_bad(["--embeddings", e, "--quality", qf, "--kernel", "gauss"], ["--kernel", "gauss"])
    expect_bad(["--embeddings", e, "--quality", qf, "--frobnicate"], ["--frobnicate"])
    expect_bad(["--embeddings", e, "--quality", qf, "--objective-weights", "1,2"], ["--objective-weights"])
    # (not through expect_bad: its policy-gradient options are refused with a greedy)
    refused(["--embeddings", e, "--quality", qf, "--optimizer", "lazy", "--prune", "0.95", "--ratio", "0.1", "--out",
             path("lazy_bad.npy")], ["prune", "fewer than"])
    assert not os.path.exists(path("lazy_bad.npy"))
    expect_bad(["--embeddings", e, "--quality", qf, "--optimizer", "annealing"], ["--optimizer", "annealing"])


def test_optimizers():
    rows, q, ids, e, qf, idf = standard_files()
    for opt in ["greedy", "lazy", "stochastic"]:
        p = run(["--quiet", "--embeddings", e, "--quality", qf, "--ids", idf, "--count", "20", "--optimizer", opt,
                        "--out", path("g.npy"), "--report", path("g.json")], expect=None)
        assert p.returncode == 0, p.stderr
        sel = read_npy_ids(path("g.npy"))
        check_ids(sel, ids, 20)
        check_report(json.load(open(path("g.json"))), rows, q, ids, sel, [])
    # With --prune, the greedies pick only among the kept items; naive greedy's picks, in order,
    # are a plain Python greedy's over the kept rows on the report's f.
    for opt in ["greedy", "lazy", "stochastic"]:
        run(["--quiet", "--embeddings", e, "--quality", qf, "--ids", idf, "--count", "12", "--optimizer", opt,
                    "--prune", "0.5", "--out", path("gp.npy"), "--report", path("gp.json")])
        sel = read_npy_ids(path("gp.npy"))
        check_ids(sel, ids, 12)
        rep = json.load(open(path("gp.json")))
        thr = rep["prune_threshold"]
        assert abs(thr - sorted(q)[300]) < 1e-6, thr
        pos = {v: i for i, v in enumerate(ids)}
        assert all(q[pos[v]] >= thr for v in sel), opt
        terms = check_report(rep, rows, q, ids, sel, [])
        if opt != "greedy":
            continue
        sq, sp = terms["quality"]["scale"], terms["pairwise"]["scale"]

        def f(u):
            return 0.5 * ref_quality(q, u) / sq + 0.5 * (ref_pairwise(rows, u) if len(u) > 1 else 0.0) / sp
        kept = sorted((i for i in range(600) if q[i] >= thr), key=lambda i: ids[i])
        picked = []
        for _ in range(12):
            best = max(kept, key=lambda i: (f(picked + [i]), -ids[i]) if i not in picked else (-math.inf, 0))
            picked.append(best)
        assert [ids[i] for i in picked] == sel, ([ids[i] for i in picked], sel)


def wait_for(pred, proc, timeout=60):
    t0 = time.time()
    while not pred():
        if proc.poll() is not None:
            raise AssertionError("the run ended before it could be interrupted")
        if time.time() - t0 > timeout:
            raise AssertionError("timed out waiting")
        time.sleep(0.01)


def interrupt(args, marker, sig, out):
    """Starts a run, sends `sig` once `marker` exists: exit 128 + sig, the checkpoint named, no `out`."""
    proc = subprocess.Popen([PROG] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: os.path.exists(marker), proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, (proc.returncode, err)
    assert b"--resume" in err, err
    assert not os.path.exists(out)


def test_resume():
    rows, q, ids = make_corpus(2400, 16, seed=9)
    e = npy_f32(path("emb.npy"), rows)
    qf = npy_vec(path("q.npy"), q)
    idf = npy_vec(path("ids.npy"), ids, "<i8")
    base = ["--embeddings", e, "--quality", qf, "--ids", idf, "--ratio", "0.1", "--optimizer", "pg", "--rollouts", "32",
            "--steps", "200",
            "--min-active", "300", "--block-size", "1000", "--objective", "pairwise", "--quiet"]
    run(base + ["--out", path("full.npy"), "--log", path("full.csv"), "--report", path("full.json")])
    full = read_npy_ids(path("full.npy"))
    ck = path("ck")
    # 1. SIGTERM in the middle of the first block: a snapshot is saved, exit 143, no output.
    interrupt(base + ["--out", path("r.npy"), "--log", path("r.csv"), "--report", path("r.json"), "--checkpoint",
                      ck, "--checkpoint-every", "25"], os.path.join(ck, "block-0.snapshot"), signal.SIGTERM,
              path("r.npy"))
    # 2. Resume, and SIGKILL it once block 0 is done and block 1 has a snapshot.
    proc = subprocess.Popen([PROG] + base + ["--out", path("r.npy"), "--log", path("r.csv"), "--report",
                                             path("r.json"), "--checkpoint", ck, "--checkpoint-every", "25",
                                             "--resume"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: os.path.exists(os.path.join(ck, "block-1.snapshot")), proc)
    proc.kill()
    proc.communicate(timeout=60)
    assert "done 0" in open(os.path.join(ck, "manifest")).read()
    assert not os.path.exists(path("r.npy"))
    # 3. Resume to the end: bit-identical selection and log, same report values.
    run(base + ["--out", path("r.npy"), "--log", path("r.csv"), "--report", path("r.json"), "--checkpoint", ck,
                "--checkpoint-every", "25", "--resume"])
    assert read_npy_ids(path("r.npy")) == full, "resumed selection differs from the uninterrupted run"
    assert open(path("r.csv")).read() == open(path("full.csv")).read(), "resumed log differs"
    a, b = json.load(open(path("full.json"))), json.load(open(path("r.json")))
    assert a["total"]["objective"] == b["total"]["objective"]
    assert [x["objective"] for x in a["blocks"]] == [x["objective"] for x in b["blocks"]]
    assert b["blocks"][0]["from_checkpoint"] and b["resumed"]
    # 4. Resumes with other options or inputs are refused; a fresh run will not overwrite.
    p = run(base[:-1] + ["--steps", "301", "--quiet", "--checkpoint", ck, "--resume"], expect=2)
    assert "refused" in p.stderr and "--steps" in p.stderr, p.stderr
    q2 = list(q)
    q2[0] += 1.0
    npy_vec(path("q.npy"), q2)
    p = run(base + ["--checkpoint", ck, "--resume"], expect=2)
    assert "refused" in p.stderr and "inputs" in p.stderr, p.stderr
    npy_vec(path("q.npy"), q)
    p = run(base + ["--checkpoint", ck], expect=2)
    assert "--resume" in p.stderr, p.stderr
    # A checkpoint resumes only with the version and backend that wrote it.
    manifest = os.path.join(ck, "manifest")
    written = open(manifest).read()
    backend = json.load(open(path("r.json")))["configuration"]["backend"]
    assert f"\nbackend {backend}\n" in written, written
    for line, other, word in [("version", "0.0.0-other", "0.0.0-other"), ("backend", "other", "other backend")]:
        with open(manifest, "w") as f:
            f.write("".join(f"{line} {other}\n" if x.startswith(line + " ") else x
                            for x in written.splitlines(keepends=True)))
        p = run(base + ["--checkpoint", ck, "--resume"], expect=2)
        assert "refused" in p.stderr and word in p.stderr, p.stderr
    with open(manifest, "w") as f:
        f.write(written)
    # A damaged record of a finished block, or another block's, is refused, naming the file.
    done0, done1 = (os.path.join(ck, f"block-{b}.done") for b in (0, 1))
    record = open(done1).read()

    def changed(change):
        doc = parse_doc(record)
        change(doc)
        return json.dumps(seal(doc))

    def fewer(doc):  # consistent in itself, not with the plan's quota
        doc["ids"].pop()
        doc["selected"] -= 1

    for text, word in [(record[: len(record) // 2], "block-1.done: damaged block record"),
                       (open(done0).read(), "block-1.done: the record of block 0"),
                       (changed(fewer), "block-1.done: damaged block record (%d items selecting" % json.loads(record)["items"]),
                       (changed(lambda d: d["history"][0].__setitem__(0, 0)), "history's step 1 is numbered 0"),
                       (changed(lambda d: d["history"].pop()), "steps in its history, but it ran")]:
        with open(done1, "w") as f:
            f.write(text)
        p = run(base + ["--checkpoint", ck, "--resume"], expect=2)
        assert word in p.stderr, p.stderr
    with open(done1, "w") as f:
        f.write(record)
    # Threads do not matter to a resume (nor to the selection).
    run(base + ["--checkpoint", ck, "--resume", "--threads", "1", "--out", path("r2.npy")])
    assert read_npy_ids(path("r2.npy")) == full


def test_single_block_resume():
    rows, q, ids, e, qf, idf = standard_files(1200, 16)
    base = ["--embeddings", e, "--quality", qf, "--ratio", "0.1", "--optimizer", "pg", "--rollouts", "32", "--steps", "250",
            "--min-active", "300", "--quiet", "--init", "quality", "--logprob", "plackett-luce"]
    run(base + ["--out", path("full.npy")])
    ck = path("ck1")
    proc = subprocess.Popen([PROG] + base + ["--out", path("r.npy"), "--checkpoint", ck, "--checkpoint-every", "10"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: os.path.exists(os.path.join(ck, "block-0.snapshot")), proc)
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130, proc.returncode
    run(base + ["--out", path("r.npy"), "--checkpoint", ck, "--resume"])
    assert read_npy_ids(path("r.npy")) == read_npy_ids(path("full.npy"))


def snapshot_dir():
    """The bytes of every file in the test folder (to prove a refused run changed nothing)."""
    out = {}
    for root, _, files in os.walk(TMP):
        for f in files:
            full = os.path.join(root, f)
            out[full] = open(full, "rb").read()
    return out


def expect_refused(args, names):
    """Exit 2 before any work, one line naming `names`, and no file written or changed."""
    before = snapshot_dir()
    p = run(FAST + args, expect=2)  # args last: a repeated option takes its last value
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, "expected one line on stderr, got:\n" + p.stderr
    for nm in names:
        assert nm in lines[0], "'%s' not in: %s" % (nm, lines[0])
    after = snapshot_dir()
    assert after == before, "a refused run wrote or changed files: %s" % sorted(set(after) ^ set(before) or
                                                                          [f for f in after if after[f] != before[f]])
    return lines[0]


def test_output_collisions():
    """Issue 9.2: two outputs on one path (also through ./, dir/.. and a symbolic link)."""
    rows, q, ids, e, qf, idf = standard_files()
    base = ["--embeddings", e, "--quality", qf]
    same = path("same.csv")
    expect_refused(base + ["--out", same, "--log", same], ["--out", "--log", "same.csv"])
    expect_refused(base + ["--out", same, "--report", same], ["--out", "--report"])
    expect_refused(base + ["--report", path("r.json"), "--plot", path("r.json")], ["--report", "--plot"])
    os.mkdir(path("sub"))
    cwd = os.getcwd()
    os.chdir(TMP)
    try:
        expect_refused(base + ["--out", "a.txt", "--log", "./a.txt"], ["--out", "--log"])
        expect_refused(base + ["--out", "a.txt", "--plot", "sub/../a.txt"], ["--out", "--plot"])
        open("target.csv", "w").write("keep\n")
        os.symlink("target.csv", "link.csv")
        expect_refused(base + ["--out", "target.csv", "--log", "link.csv"], ["--out", "--log"])
    finally:
        os.chdir(cwd)
    # Distinct paths still work.
    run(base + ["--out", path("ok.csv"), "--log", path("ok_log.csv")] + FAST)


def test_output_over_input():
    """Issue 9.3: an output (out, report, log, plot, checkpoint folder) that is an input."""
    rows, q, ids, e, qf, idf = standard_files()
    base = ["--embeddings", e, "--quality", qf, "--ids", idf]
    expect_refused(base + ["--out", e], ["--out", "is an input", "--embeddings"])
    expect_refused(base + ["--log", qf], ["--log", "--quality"])
    expect_refused(base + ["--report", idf], ["--report", "--ids"])
    expect_refused(base + ["--plot", e], ["--plot", "--embeddings"])
    expect_refused(base + ["--out", path("s.npy"), "--checkpoint", e], ["--checkpoint", "--embeddings"])
    # A shard inside an input folder, and a checkpoint folder that is (or holds) an input.
    os.mkdir(path("shards"))
    npy_f32(path("shards/a.npy"), rows[:300])
    npy_f32(path("shards/b.npy"), rows[300:])
    sh = ["--embeddings", path("shards"), "--quality", qf]
    expect_refused(sh + ["--out", path("shards/b.npy")], ["--out", "--embeddings"])
    expect_refused(sh + ["--out", path("shards/c.npy")], ["--out", "--embeddings"])
    expect_refused(sh + ["--out", path("s.npy"), "--checkpoint", path("shards")], ["--checkpoint"])
    expect_refused(sh + ["--out", path("s.npy"), "--checkpoint", TMP], ["--checkpoint"])
    os.symlink(e, path("e_link.npy"))
    expect_refused(base + ["--out", path("e_link.npy")], ["--out", "--embeddings"])


def test_option_ranges():
    """Issue 9.4: every numeric option is refused outside its documented range."""
    rows, q, ids, e, qf, idf = standard_files()
    base = ["--embeddings", e, "--quality", qf, "--out", path("s.npy")]
    bad = [(["--lr-max", "-5"], ["--lr-max", "-5"]), (["--lr-max", "0"], ["--lr-max"]),
           (["--lr-max", "inf"], ["--lr-max"]),
           (["--kernel", "rbf", "--objective", "facility", "--gamma", "-1"], ["--gamma", "-1"]),
           (["--gamma", "0"], ["--gamma"]), (["--lr-min", "20"], ["--lr-min", "--lr-max"]),
           (["--lr-min", "-1"], ["--lr-min"]), (["--steps", "-3"], ["--steps"]),
           (["--rollouts", "1"], ["--rollouts"]), (["--active-fraction", "0"], ["--active-fraction"]),
           (["--active-fraction", "1.5"], ["--active-fraction"]), (["--min-active", "0"], ["--min-active"]),
           (["--prune", "1"], ["--prune"]), (["--prune", "-0.1"], ["--prune"]), (["--lambda", "1.1"], ["--lambda"]),
           (["--block-size", "1"], ["--block-size"]), (["--threads", "-1"], ["--threads"]),
           (["--checkpoint-every", "0"], ["--checkpoint-every"]), (["--seed", "-1"], ["--seed"]),
           (["--count", "-1"], ["--count"]), (["--ratio", "nan"], ["--ratio"]), (["--steps", "x"], ["--steps"])]
    for extra, names in bad:
        expect_refused(base + extra, names)
    # --steps 0 is documented: calibrate and read out the initial logits (S items, no step run).
    run(base + ["--steps", "0", "--report", path("z.json")] + FAST[:4] + FAST[6:])
    rep = json.load(open(path("z.json")))
    assert rep["total"]["selected"] == 60 and rep["total"]["steps_run"] == 0, rep["total"]
    p = run(["--help"])
    for rng in ["> 0", "[0, 1]", "(0, 1]", "[0, 1)", "default 0.5"]:
        assert rng in p.stdout, rng + " missing from --help"


def test_wording():
    """Issue 9.7: "found 1 dimension", and an output under /proc is not "No such file"."""
    rows, q, ids, e, qf, idf = standard_files()
    npy_vec(path("flat.npy"), [0.5] * 600)
    line = expect_bad(["--embeddings", path("flat.npy"), "--quality", qf], ["flat.npy", "found 1 dimension"])
    assert "1 dimensions" not in line, line
    if os.path.isdir("/proc/self"):
        p = run(["--embeddings", e, "--quality", qf, "--out", "/proc/datamask-out.npy"] + FAST, expect=2)
        assert "/proc/datamask-out.npy" in p.stderr and "No such file" not in p.stderr, p.stderr
        assert "does not accept new files" in p.stderr, p.stderr


def test_report_readback():
    """The report is JSON that the library reads back (datamask/run/report.hpp): field names kept."""
    rows, q, ids, e, qf, idf = standard_files()
    run(["--embeddings", e, "--quality", qf, "--block-size", "250", "--out", path("s.npy"),
         "--report", path("r.json")] + FAST)
    rep = json.load(open(path("r.json")))
    for key in ["program", "version", "configuration", "input", "resumed", "prune_threshold", "blocks", "total"]:
        assert key in rep, key
    assert rep["prune_threshold"] is None
    assert rep["total"]["blocks"] == len(rep["blocks"]) == 3
    assert sum(b["selected"] for b in rep["blocks"]) == rep["total"]["selected"] == 60
    assert rep["configuration"]["block-size"] == 250 and rep["configuration"]["lr-max"] == 10



# --- inputs that are not regular files, folders that cannot be listed -----------------------------

def test_fifo_inputs():
    """A FIFO (no writer) as any input file is refused at once, naming it: opening one to read
    waits for a writer, and a quality CSV was opened twice (parsed, then hashed)."""
    rows, q, ids, e, qf, idf = standard_files()
    for name in ["fifo.csv", "fifo.npy", "g.ids.npy", "part.json"]:
        os.mkfifo(path(name))
    fifo = path("fifo.npy")
    cases = [(["--embeddings", e, "--quality", path("fifo.csv")], "fifo.csv"),
             (["--embeddings", e, "--quality", fifo], "fifo.npy"),
             (["--embeddings", fifo, "--quality", qf], "fifo.npy"),
             (["--embeddings", e, "--quality", qf, "--ids", fifo], "fifo.npy"),
             (["--embeddings", e, "--lambda", "0", "--objective", "facility", "--graph", path("g")], "g.ids.npy")]
    for args, name in cases:
        p = run(args + ["--out", path("s.npy"), "--quiet"], expect=2, timeout=30)  # a hang fails here
        assert name in p.stderr and "not a regular file" in p.stderr, p.stderr
    p = run(["merge", "--out", path("m.npy"), path("part.json")], expect=2, timeout=30)
    assert "part.json" in p.stderr and "not a regular file" in p.stderr, p.stderr
    assert not os.path.exists(path("s.npy")) and not os.path.exists(path("m.npy"))


def test_unlistable_folder():
    """An --embeddings folder holding a symbolic link that loops, or one that cannot be read, is
    refused naming the path (it was an internal error, exit 1)."""
    rows, q, ids, e, qf, idf = standard_files()
    os.symlink("loop", path("loop"))
    expect_bad(["--embeddings", path("loop"), "--quality", qf], ["loop", "symbolic links"])
    os.mkdir(path("shards"))
    npy_f32(path("shards/a.npy"), rows)
    os.symlink("b.npy", path("shards/b.npy"))  # loops
    expect_bad(["--embeddings", path("shards"), "--quality", qf], ["shards/b.npy", "symbolic links"])
    # Entries that are not shards are not looked at, even a dangling link (an editor's lock file);
    # a shard that is no regular file is refused by name.
    os.remove(path("shards/b.npy"))
    os.symlink("nowhere", path("shards/.#notes"))
    run(["--embeddings", path("shards"), "--quality", qf, "--count", "20", "--out", path("s.npy"), "--quiet"])
    os.mkfifo(path("shards/c.npy"))
    expect_bad(["--embeddings", path("shards"), "--quality", qf], ["shards/c.npy", "not a regular file"])
    if os.geteuid() != 0:  # root reads a folder whatever its mode
        os.mkdir(path("closed"))
        npy_f32(path("closed/a.npy"), rows)
        os.chmod(path("closed"), 0)
        try:
            expect_bad(["--embeddings", path("closed"), "--quality", qf], ["closed", "Permission denied"])
        finally:
            os.chmod(path("closed"), 0o755)



def test_disf_huge_d():
    """DiSF on 50 x 131072 embeddings: its d x d matrices (128 GiB each in double) are refused
    before they are allocated, naming d and the bytes (it was std::bad_alloc, exit 1)."""
    n, d = 50, 1 << 17
    e = write(path("wide.npy"), npy_bytes("<f4", (n, d), bytes(4 * n * d)))
    qf = npy_vec(path("q.npy"), [i / n for i in range(n)])
    # (auto would run naive greedy on 10 of 50 items: it costs less than the ascent there)
    for optimizer, what in [("continuous", "the relaxation"), ("greedy", "the greedy state")]:
        p = run(["--embeddings", e, "--quality", qf, "--objective", "disf", "--count", "10", "--optimizer", optimizer,
                 "--out", path("s.npy"), "--quiet"], expect=2, timeout=120)
        for word in ["--embeddings", "d = 131072", "DiSF", what, " bytes"]:
            assert word in p.stderr, (word, p.stderr)
    assert not os.path.exists(path("s.npy"))
    # The limit is what the process may use: an address-space limit (ulimit -v, as a batch
    # system sets one) below the greedy state's 2 x 3.2 GB at d = 20,000 refuses it the same way.
    d = 20000
    e = write(path("wide2.npy"), npy_bytes("<f4", (n, d), bytes(4 * n * d)))
    limit = lambda: resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    p = run(["--embeddings", e, "--quality", qf, "--objective", "disf", "--count", "10", "--optimizer", "greedy",
             "--out", path("s.npy"), "--quiet"], expect=2, timeout=120, preexec_fn=limit)
    if "(backend: cuda;" in run(["--version"]).stdout:
        # The CUDA runtime itself cannot start under that limit (seen on an H200): refused, saying so.
        assert "could not start" in p.stderr and "ulimit -v" in p.stderr, p.stderr
    else:
        assert "d = 20000" in p.stderr and "6400000000 bytes" in p.stderr, p.stderr


def test_version():
    """--version prints the version, the backend and whether MPI is built in, and exits 0."""
    p = run(["--version"])
    version = re.search(r'version_string = "([^"]+)"', open(os.path.join(os.path.dirname(__file__), "..", "..",
                                                                         "include", "datamask", "version.hpp")).read())
    assert re.fullmatch(r"datamask-select %s \(backend: \w+; MPI: (yes|no)\)\n" % re.escape(version.group(1)),
                        p.stdout), p.stdout
    assert p.stderr == "", p.stderr


def test_threads_cap():
    """--threads above the CPUs this process may run on is capped to them with a warning, and the
    report records the threads used (1000 threads on 2 CPUs ran 30 times slower)."""
    rows, q, ids, e, qf, idf = standard_files()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    p = run(["--embeddings", e, "--quality", qf, "--count", "20", "--threads", "1000", "--quiet",
             "--out", path("t.npy"), "--report", path("t.json")])
    m = re.fullmatch(r"datamask-select: warning: --threads 1000 is more than .*; using (\d+)\n", p.stderr)
    assert m and 1 <= int(m.group(1)) <= cpus, p.stderr
    assert json.load(open(path("t.json")))["configuration"]["threads"] == int(m.group(1))
    p = run(["--embeddings", e, "--quality", qf, "--count", "20", "--threads", "1", "--quiet", "--out", path("one.npy")])
    assert p.stderr == "", p.stderr  # no warning within the CPUs
    assert read_npy_ids(path("t.npy")) == read_npy_ids(path("one.npy"))


def test_report_settings():
    """A report's configuration lists the settings of the optimizer that ran: no policy-gradient
    settings (rollouts, steps, ...) for a continuous or greedy run; a pg run has them."""
    rows, q, ids, e, qf, idf = standard_files()
    base = ["--embeddings", e, "--quality", qf, "--count", "20", "--quiet"]
    pg_only = ["rollouts", "steps", "lr-max", "lr-min", "schedule", "advantage", "credit", "readout", "logprob",
               "init", "keep-best-rollout"]
    for optimizer in ["continuous", "lazy"]:
        run(base + ["--optimizer", optimizer, "--out", path("c.npy"), "--report", path("c.json")])
        cfg = json.load(open(path("c.json")))["configuration"]
        assert not [k for k in pg_only if k in cfg], (optimizer, cfg)
        assert "calibration-subsets" in cfg  # both learners calibrate
    run(base + FAST + ["--out", path("p.npy"), "--report", path("p.json")])
    cfg = json.load(open(path("p.json")))["configuration"]
    assert all(k in cfg for k in pg_only) and cfg["rollouts"] == 16 and cfg["steps"] == 40, cfg
    assert "iterations" not in cfg, cfg



# --- the continuous learner (--optimizer continuous, and auto) ------------------------------------

def refused(args, names):
    """Exit 2, one line on stderr naming `names`."""
    p = run(args + ["--quiet"], expect=2)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, "expected one line on stderr, got:\n" + p.stderr
    for nm in names:
        assert nm in lines[0], "'%s' not in: %s" % (nm, lines[0])
    return lines[0]


def test_continuous():
    # The program's selection is the library's continuous learner's on the same inputs
    # (tests/cli/continuous_reference.cpp), for pairwise similarity and DiSF.
    for objective in ["pairwise", "disf"]:
        ref = subprocess.run([REF, "20", objective], stdout=subprocess.PIPE, text=True, check=True).stdout.split()
        run(["--demo", "--optimizer", "continuous", "--iterations", "20", "--objective", objective, "--quiet",
             "--out", path("c.txt"), "--report", path("c.json"), "--log", path("c.csv")])
        assert read_text_ids(path("c.txt")) == [int(x) for x in ref], objective
        rep = json.load(open(path("c.json")))
        cfg = rep["configuration"]
        assert cfg["optimizer"] == "continuous" and cfg["optimizer-requested"] == "continuous", cfg
        assert cfg["iterations"] == 20 and cfg["step-rule"] == "normalized" and cfg["polish"] is True, cfg
        assert cfg["step-size"] == 0.5 and cfg["polish-rounds"] == 30, cfg
        assert rep["total"]["steps_run"] == 20
        log = open(path("c.csv")).read().splitlines()
        assert len(log) == 21 and [r.split(",")[1] for r in log[1:]] == [str(i) for i in range(1, 21)], log[:3]
    # Other step settings change the selection and are reported: the same run as the last
    # baseline (DiSF) but for the step settings.
    run(["--demo", "--optimizer", "continuous", "--iterations", "20", "--objective", "disf", "--step-rule", "adam",
         "--step-size", "0.05", "--no-polish", "--quiet", "--out", path("a.txt"), "--report", path("a.json")])
    cfg = json.load(open(path("a.json")))["configuration"]
    assert cfg["step-rule"] == "adam" and cfg["step-size"] == 0.05 and cfg["polish"] is False, cfg
    assert read_text_ids(path("a.txt")) != read_text_ids(path("c.txt"))
    # The report's values against brute force, on the continuous learner's selection.
    rows, q, ids, e, qf, idf = standard_files()
    run(["--embeddings", e, "--quality", qf, "--ids", idf, "--count", "20", "--optimizer", "continuous",
         "--iterations", "25", "--quiet", "--out", path("s.npy"), "--report", path("r.json")])
    sel = read_npy_ids(path("s.npy"))
    check_ids(sel, ids, 20)
    check_report(json.load(open(path("r.json"))), rows, q, ids, sel, [])
    # Auto runs lazy greedy on facility location alone (dense here), with its picks as progress,
    # and refuses the policy gradient's settings there; in a mix with an objective that has a
    # relaxation, dense facility location (which has none) gets stochastic greedy.
    p = run(["--embeddings", e, "--quality", qf, "--count", "20", "--objective", "facility", "--out", path("fa.npy")],
            expect=None)
    assert p.returncode == 0, p.stderr
    assert "optimizer lazy" in p.stdout, p.stdout
    assert "progress: 20/20 picks (100%)" in p.stderr, p.stderr
    run(["--embeddings", e, "--quality", qf, "--count", "20", "--objective", "facility", "--optimizer", "lazy",
         "--quiet", "--out", path("fl.npy")])
    assert read_npy_ids(path("fa.npy")) == read_npy_ids(path("fl.npy"))
    p = run(["--embeddings", e, "--quality", qf, "--count", "20", "--objective", "facility", "--objective", "pairwise",
             "--out", path("fm.npy")], expect=None)
    assert p.returncode == 0 and "optimizer stochastic" in p.stdout, p.stdout + p.stderr
    run(["--embeddings", e, "--quality", qf, "--count", "20", "--objective", "facility", "--optimizer", "stochastic",
         "--quiet", "--out", path("fs.npy")])
    # --epsilon reaches stochastic greedy (0.9: 4 candidates per round, another selection) and
    # the report's configuration.
    run(["--embeddings", e, "--quality", qf, "--count", "20", "--objective", "facility", "--optimizer", "stochastic",
         "--epsilon", "0.9", "--quiet", "--out", path("fe.npy"), "--report", path("fe.json")])
    assert read_npy_ids(path("fe.npy")) != read_npy_ids(path("fs.npy"))
    assert json.load(open(path("fe.json")))["configuration"]["epsilon"] == 0.9
    # Several blocks: the progress counts every block's picks.
    p = run(["--embeddings", e, "--quality", qf, "--count", "30", "--optimizer", "lazy", "--block-size", "250",
             "--out", path("fb.npy")], expect=None)
    assert p.returncode == 0, p.stderr
    assert "progress: 30/30 picks (100%)" in p.stderr, p.stderr
    refused(["--embeddings", e, "--quality", qf, "--count", "20", "--objective", "facility", "--steps", "40",
             "--out", path("x.npy")], ["--steps", "lazy", "auto", "--optimizer pg"])


def test_auto_by_cost():
    """auto gives a block naive greedy where it costs no more operations than the learner, counted
    as two ascents (pairwise, d = 16: S (d + 1) <= 2 x 100 (2 d + 1), S <= 388), else the
    continuous learner; the report names each block's optimizer, and the learner's options are
    refused where no block runs it."""
    rows, q, ids, e, qf, idf = standard_files()
    base = ["--embeddings", e, "--quality", qf, "--ids", idf]
    for count, ran in [("20", "greedy"), ("388", "greedy"), ("389", "continuous")]:
        p = run(base + ["--count", count, "--out", path("a.npy"), "--report", path("a.json")])
        assert "optimizer %s)" % ran in p.stdout, p.stdout
        rep = json.load(open(path("a.json")))
        assert [b["optimizer"] for b in rep["blocks"]] == [ran], rep["blocks"]
        assert rep["configuration"]["optimizer-requested"] == "auto", rep["configuration"]
        run(base + ["--count", count, "--optimizer", ran, "--quiet", "--out", path("b.npy")])
        assert read_npy_ids(path("a.npy")) == read_npy_ids(path("b.npy")), (count, ran)
    # Two blocks of 300 items selecting 150 each: greedy on both.
    p = run(base + ["--count", "300", "--block-size", "300", "--out", path("c.npy"), "--report", path("c.json")])
    assert "naive greedy on every block" in p.stderr, p.stderr
    assert {b["optimizer"] for b in json.load(open(path("c.json")))["blocks"]} == {"greedy"}
    refused(base + ["--count", "20", "--polish-rounds", "5", "--out", path("x.npy")],
            ["--polish-rounds", "greedy on 1 of 1 block", "auto", "--optimizer continuous"])
    refused(base + ["--count", "20", "--log", path("x.csv"), "--out", path("x.npy")], ["--log", "greedy", "auto"])
    assert not os.path.exists(path("x.npy")) and not os.path.exists(path("x.csv"))


def test_continuous_refusals():
    rows, q, ids, e, qf, idf = standard_files()
    base = ["--embeddings", e, "--quality", qf, "--out", path("x.npy")]
    line = refused(base + ["--optimizer", "continuous", "--objective", "facility"], ["--optimizer continuous",
                                                                                    "facility", "no relaxation"])
    assert "pg" in line, line
    refused(base + ["--optimizer", "continuous", "--objective", "pairwise", "--objective", "facility"], ["facility"])
    refused(base + ["--optimizer", "continuous", "--steps", "100"], ["--steps", "--optimizer pg"])
    refused(base + ["--steps", "100"], ["--steps", "auto", "--optimizer pg"])
    refused(base + ["--rollouts", "8"], ["--rollouts", "--optimizer pg"])
    refused(base + ["--optimizer", "pg", "--iterations", "10"], ["--iterations", "--optimizer continuous"])
    refused(base + ["--optimizer", "greedy", "--no-polish"], ["--polish", "--optimizer continuous"])
    refused(base + ["--optimizer", "lazy", "--credit", "item"], ["--credit", "lazy", "--optimizer pg"])
    refused(base + ["--optimizer", "lazy", "--reference-size", "100"], ["--reference-size", "lazy", "--optimizer pg"])
    refused(base + ["--optimizer", "lazy", "--epsilon", "0.1"], ["--epsilon", "lazy", "--optimizer stochastic"])
    refused(base + ["--optimizer", "stochastic", "--epsilon", "1"], ["--epsilon", "(0, 1)"])
    refused(base + ["--optimizer", "greedy", "--log", path("g.csv")], ["--log", "greedy", "--optimizer continuous or pg"])
    refused(base + ["--objective", "facility", "--plot", path("g.svg")], ["--plot", "lazy", "auto"])
    refused(base + ["--optimizer", "continuous", "--scaling", "group"], ["--scaling", "group"])
    refused(base + ["--optimizer", "greedy", "--checkpoint", path("ck"), "--checkpoint-every", "5"],
            ["--checkpoint-every", "whole blocks"])
    for extra, names in [(["--iterations", "-1"], ["--iterations"]), (["--step-size", "0"], ["--step-size"]),
                         (["--step-rule", "newton"], ["--step-rule"]), (["--adam-beta1", "1"], ["--adam-beta1"]),
                         (["--polish-candidates", "0"], ["--polish-candidates"]),
                         (["--polish-seconds", "-1"], ["--polish-seconds"])]:
        refused(base + ["--optimizer", "continuous"] + extra, names)
    assert not os.path.exists(path("x.npy"))
    assert not os.path.exists(path("ck"))


def test_continuous_interrupt():
    # The continuous learner's snapshots (--checkpoint-every iterations; p, the logits, Adam's
    # moments, the best read-out): SIGINT inside block 0 saves its iterate, exit 130, no output;
    # --resume continues block 0 from that iteration, is killed inside block 1, and a second
    # --resume gives the uninterrupted run's ids and log (its history) exactly.
    rows, q, ids = make_corpus(2400, 16, seed=9)
    e = npy_f32(path("emb.npy"), rows)
    qf = npy_vec(path("q.npy"), q)
    idf = npy_vec(path("ids.npy"), ids, "<i8")
    base = ["--embeddings", e, "--quality", qf, "--ids", idf, "--ratio", "0.1", "--block-size", "1000",
            "--optimizer", "continuous", "--iterations", "4000", "--step-rule", "adam"]
    run(base + ["--out", path("full.npy"), "--log", path("full.csv"), "--quiet"])
    full = read_npy_ids(path("full.npy"))
    ck = path("ck")
    ckpt = ["--out", path("r.npy"), "--log", path("r.csv"), "--report", path("r.json"), "--checkpoint", ck,
            "--checkpoint-every", "50", "--quiet"]
    interrupt(base + ckpt, os.path.join(ck, "block-0.snapshot"), signal.SIGINT, path("r.npy"))
    assert "done 0" not in open(os.path.join(ck, "manifest")).read()
    snap = open(os.path.join(ck, "block-0.snapshot"), "rb").read()
    step = int(snap.split(b"\nstep ")[1].split(b"\n")[0])
    assert 50 <= step < 4000, step  # block 0 was stopped inside, after a snapshot
    proc = subprocess.Popen([PROG] + base + ckpt + ["--resume"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: os.path.exists(os.path.join(ck, "block-1.snapshot")), proc)
    proc.kill()
    proc.communicate(timeout=60)
    assert "done 0" in open(os.path.join(ck, "manifest")).read()
    snap1 = os.path.join(ck, "block-1.snapshot")
    snap = open(snap1, "rb").read()
    step = int(snap.split(b"\nstep ")[1].split(b"\n")[0])
    body = snap[:snap.rindex(b"\nchecksum ")]  # the last line: the checksum of every byte before it
    assert snap == sealed_bytes(body)
    head, rest = body.split(b"\nhistory ", 1)
    history, tail = rest.split(b"\n", 1)

    def with_history(change):
        h = json.loads(history)
        change(h)
        return head + b"\nhistory " + json.dumps(h).encode() + b"\n" + tail

    # A byte changed: refused by its checksum, naming the file.
    with open(snap1, "wb") as f:
        f.write(snap.replace(b"\nstep ", b"\nstep 1", 1))
    p = run(base + ckpt + ["--resume"], expect=2)
    assert "block-1.snapshot: its checksum does not match its content" in p.stderr, p.stderr
    # Sealed again, to reach the checks behind the checksum; refused, naming the file: broken
    # JSON, a value that is not a number, a history shorter than the step reached (valid JSON: the
    # resume would run on with a wrong log).
    for damaged in [body.replace(b"\nhistory [", b"\nhistory [[1,", 1),
                    with_history(lambda h: h[-1].__setitem__(2, "zz")),
                    with_history(lambda h: h.pop())]:
        with open(snap1, "wb") as f:
            f.write(sealed_bytes(damaged))
        p = run(base + ckpt + ["--resume"], expect=2)
        assert "block-1.snapshot: truncated or damaged snapshot" in p.stderr, p.stderr
    with open(snap1, "wb") as f:
        f.write(snap)
    # Without --quiet: the progress counts only the iterations run, those of blocks 1 (after
    # its snapshot) and 2; a block started afresh would run more than planned.
    err = run(base + ckpt[:-1] + ["--resume"]).stderr
    left = 2 * 4000 - step
    assert "progress: %d/%d iterations (100%%)" % (left, left) in err, (step, err)
    assert read_npy_ids(path("r.npy")) == full, "resumed selection differs from the uninterrupted run"
    assert open(path("r.csv")).read() == open(path("full.csv")).read(), "resumed log differs"
    rep = json.load(open(path("r.json")))
    assert rep["blocks"][0]["from_checkpoint"] and not rep["blocks"][1]["from_checkpoint"], rep["blocks"]


def test_greedy_interrupt():
    # A signal ends a greedy block mid-run (greedy_options::stop), not after the block: a naive
    # facility-location greedy that needs minutes stops within seconds, exit 130, no output.
    rows, q, ids = make_corpus(6000, 32, seed=3)
    e = npy_f32(path("emb.npy"), rows)
    qf = npy_vec(path("q.npy"), q)
    proc = subprocess.Popen([PROG, "--embeddings", e, "--quality", qf, "--count", "600", "--optimizer", "greedy",
                             "--objective", "facility", "--quiet", "--out", path("g.npy")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(2.0)
    assert proc.poll() is None, "the greedy run ended before it could be interrupted"
    t0 = time.time()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    waited = time.time() - t0
    assert proc.returncode == 130, (proc.returncode, err)
    assert waited < 5.0, "the greedy took %.1f s to stop after SIGINT" % waited
    assert not os.path.exists(path("g.npy"))


def test_id_types():
    """uint64 ids (>= 2^63 here) come out as uint64, negative int64 ids as int64, in every output
    format, from one run, a --resume of a finished checkpoint and a --shard merge alike."""
    rows, q, _ = make_corpus(600, 16, seed=5)
    e = npy_f32(path("emb.npy"), rows)
    qf = npy_vec(path("q.npy"), q)
    cases = {"<u8": [2**63 + 39 + 1000 * i for i in range(600)],
             "<i8": [-(2**62) + 7919 * i if i % 2 else -1 - i for i in range(600)]}
    for descr, ids in cases.items():
        tag, fmt, dtype = {"<u8": ("u8", "Q", "uint64"), "<i8": ("i8", "q", "int64")}[descr]
        idf = write(path(tag + "-ids.npy"), npy_bytes(descr, (600,), struct.pack("<600" + fmt, *ids)))
        base = ["--embeddings", e, "--quality", qf, "--ids", idf, "--ratio", "0.1", "--block-size", "250"] + FAST
        one = path(tag + "-one")
        run(base + ["--out", one + ".npy", "--report", one + ".json"])
        sel = read_npy_ids(one + ".npy", descr)
        check_ids(sel, ids, 60)
        assert json.load(open(one + ".json"))["configuration"]["ids-dtype"] == dtype
        for ext in (".csv", ".txt"):
            run(base + ["--out", one + ext])
            assert read_text_ids(one + ext) == sel, ext
        # Every block from the checkpoint's records: the same ids.
        ck = path(tag + "-ck")
        run(base + ["--checkpoint", ck, "--out", path(tag + "-ck1.npy")])
        run(base + ["--checkpoint", ck, "--resume", "--out", path(tag + "-ck2.txt")])
        assert read_text_ids(path(tag + "-ck2.txt")) == sel
        # Two shards, merged: the same ids.
        parts = path(tag + "-parts")
        for i in range(2):
            run(base + ["--shard", "%d/2" % i, "--parts", parts])
        run(["merge", "--out", path(tag + "-merged.npy"), "--report", path(tag + "-merged.json"), parts])
        assert read_npy_ids(path(tag + "-merged.npy"), descr) == sel
        assert json.load(open(path(tag + "-merged.json")))["configuration"]["ids-dtype"] == dtype
    # A uint64 id given twice is named as the file holds it.
    dup = cases["<u8"][:599] + [cases["<u8"][3]]
    write(path("dup-u8.npy"), npy_bytes("<u8", (600,), struct.pack("<600Q", *dup)))
    expect_bad(["--embeddings", e, "--quality", qf, "--ids", path("dup-u8.npy")],
               ["dup-u8.npy", "duplicate id %d at rows 3 and 599" % dup[3]])


def test_quality_columns():
    """--quality FILE.csv:NAME reads one column; a whole CSV with an id-like column is refused; the
    columns read are said on stderr and in the report; the file part is the input."""
    rows, q, ids, e, _, idf = standard_files()
    q2 = [x * 0.5 + 0.1 for x in q]
    os.mkdir(path("a:b"))  # a folder whose name holds ':'
    csv = path("a:b/q.csv")
    with open(csv, "w") as f:
        f.write("doc_id,score,score2\n")
        for i, (x, y) in enumerate(zip(q, q2)):
            f.write("%d,%r,%r\n" % (10**12 + i, x, y))
    npy_vec(path("score.npy"), q, "<f8")
    npy_vec(path("score2.npy"), q2, "<f8")
    base = ["--embeddings", e, "--ids", idf, "--ratio", "0.1"] + FAST
    expect_bad(base + ["--quality", csv], ["q.csv", "column 'doc_id' looks like ids", "--quality %s:NAME" % csv,
                                           "doc_id, score, score2"])
    run(base + ["--quality", path("score.npy"), "--out", path("npy.npy")])
    p = run([x for x in base if x != "--quiet"] + ["--quality", csv + ":score", "--out", path("col.npy"),
                                                     "--report", path("col.json")])
    assert "quality columns: %s (score)\n" % csv in p.stderr, p.stderr
    assert read_npy_ids(path("col.npy")) == read_npy_ids(path("npy.npy"))
    conf = json.load(open(path("col.json")))["configuration"]
    assert conf["quality"] == [csv + ":score"] and conf["quality-columns"] == [csv + " (score)"], conf
    # Two columns of one file, each named, weighed as two .npy columns.
    two = ["--quality-weights", "1,2"]
    run(base + two + ["--quality", path("score.npy"), "--quality", path("score2.npy"), "--out", path("npy2.npy")])
    run(base + two + ["--quality", csv + ":score", "--quality", csv + ":score2", "--out", path("col2.npy")])
    assert read_npy_ids(path("col2.npy")) == read_npy_ids(path("npy2.npy"))
    expect_bad(base + ["--quality", csv + ":scor"], ["q.csv", "no column 'scor'", "doc_id, score, score2"])
    # A spreadsheet's byte order mark is not part of the first name: the id column is still seen.
    with open(csv, "rb") as f:
        text = f.read()
    bom = write(path("bom.csv"), b"\xef\xbb\xbf" + text)
    expect_bad(base + ["--quality", bom], ["bom.csv", "column 'doc_id' looks like ids"])
    # Another column of the same file is another input: a checkpoint refuses it.
    ck = path("ck")
    run(base + ["--quality", csv + ":score", "--checkpoint", ck])
    p = run(base + ["--quality", csv + ":score2", "--checkpoint", ck, "--resume"], expect=2)
    assert "refused" in p.stderr and "inputs" in p.stderr, p.stderr
    # The output checks see the file, not FILE.csv:NAME (last: expect_bad removes its --out first).
    expect_bad(base + ["--quality", csv + ":score"], ["--out", "is an input", "--quality"], out=csv)


def test_csv_quoting():
    """RFC 4180 quoting in quality CSV files: quoted numbers, quoted header names with "" and a
    line break inside; a quote left open is refused naming the file and line."""
    rows, q, ids, e, _, idf = standard_files()
    npy_vec(path("score.npy"), q, "<f8")
    base = ["--embeddings", e, "--ids", idf, "--ratio", "0.1"] + FAST
    run(base + ["--quality", path("score.npy"), "--out", path("npy.npy")])
    with open(path("quoted.csv"), "w") as f:
        f.write('"the ""best""\nscore"\n' + "".join(' "%r" \n' % x for x in q))
    run(base + ["--quality", path("quoted.csv"), "--out", path("quoted.npy"), "--report", path("quoted.json")])
    assert read_npy_ids(path("quoted.npy")) == read_npy_ids(path("npy.npy"))
    assert json.load(open(path("quoted.json")))["configuration"]["quality-columns"] == \
        [path("quoted.csv") + ' (the "best"\nscore)']
    # A quoted name names a column; quoted and bare fields mix.
    with open(path("two.csv"), "w") as f:
        f.write('"other","the ""best"" score"\n' + "".join('%s,"%r"\n' % ('"1"' if i % 2 else "2", x)
                                                         for i, x in enumerate(q)))
    run(base + ["--quality", path("two.csv") + ':the "best" score', "--out", path("two.npy")])
    assert read_npy_ids(path("two.npy")) == read_npy_ids(path("npy.npy"))
    with open(path("open.csv"), "w") as f:
        f.write('score\n0.5\n"0.25\n0.75\n')
    expect_bad(base + ["--quality", path("open.csv")], ["open.csv", "line 3: a quoted field is not closed"])
    with open(path("after.csv"), "w") as f:
        f.write('score\n"0.5"x\n')
    expect_bad(base + ["--quality", path("after.csv")], ["after.csv", "line 2: text after a quoted field"])


def run_scenario(scenarios, prefix="dmcli-"):
    """Runs `test_<argv[2]>` of `scenarios` (a test script's globals) on the program argv[1] (and
    the continuous reference argv[3], if given) in a fresh temporary folder."""
    global PROG, TMP, REF
    PROG = os.path.abspath(sys.argv[1])
    name = sys.argv[2]
    REF = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else None
    with tempfile.TemporaryDirectory(prefix=prefix) as d:
        TMP = d
        scenarios["test_" + name]()
    print("ok:", name)


if __name__ == "__main__":
    run_scenario(globals())
