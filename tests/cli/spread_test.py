#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The selection does not depend on how the blocks are spread (issue 12).

    spread_test.py PROGRAM TEST_NAME MPI_DEFINITIONS

One process is the reference: MPI runs (mpirun -np R, R = 1, 2, 3) and scheduler shards
(--shard I/N, N = 1, 2, 5, then merge) must write the same ids, log and plot bytes and the same
report totals, on the demo corpus split into 5 blocks, for two objectives with the policy gradient, with and
without --prune, and for the continuous learner; and on a corpus of five files in four groups
(issue 46), shards with and without a plan (`datamask-select plan`) and MPI ranks, each worker
reading its own files (a NaN is said by the worker that reads it). Damaged or foreign parts are
refused or run again, and a failed write leaves no output. MPI scenarios exit 77 (ctest: skipped) with the reason when the program was built
without MPI (MPI_DEFINITIONS, the program's compile definitions, lacks DATAMASK_SELECT_MPI=1)
or mpirun is missing.
"""
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_test as ct  # noqa: E402  (the checksums of parts)

PROG = None
TMP = None
HAS_MPI = False
SKIP = 77

# 5 blocks of about 4000 items; few steps: the scenarios test the spreading, not the learner.
BASE = ["--demo", "--block-size", "4000", "--threads", "1", "--quiet"]
CASES = {
    "pairwise": ["--objective", "pairwise", "--optimizer", "pg", "--steps", "30", "--rollouts", "16"],
    "facility": ["--objective", "facility", "--optimizer", "pg", "--steps", "20", "--rollouts", "8", "--ratio", "0.02"],
    # The continuous learner (auto's choice for pairwise).
    "continuous": ["--objective", "pairwise", "--iterations", "40"],
    # Facility location on each block's kNN graph: every block's graph record reaches the report.
    "knn": ["--objective", "facility", "--neighbors", "16", "--optimizer", "continuous", "--iterations", "20"],
}
PRUNE = ["--prune", "0.3"]
# (case, prune): the shard counts and MPI rank counts compared with one process. The continuous
# learner is checked without --prune at the largest spreads only, to keep the tests short.
SPREADS = {(case, prune): ((1, 2, 5), (1, 2, 3)) for case in ("pairwise", "facility") for prune in (0, 1)}
SPREADS[("continuous", 0)] = ((5,), (3,))
SPREADS[("knn", 0)] = ((2,), (2,))


def path(name):
    return os.path.join(TMP, name)


def outputs(tag):
    return ["--out", path(tag + ".npy"), "--report", path(tag + ".json"), "--log", path(tag + ".csv"),
            "--plot", path(tag + ".svg")]


def run(args, expect=0, env=None):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if expect is not None and p.returncode != expect:
        raise AssertionError("exit %d (expected %d) for %s\nstdout:\n%s\nstderr:\n%s" %
                             (p.returncode, expect, " ".join(args), p.stdout, p.stderr))
    return p


def mpi_env(**extra):
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", OMP_WAIT_POLICY="PASSIVE")
    env.update(extra)
    return env


def mpirun(ranks, args):
    return ["mpirun", "--oversubscribe", "-np", str(ranks), PROG] + args


def read(name):
    with open(path(name), "rb") as f:
        return f.read()


def totals(tag):
    """The report's values that must not depend on the spreading (timings and paths do)."""
    with open(path(tag + ".json")) as f:
        r = json.load(f)
    # "objective" holds the total and every term's raw value, scale and weight.
    keys = ("block", "items", "kept", "selected", "steps_run", "zero_variance_steps", "nonfinite_steps", "objective")
    blocks = [{k: b[k] for k in keys} for b in r["blocks"]]
    # A block's kNN graph record and the run's (graph-built), less their timings.
    untimed = lambda g: {k: v for k, v in g.items() if k != "seconds"} if g else g
    for b, src in zip(blocks, r["blocks"]):
        b["graph"] = untimed(src.get("graph"))
    t = {k: r["total"][k] for k in ("blocks", "selected", "steps_run", "objective")}
    t["graph-built"] = untimed(r["configuration"].get("graph-built"))
    assert ("graph" in r["total"]["seconds"]) == (t["graph-built"] is not None), "%s: graph seconds" % tag
    assert t["objective"]["terms"] and all(b["objective"]["terms"] or b["selected"] == 0 for b in blocks), \
        "%s: a report without term values compares nothing" % tag
    return r["input"], r["prune_threshold"], blocks, t


def same_outputs(tag, ref):
    for ext in (".npy", ".csv", ".svg"):
        if read(tag + ext) != read(ref + ext):
            raise AssertionError("%s%s differs from the one-process %s%s" % (tag, ext, ref, ext))
    a, b = totals(tag), totals(ref)
    if a != b:
        raise AssertionError("report of %s differs from one process:\n%s\n%s" % (tag, a, b))


def no_outputs(tag):
    left = [f for f in os.listdir(TMP) if f.startswith(tag + ".")]
    if left:
        raise AssertionError("a failed run left outputs: %s" % left)


def reference(case, prune):
    tag = "one-%s-%d" % (case, prune)
    if not os.path.exists(path(tag + ".npy")):
        run([PROG] + BASE + CASES[case] + (PRUNE if prune else []) + outputs(tag))
        with open(path(tag + ".json")) as f:
            r = json.load(f)
        assert r["total"]["blocks"] == 5, "the demo at --block-size 4000 should have 5 blocks"
        if case in ("continuous", "knn"):
            assert r["configuration"]["optimizer"] == "continuous", r["configuration"]
        if case == "knn":
            built = r["configuration"]["graph-built"]
            assert built["neighbors"] == 16 and all(b["graph"]["neighbors"] == 16 for b in r["blocks"]), built
            assert built["bytes"] == max(b["graph"]["bytes"] for b in r["blocks"]), built
    return tag


def need_mpi():
    if not HAS_MPI:
        print("SKIPPED: datamask-select was built without MPI (install libopenmpi-dev, reconfigure)")
        sys.exit(SKIP)
    if shutil.which("mpirun") is None:
        print("SKIPPED: mpirun not found (Debian: openmpi-bin)")
        sys.exit(SKIP)


# --- scenarios ------------------------------------------------------------------------------------

def test_shards():
    for (case, prune), (shard_counts, _) in SPREADS.items():
        ref = reference(case, prune)
        args = BASE + CASES[case] + (PRUNE if prune else [])
        for n in shard_counts:
            parts = path("parts-%s-%d-%d" % (case, prune, n))
            for i in range(n):
                run([PROG] + args + ["--shard", "%d/%d" % (i, n), "--parts", parts])
                assert os.path.exists(os.path.join(parts, "completions", "%05d-of-%05d" % (i, n)))
            tag = "merged-%s-%d-%d" % (case, prune, n)
            run([PROG, "merge"] + outputs(tag) + [parts])
            same_outputs(tag, ref)


def test_shard_skip():
    args = BASE + CASES["pairwise"]
    parts = path("parts")
    p = run([PROG] + args + ["--shard", "1/2", "--parts", parts])
    part = os.path.join(parts, "part-00001-of-00002.json")
    before = os.stat(part).st_mtime_ns
    time.sleep(0.05)
    p = run([PROG] + [a for a in args if a != "--quiet"] + ["--shard", "1/2", "--parts", parts])
    assert "finished" in p.stderr and "skipped" in p.stderr, p.stderr
    assert os.stat(part).st_mtime_ns == before, "a finished shard ran again"
    # A finished part of other options is not taken for this run's.
    p = run([PROG] + args + ["--steps", "31", "--shard", "1/2", "--parts", parts], expect=2)
    assert "--steps" in p.stderr and "remove it" in p.stderr, p.stderr
    # A damaged part (a block gone) is not finished: the shard runs again and replaces it.
    with open(part) as f:
        doc = json.load(f)
    held = len(doc["blocks"])
    doc["blocks"].pop()
    with open(part, "w") as f:
        json.dump(doc, f)
    p = run([PROG] + [a for a in args if a != "--quiet"] + ["--shard", "1/2", "--parts", parts])
    assert "running the shard again" in p.stderr, p.stderr
    with open(part) as f:
        assert len(json.load(f)["blocks"]) == held, "the damaged part was not replaced"
    # --parts is checked before any work: a folder that cannot be made fails at once.
    with open(path("afile"), "w") as f:
        f.write("x")
    t0 = time.time()
    p = subprocess.run([PROG] + BASE + ["--objective", "pairwise", "--optimizer", "pg", "--steps", "100000",
                        "--shard", "0/2", "--parts", path("afile/sub")], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    assert p.returncode == 2 and "--parts" in p.stderr, (p.returncode, p.stderr)
    assert time.time() - t0 < 30, "--parts was checked after the work"
    # Shards write parts, not outputs; a shard needs its folder; I < N.
    for bad, word in ((["--shard", "0/2", "--parts", parts, "--out", path("x.npy")], "merge"),
                      (["--shard", "0/2"], "--parts"), (["--parts", parts], "--shard"),
                      (["--shard", "2/2", "--parts", parts], "0 <= I < N"),
                      (["--shard", "two", "--parts", parts], "I/N")):
        p = run([PROG] + args + bad, expect=2)
        assert word in p.stderr, (bad, p.stderr)


def test_slurm():
    args = BASE + CASES["pairwise"] + ["--shard", "slurm", "--parts", path("parts")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    p = run([PROG] + args, expect=2, env=env)
    assert "SLURM_ARRAY_TASK_ID is not set" in p.stderr, p.stderr
    # --array=1-2: task ids 1 and 2 are shards 0 and 1 of 2.
    for task in (1, 2):
        run([PROG] + args, env=dict(env, SLURM_ARRAY_TASK_ID=str(task), SLURM_ARRAY_TASK_MIN="1",
                                    SLURM_ARRAY_TASK_MAX="2", SLURM_ARRAY_TASK_COUNT="2"))
        assert os.path.exists(path("parts/completions/%05d-of-00002" % (task - 1)))
    run([PROG, "merge", "--out", path("slurm.npy"), "--log", path("slurm.csv"), "--plot", path("slurm.svg"),
         "--report", path("slurm.json"), path("parts")])
    same_outputs("slurm", reference("pairwise", 0))
    # --array=1,3,8: not evenly spaced.
    p = run([PROG] + args, expect=2, env=dict(env, SLURM_ARRAY_TASK_ID="3", SLURM_ARRAY_TASK_MIN="1",
                                              SLURM_ARRAY_TASK_MAX="8", SLURM_ARRAY_TASK_COUNT="3"))
    assert "evenly spaced" in p.stderr, p.stderr


def shard_parts(folder, args, n):
    for i in range(n):
        run([PROG] + args + ["--shard", "%d/%d" % (i, n), "--parts", folder])
    return [os.path.join(folder, "part-%05d-of-%05d.json" % (i, n)) for i in range(n)]


def test_merge_refusals():
    args = BASE + CASES["pairwise"]
    three = shard_parts(path("three"), args, 3)
    two = shard_parts(path("two"), args, 2)
    other_seed = shard_parts(path("seed"), args + ["--seed", "7"], 3)
    other_opts = shard_parts(path("opts"), args + ["--lambda", "0.4"], 3)
    cases = [
        (three[:2], "(blocks 3, 4)"),                     # shard 2/3 missing: blocks 3 and 4
        (three + [two[0]], "is in both"),                 # block 0 twice
        (three[:2] + [other_seed[2]], "other inputs"),    # another demo corpus
        (three[:2] + [other_opts[2]], "--lambda"),        # other options, named
        ([path("nothing.json")], "cannot open"),
    ]
    os.mkdir(path("no-parts"))
    with open(path("no-parts/notes.json"), "w") as f:  # a folder contributes its part-*.json only
        f.write("{}")
    cases.append(([path("no-parts")], "no-parts: holds no part-*.json file"))
    with open(path("junk.json"), "w") as f:
        f.write("{\"format\": \"something else\"}")
    cases.append(([path("junk.json")], "not a datamask-select part"))
    def damaged(name, change, text=lambda t: t):
        with open(three[2]) as f:
            original = f.read()
        assert ct.seal(ct.parse_doc(original)) == json.loads(original)  # the helper seals as the program
        doc = ct.parse_doc(text(original))
        change(doc)
        with open(path(name), "w") as f:
            json.dump(ct.seal(doc), f)
        return three[:2] + [path(name)]

    def long_number(t):
        # A number as the program may write it: 0.00448948372 comes out as 0.0044894837199999996,
        # not as Python's shortest text. A seal over Python's text made this part fail its
        # checksum instead of reaching the version check.
        seconds = json.loads(t)["blocks"][0]["seconds"]["optimize"]
        return t.replace(json.dumps(seconds), "0.0044894837199999996", 1)
    cases += [
        (damaged("garbage.json", lambda d: d["blocks"][0]["exact"].update(objective="garbage")),
         "garbage.json: damaged part"),
        (damaged("term.json", lambda d: d["blocks"][0]["history"][0][4].pop()), "term.json: damaged part"),
        (damaged("version.json", lambda d: d.update(version="0.0.0-other")), "0.0.0-other"),
        (damaged("long.json", lambda d: d.update(version="0.0.0-other"), long_number), "0.0.0-other"),
        (damaged("backend.json", lambda d: d["configuration"].update(backend="other")), "ran on the other backend"),
        (damaged("backend5.json", lambda d: d["configuration"].update(backend=5)),
         "backend5.json: damaged part: its configuration names no backend"),
        (damaged("noconf.json", lambda d: d.update(configuration=None)), "noconf.json: damaged part"),
        (damaged("step0.json", lambda d: d["blocks"][0]["history"][0].__setitem__(0, 0)),
         "step0.json: damaged part: the history's step 1 is numbered 0"),
        (damaged("short.json", lambda d: d["blocks"][0]["history"].pop()), "short.json: damaged part"),
    ]
    for parts, word in cases:
        p = run([PROG, "merge", "--out", path("m.npy")] + parts, expect=2)
        assert word in p.stderr, (parts, word, p.stderr)
        no_outputs("m")
    p = run([PROG, "merge", "--out", three[0]] + three, expect=2)  # an output over a part
    assert "is an input" in p.stderr, p.stderr
    p = run([PROG, "merge", "--out", three[0].replace(".json", ".ids.npy")] + three, expect=2)  # over its ids
    assert "is an input" in p.stderr, p.stderr
    # A part's ids file (binary, beside it): changed, cut short or missing, refused naming it.
    shutil.copytree(path("three"), path("ids-damaged"))
    ids_file = path("ids-damaged/part-00001-of-00003.ids.npy")
    with open(ids_file, "rb") as f:
        original = f.read()
    for name, data, word in [("changed", original[:-8] + bytes(8), "do not match their checksum"),
                             ("cut", original[:-8], "truncated"),
                             ("missing", None, "cannot read the part's ids")]:
        if data is None:
            os.remove(ids_file)
        else:
            with open(ids_file, "wb") as f:
                f.write(data)
        p = run([PROG, "merge", "--out", path("m.npy"), path("ids-damaged")], expect=2)
        assert ids_file in p.stderr and word in p.stderr, (name, p.stderr)
        no_outputs("m")
    p = run([PROG, "merge"] + three, expect=2)
    assert "nothing to write" in p.stderr, p.stderr
    # The run's --quiet is merge's too; --threads is refused (merge has no parallel work), not ignored.
    run([PROG, "merge", "--quiet", "--out", path("q.npy")] + three)
    p = run([PROG, "merge", "--threads", "2", "--out", path("m.npy")] + three, expect=2)
    assert "--threads" in p.stderr and "one thread" in p.stderr, p.stderr
    no_outputs("m")
    # Without MPI, a merge started by mpirun refuses instead of writing once per copy.
    if not HAS_MPI and shutil.which("mpirun"):
        p = run(mpirun(2, ["merge", "--out", path("m.npy")] + three), expect=None, env=mpi_env())
        assert p.returncode != 0 and "without MPI" in p.stderr, p.stderr
        no_outputs("m")


def test_output_set():
    """The outputs are replaced as a set: a failure on one (its folder removed during the run)
    leaves the others unwritten."""
    gone = path("gone")
    os.mkdir(gone)
    args = [PROG, "--demo", "--block-size", "4000", "--threads", "1", "--objective", "pairwise", "--optimizer", "pg",
            "--steps", "30", "--rollouts", "16", "--out", path("set.npy"), "--report", path("set.json"),
            "--log", os.path.join(gone, "set.csv")]
    job = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in job.stderr:  # the paths were checked before this line
        if line.startswith("optimizer:"):
            break
    shutil.rmtree(gone)
    out, err = job.communicate(timeout=120)
    assert job.returncode == 2 and "set.csv" in err, (job.returncode, err)
    no_outputs("set")


def test_mpi():
    need_mpi()
    for (case, prune), (_, rank_counts) in SPREADS.items():
        ref = reference(case, prune)
        for ranks in rank_counts:
            tag = "mpi-%s-%d-%d" % (case, prune, ranks)
            run(mpirun(ranks, BASE + CASES[case] + (PRUNE if prune else []) + outputs(tag)), env=mpi_env())
            same_outputs(tag, ref)


def rank_pids(marker):
    """The processes of this test's MPI job, by rank (from their environment)."""
    pids = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        except OSError:
            continue
        if env.get(b"DM_SPREAD_TEST") == marker.encode() and b"OMPI_COMM_WORLD_RANK" in env:
            pids[int(env[b"OMPI_COMM_WORLD_RANK"])] = int(pid)
    return pids


def test_mpi_failure():
    need_mpi()
    # Enough steps that the job is still running when a rank is killed.
    learn = BASE + ["--objective", "pairwise", "--optimizer", "pg", "--steps", "200", "--rollouts", "16"]
    run([PROG] + learn + outputs("long"))
    ck = path("ck")
    args = learn + ["--checkpoint", ck, "--checkpoint-every", "10"]
    env = mpi_env(DM_SPREAD_TEST=TMP)
    job = subprocess.Popen(mpirun(2, args + outputs("killed")), env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and job.poll() is None:
        done = [f for f in os.listdir(ck)] if os.path.isdir(ck) else []
        pids = rank_pids(TMP)
        if any(f.endswith(".done") for f in done) and 1 in pids:
            os.kill(pids[1], signal.SIGKILL)
            print("killed rank 1 (pid %d) after %s" % (pids[1], sorted(f for f in done if f.endswith(".done"))))
            break
        time.sleep(0.005)
    out, err = job.communicate(timeout=60)
    assert job.returncode != 0, "the job finished before rank 1 was killed:\n" + err
    no_outputs("killed")
    # --resume with another R: the uninterrupted result.
    run(mpirun(3, args + ["--resume"] + outputs("resumed")), env=mpi_env())
    same_outputs("resumed", "long")
    with open(path("resumed.json")) as f:
        r = json.load(f)
    assert r["resumed"] is True and any(b["from_checkpoint"] for b in r["blocks"]), r["blocks"]

    # A rank that fails on its own blocks (block 1 keeps too few items after the prune) ends the
    # job with a non-zero exit, and nothing is written.
    bad = BASE + ["--optimizer", "greedy", "--ratio", "0.1", "--prune", "0.9"]
    bad_outputs = outputs("bad")[:4]  # --out and --report: a greedy has no log
    p = run([PROG] + bad + bad_outputs, expect=2)
    assert "block 1" in p.stderr, p.stderr
    p = run(mpirun(3, bad + bad_outputs), expect=None, env=mpi_env())
    assert p.returncode != 0, p.stderr
    assert "rank 1 of 3" in p.stderr and "block 1" in p.stderr, p.stderr
    no_outputs("bad")


# --- a corpus of several files: groups, each worker reading its own -------------------------------

def fingerprint_of(name, size):
    """corpus.hpp's file_fingerprint: a file's name (not its folder) and size."""
    base = os.path.basename(name).encode()
    return ct.mix64(ct.mix64(size) ^ ct.hash_bytes(base))


def npy_data(name):
    with open(name, "rb") as f:
        raw = f.read()
    head = struct.unpack_from("<H", raw, 8)[0]
    return raw, raw[10 + head:]


def input_hash(embeddings, columns, block_size):
    """The report's input hash, computed here from the specification: the fingerprint (the rows,
    each file's name, size and d, each score or id file's name and size) and each group's content
    hash (its files' bytes, then its rows of each column's data), combined in group order.
    `embeddings`: (path, rows, cols); `columns`: (path, item bytes)."""
    n = sum(r for _, r, _ in embeddings)
    fp = ct.mix64(0x64617461 ^ n)
    for name, _, cols in embeddings:
        fp = ct.mix64(fp ^ fingerprint_of(name, os.path.getsize(name)) ^ ct.mix64(cols))
    for name, _ in columns:
        fp = ct.mix64(fp ^ fingerprint_of(name, os.path.getsize(name)))
    groups, group, rows, start = [], [], 0, 0
    for e in embeddings:
        group.append(e)
        rows += e[1]
        if rows >= block_size:
            groups.append((group, start, start + rows))
            start, group, rows = start + rows, [], 0
    if group:
        groups.append((group, start, start + rows))
    h = fp
    for files, lo, hi in groups:
        g = 0
        for name, _, _ in files:
            with open(name, "rb") as f:
                g = ct.mix64(g ^ ct.hash_bytes(f.read()))
        for name, item in columns:
            g = ct.mix64(g ^ ct.hash_bytes(npy_data(name)[1][lo * item:hi * item]))
        h = (ct.mix64(h ^ g) + 0x632BE59BD9B4E019) & ct.M64
    return "%016x" % h


SIZES, DIMS = (7000, 5000, 2500, 3500, 6000), 16  # 24000 rows in 5 files
GROUPED = ["--block-size", "5000", "--ratio", "0.05", "--threads", "1", "--quiet"]
# Groups of files closed at 5000 rows: {7000} 2 blocks, {5000} 1, {2500, 3500} 2, {6000} 2.


def npy_file(name, descr, shape, payload):
    shape_txt = "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
    d = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_txt)
    d += " " * ((64 - (10 + len(d) + 1) % 64) % 64) + "\n"
    with open(path(name), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode("latin1") + payload)
    return path(name)


def grouped_input(bad=None, tag="ok"):
    """Five embedding files in a folder (a NaN at `bad` = (file, row, column)), uint64 ids and a
    quality column; returns the program's input options, the files (path, rows, cols) and the
    columns (path, item bytes)."""
    rng = random.Random(12)
    folder = path("emb-" + tag)
    os.makedirs(folder)
    files = []
    for s, rows in enumerate(SIZES):
        centre = [rng.gauss(0.0, 1.0) for _ in range(DIMS)]
        v = [centre[j % DIMS] + rng.gauss(0.0, 0.5) for j in range(rows * DIMS)]
        if bad and bad[0] == s:
            v[bad[1] * DIMS + bad[2]] = float("nan")
        files.append((npy_file("emb-%s/part-%d.npy" % (tag, s), "<f4", (rows, DIMS),
                               struct.pack("<%df" % len(v), *v)), rows, DIMS))
    n = sum(SIZES)
    ids = list(range(n))
    rng.shuffle(ids)
    ids = [(1 << 63) + 3 * i for i in ids]
    q = [rng.random() for _ in range(n)]
    columns = [(npy_file("q-%s.npy" % tag, "<f4", (n,), struct.pack("<%df" % n, *q)), 4),
               (npy_file("ids-%s.npy" % tag, "<u8", (n,), struct.pack("<%dQ" % n, *ids)), 8)]
    return ["--embeddings", folder, "--quality", columns[0][0], "--ids", columns[1][0]], files, columns


def test_groups():
    """Shards with and without a plan, and MPI ranks, on a corpus of several groups: the outputs
    of one process, bit for bit, and the input hash computed here from the files."""
    args, files, columns = grouped_input()
    for prune in ([], PRUNE):
        for case in (["--optimizer", "continuous", "--iterations", "30"], CASES["pairwise"]):
            opts = args + GROUPED + case + prune
            run([PROG] + opts + outputs("one"))
            with open(path("one.json")) as f:
                r = json.load(f)
            assert r["input"]["hash"] == input_hash(files, columns, 5000), "the input hash is not the specification's"
            assert r["total"]["blocks"] == 7, r["total"]["blocks"]
            plan = path("plan.json")
            run([PROG, "plan"] + opts + ["--plan", plan])
            for n in (2, 3, 7, 9):
                for with_plan in (False, True):
                    parts = path("parts-%d-%d" % (n, with_plan))
                    shutil.rmtree(parts, ignore_errors=True)
                    shard_parts(parts, opts + (["--plan", plan] if with_plan else []), n)
                    run([PROG, "merge"] + outputs("merged") + [parts])
                    same_outputs("merged", "one")
            if HAS_MPI and shutil.which("mpirun"):
                for ranks in (2, 3):
                    run(mpirun(ranks, opts + outputs("ranks")), env=mpi_env())
                    same_outputs("ranks", "one")
                # The plan made by ranks that each hold a share: the one process's, byte for byte.
                run(mpirun(3, ["plan"] + opts + ["--plan", path("plan-ranks.json")]), env=mpi_env())
                assert read("plan-ranks.json") == read("plan.json"), "the ranks' plan differs from one process's"
    # A plan of other options or inputs is refused, naming the difference.
    opts = args + GROUPED + CASES["pairwise"]
    run([PROG, "plan"] + opts + ["--plan", path("plan.json")])
    p = run([PROG] + opts + ["--ratio", "0.1", "--shard", "0/2", "--parts", path("p-other"), "--plan", path("plan.json")],
            expect=2)
    assert "--plan %s: made with other options (--ratio" % path("plan.json") in p.stderr, p.stderr
    other = list(args)
    other[3] = path("q-renamed.npy")  # the same scores under another name: other inputs
    shutil.copy(columns[0][0], other[3])
    p = run([PROG] + other + GROUPED + CASES["pairwise"] + ["--shard", "0/2", "--parts", path("p-other"),
                                                             "--plan", path("plan.json")], expect=2)
    assert "made for other inputs" in p.stderr, p.stderr
    # Scores changed after the plan (same names and sizes): each shard finds its groups' rows
    # changed, and parts made with two plans do not merge.
    opts = args + GROUPED + CASES["pairwise"] + PRUNE
    run([PROG, "plan"] + opts + ["--plan", path("plan-old.json")])
    run([PROG] + opts + ["--shard", "0/2", "--parts", path("p-two"), "--plan", path("plan-old.json")])
    with open(columns[0][0], "r+b") as f:  # the last group's scores (shard 1's) to 1: another threshold
        f.seek(-4 * SIZES[-1], os.SEEK_END)
        f.write(struct.pack("<%df" % SIZES[-1], *([1.0] * SIZES[-1])))
    p = run([PROG] + opts + ["--shard", "1/2", "--parts", path("p-two"), "--plan", path("plan-old.json")], expect=2)
    assert "--plan %s: made for other inputs (the scores or ids of group 3" % path("plan-old.json") in p.stderr, p.stderr
    run([PROG, "plan"] + opts + ["--plan", path("plan-new.json")])
    run([PROG] + opts + ["--shard", "1/2", "--parts", path("p-two"), "--plan", path("plan-new.json")])
    p = run([PROG, "merge", "--out", path("m.npy"), path("p-two")], expect=2)
    assert "took other corpus-wide values" in p.stderr, p.stderr
    no_outputs("m")


def test_groups_read():
    """Each worker reads its groups' files: a shard of the last group never meets a NaN in the
    first file; a NaN is said by the worker that reads its file, naming the file and row."""
    args, files, _ = grouped_input(bad=(0, 6000, 3), tag="bad")
    want = "%s: row 6000, column 3 is NaN; every value must be finite" % files[0][0]
    p = run([PROG] + args + GROUPED + CASES["pairwise"] + outputs("bad"), expect=2)
    assert "datamask-select: " + want in p.stderr.splitlines(), p.stderr
    no_outputs("bad")
    run([PROG, "plan"] + args + GROUPED + CASES["pairwise"] + ["--plan", path("plan-bad.json")])
    shard = args + GROUPED + CASES["pairwise"] + ["--plan", path("plan-bad.json"), "--parts", path("parts-bad")]
    run([PROG] + shard + ["--shard", "6/7"])  # block 6: the last group, the last file
    p = run([PROG] + shard + ["--shard", "0/7"], expect=2)
    assert "datamask-select: " + want in p.stderr.splitlines(), p.stderr
    if HAS_MPI and shutil.which("mpirun"):
        p = run(mpirun(3, args + GROUPED + CASES["pairwise"] + outputs("bad")), expect=None, env=mpi_env())
        assert p.returncode != 0, p.stderr
        assert "datamask-select (rank 0 of 3): " + want in p.stderr.splitlines(), p.stderr
        assert "(rank 2 of 3)" not in p.stderr, "a rank that does not read the first file reported it:\n" + p.stderr
        no_outputs("bad")


def main():
    global PROG, TMP, HAS_MPI
    PROG, name = sys.argv[1], sys.argv[2]
    HAS_MPI = len(sys.argv) > 3 and "DATAMASK_SELECT_MPI=1" in sys.argv[3]
    with tempfile.TemporaryDirectory(prefix="dm_spread_") as tmp:
        TMP = tmp
        t0 = time.time()
        globals()["test_" + name]()
        print("spread.%s passed in %.1f s" % (name, time.time() - t0))


if __name__ == "__main__":
    main()
