#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What spreading the blocks costs (issue 12): one process against mpirun -np 2 and two
--shard tasks on the same input, and a FineWeb projection from measured per-block times.

    python3 benchmarks/spread.py run --binary build/tools/datamask-select/datamask-select
    python3 benchmarks/spread.py render

`run` writes a synthetic corpus (standard library only), times the three ways with one thread per
process, checks they select the same ids, and stores the figures in benchmarks/spread.json.
`render` writes the section "Many machines" of benchmarks/RESULTS.md from that file and from the
measured 1M-item block times of benchmarks/fronts/*.jsonl.
"""
import argparse
import array
import json
import math
import os
import random
import re
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RAW = os.path.join(HERE, "spread.json")
SECTION = "## Many machines: MPI ranks and shards"

# FineWeb: 15T tokens (GPT-2 tokenizer). Its document count is assumed from a public 200,000-
# document sample of FineWeb holding about 140M tokens: about 700 tokens per document.
FINEWEB_TOKENS = 15e12
TOKENS_PER_DOC = 700
RANKS = 384
BLOCK = 1_000_000
FINEWEB_D = 768  # the paper's embeddings
# Measured GPU block times (benchmarks/GPU.md, "2026-11-28", NVIDIA H200, scripts/gpu-check, call 1):
# a 1M x 768 block, pairwise + quality; (label, seconds optimising, seconds evaluating).
GPU_BLOCKS = (("the continuous learner's defaults", 14.355, 0.025),
              ("with --track-every 0 --no-polish", 1.780, 0.029))


def npy(path, descr, shape, payload):
    shape_txt = "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
    d = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_txt)
    d += " " * ((64 - (10 + len(d) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode("latin1") + payload)


def corpus(folder, n, d, seed=0):
    """Clustered float32 embeddings, a quality score per row, shuffled int64 ids."""
    rnd = random.Random(seed)
    centres = [[rnd.gauss(0, 1) for _ in range(d)] for _ in range(32)]
    emb, q = array.array("f"), array.array("d")
    for _ in range(n):
        c = rnd.randrange(32)
        emb.extend(x + 0.5 * rnd.gauss(0, 1) for x in centres[c])
        q.append(math.cos(c) + 0.3 * rnd.gauss(0, 1))
    ids = array.array("q", rnd.sample(range(10**12), n))
    npy(os.path.join(folder, "emb.npy"), "<f4", (n, d), emb.tobytes())
    npy(os.path.join(folder, "q.npy"), "<f8", (n,), q.tobytes())
    npy(os.path.join(folder, "ids.npy"), "<i8", (n,), ids.tobytes())


def timed(cmd, env):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr))
    return wall, p.stderr


def run(a):
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none")
    tmp = tempfile.mkdtemp(prefix="dm_spread_bench_")
    try:
        corpus(tmp, a.n, a.d)
        p = lambda name: os.path.join(tmp, name)  # noqa: E731
        args = ["--embeddings", p("emb.npy"), "--quality", p("q.npy"), "--ids", p("ids.npy"), "--block-size",
                str(a.block_size), "--threads", "1", "--objective", a.objective] + a.extra.split()
        one_wall, _ = timed([a.binary] + args + ["--quiet", "--out", p("one.npy"), "--report", p("one.json")], env)
        mpi_wall, mpi_err = timed(["mpirun", "--oversubscribe", "-np", "2", a.binary] + args +
                                  ["--out", p("mpi.npy"), "--report", p("mpi.json")], env)
        start_wall, _ = timed(["mpirun", "--oversubscribe", "-np", "2", a.binary, "--help"], env)
        shard_walls = [timed([a.binary] + args + ["--quiet", "--shard", "%d/2" % i, "--parts", p("parts")], env)[0]
                       for i in range(2)]
        merge_wall, _ = timed([a.binary, "merge", "--out", p("merged.npy"), p("parts")], env)
        for other in ("mpi.npy", "merged.npy"):
            with open(p("one.npy"), "rb") as x, open(p(other), "rb") as y:
                if x.read() != y.read():
                    sys.exit("%s differs from one process's ids" % other)
        with open(p("one.json")) as f:
            one = json.load(f)
        with open(p("mpi.json")) as f:
            mpi = json.load(f)
        gathered = re.search(r"gathered (\d+) bytes from \d+ other ranks? \((\d+) blocks", mpi_err)
        part_bytes = [os.path.getsize(p("parts/part-%05d-of-00002.json" % i)) for i in range(2)]
        rec = {
            "n": a.n, "d": a.d, "block_size": a.block_size, "objective": a.objective, "extra": a.extra,
            "blocks": one["total"]["blocks"], "selected": one["total"]["selected"],
            "block_seconds": [b["seconds"]["optimize"] + b["seconds"]["evaluate"] for b in one["blocks"]],
            "one_wall": one_wall, "one_seconds": one["total"]["seconds"],
            "mpi_block_seconds": [b["seconds"]["optimize"] + b["seconds"]["evaluate"] for b in mpi["blocks"]],
            "mpi_wall": mpi_wall, "mpi_seconds": mpi["total"]["seconds"], "mpirun_help_wall": start_wall,
            "gathered_bytes": int(gathered.group(1)), "gathered_blocks": int(gathered.group(2)),
            "shard_walls": shard_walls, "merge_wall": merge_wall, "part_bytes": part_bytes,
            "load": os.getloadavg(), "cores": os.cpu_count(),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with open(RAW, "w") as f:
        json.dump(rec, f, indent=1)
    print("wrote", RAW)


def fronts_block(objective, method, setting, polish=0):
    """A measured 1M-item block (benchmarks/fronts, d = 256, S = 0.1 n, 2 cores): its seconds, and
    its share of the best measured greedy's gain over random subsets (None without a greedy)."""
    with open(os.path.join(HERE, "fronts", "%s-n1000000.jsonl" % objective)) as f:
        rows = [json.loads(line) for line in f]
    measured = [r for r in rows if not r["estimated"]]
    random_f = [r["f"] for r in measured if r["method"] == "random"]
    greedy_f = [r["f"] for r in measured if r["method"] in ("greedy", "lazy", "stochastic")]
    for r in measured:
        if (r["method"], r["setting"], r.get("polish", 0)) == (method, setting, polish):
            share = None
            if random_f and greedy_f:
                share = (r["f"] - random_f[0]) / (max(greedy_f) - random_f[0])
            return r["seconds"], share
    return None, None


def render(_):
    with open(RAW) as f:
        r = json.load(f)
    work = r["block_seconds"]
    nb = len(r["mpi_block_seconds"])  # rank k runs blocks [nb k / 2, nb (k + 1) / 2)
    per_rank = [sum(r["mpi_block_seconds"][nb * k // 2:nb * (k + 1) // 2]) for k in range(2)]
    # What one process does besides its blocks (start, load, prune, write), plus the busier rank's
    # blocks as timed in the MPI run itself: the rest of the MPI wall time is the spreading's cost
    # (starting the job, sending and reading the blocks), not the cores the ranks competed for.
    ideal = r["one_wall"] - sum(work) + max(per_rank)
    overhead = r["mpi_wall"] - ideal
    md = [SECTION, ""]
    md.append("`python3 benchmarks/spread.py run --binary build/tools/datamask-select/datamask-select` then "
              "`python3 benchmarks/spread.py render` (raw figures: `benchmarks/spread.json`). A synthetic corpus of "
              "n = %d items, d = %d (float32), blocks of %d items (%d blocks), --objective %s %s, one thread per "
              "process; machine: %d cores shared with other engineers' builds (load average %.1f at the end), so "
              "times are noisy: the two ranks share the two cores with that load, so each rank's blocks take "
              "longer than in one process (the per-rank work below is timed in the MPI run). One process, `mpirun -np 2` and two `--shard` tasks then `merge` selected the same "
              "ids (checked by the script)." % (r["n"], r["d"], r["block_size"], r["blocks"], r["objective"],
                                                 r["extra"], r["cores"], r["load"][0]))
    md += ["", "| | seconds |", "|---|---:|"]
    md.append("| one process, wall | %.2f |" % r["one_wall"])
    md.append("| per block (optimize + evaluate), mean over %d blocks | %.3f |" % (len(work), sum(work) / len(work)))
    md.append("| sum of the blocks, one process | %.2f |" % sum(work))
    md.append("| per-rank work at R = 2 (consecutive blocks), rank 0 / rank 1, timed in the MPI run | %.2f / %.2f |" % tuple(per_rank))
    md.append("| mpirun -np 2, wall | %.2f |" % r["mpi_wall"])
    md.append("| one process's wall less its blocks, plus the busier rank's blocks | %.2f |" % ideal)
    md.append("| collective overhead at R = 2 (the difference) | %.2f |" % overhead)
    md.append("| of which starting the job (`mpirun -np 2 datamask-select --help`) | %.2f |" % r["mpirun_help_wall"])
    md.append("| gather phase on rank 0 (waiting for rank 1, receiving, parsing) | %.3f |" % r["mpi_seconds"].get("gather", float("nan")))
    md.append("| two shards, sequentially, wall each | %s |" % " / ".join("%.2f" % w for w in r["shard_walls"]))
    md.append("| merge, wall | %.2f |" % r["merge_wall"])
    md.append("")
    md.append("Bytes exchanged: the corpus here is one file, so one group whose blocks both ranks run: each "
              "rank checks and hashes that file and reads its ids and scores (a corpus in files of a rank's share "
              "each is read once in all: \"One worker's cost at scale\"). Before the blocks the ranks exchange "
              "16 bytes a group (its content hash), a count per step of the prune threshold's bisection (at most "
              "64) and the calibration sample (24 bytes a candidate, then the sample's rows); then the only "
              "message is each rank's finished blocks sent to rank 0 at the end: %d bytes for %d blocks, %.0f bytes per "
              "block for S_b = %d ids (about %.1f bytes per selected id: the ids as JSON, the per-step log, exact "
              "doubles as hexadecimal strings). The parts of the two shards hold %s bytes."
              % (r["gathered_bytes"], r["gathered_blocks"], r["gathered_bytes"] / max(1, r["gathered_blocks"]),
                 r["selected"] // r["blocks"], r["gathered_bytes"] / max(1, r["gathered_blocks"]) / (r["selected"] / r["blocks"]),
                 " and ".join(str(b) for b in r["part_bytes"])))
    if "reads" in r:
        md += reads_markdown(r["reads"])
    docs = FINEWEB_TOKENS / TOKENS_PER_DOC
    blocks = math.ceil(docs / BLOCK)
    per_rank_blocks = math.ceil(blocks / RANKS)
    md += ["", "### FineWeb projection", ""]
    rate = r.get("reads", {}).get("read_rate")  # bytes per second, measured by `reads`
    rank_bytes = docs / RANKS * (FINEWEB_D * 2 + 12)  # float16 rows, an 8-byte id and a 4-byte score each
    read_s = rank_bytes / rate if rate else float("nan")
    md.append("Assumed: %.3g documents (15T tokens at about %d tokens per document, the ratio of a public "
              "200,000-document FineWeb sample of about 140M tokens), so %d blocks of 1M; on %d ranks (consecutive "
              "blocks each) the busiest rank runs %d blocks. The per-block times are measured (benchmarks/fronts, "
              "one 1M-item block, d = 256 rather than the paper's 768, S = 0.1 n, on the 2 shared cores "
              "described there). Reading is counted: a rank reads its share of the corpus once, stored as the "
              "pipelines store it (float16, d = %d, in files of at most a rank's share: \"One worker's cost at "
              "scale\"), an id and a score a document: %.1f GB a rank, %.0f s at this machine's measured "
              "sequential read rate of %.0f MB/s (`reads`, below). The wall time is reading plus blocks per rank x "
              "block time, the collective overhead above being negligible beside it. The plan step (for scheduler "
              "shards; MPI ranks plan together) reads every id and score once, 12 bytes a document (%.0f GB), under "
              "mpirun each rank its share."
              % (docs, TOKENS_PER_DOC, blocks, RANKS, per_rank_blocks, FINEWEB_D, rank_bytes / 1e9, read_s,
                 (rate or float("nan")) / 1e6, docs * 12 / 1e9))
    md += ["", "| objective, method (one 1M block) | measured s per block | share of the best greedy's gain "
           "| projected wall on %d ranks, reading included |" % RANKS, "|---|---:|---:|---:|"]
    for objective, method, setting, label in (("pws", "continuous", "10", "pairwise, continuous 10 it"),
                                              ("pws", "continuous", "25", "pairwise, continuous 25 it"),
                                              ("disf", "continuous", "10", "DiSF, continuous 10 it"),
                                              ("disf", "continuous", "25", "DiSF, continuous 25 it"),
                                              ("pws", "learner", "100", "pairwise, policy gradient 100 steps")):
        s, share = fronts_block(objective, method, setting)
        if s is None:
            continue
        share_text = "%.1f%%" % (100 * share) if share is not None else "no greedy fits (fronts section)"
        md.append("| %s | %.1f | %s | %.1f h |" % (label, s, share_text, (read_s + per_rank_blocks * s) / 3600))
    md.append("")
    md.append("datamask-select's continuous learner runs 100 iterations by default (`--iterations`); these rows "
              "are the measured points of the fronts benchmark, whose share says what the fewer iterations give.")
    md.append("")
    gpu = ["%s: %.2f s optimising + %.2f s evaluating a block, so %d blocks and the reading take %.2f h a GPU, "
           "%.0f GPU-hours on %d GPUs" % (label, opt, ev, per_rank_blocks, (read_s + per_rank_blocks * (opt + ev)) / 3600,
                                          RANKS * (read_s + per_rank_blocks * (opt + ev)) / 3600, RANKS)
           for label, opt, ev in GPU_BLOCKS]
    md.append("The paper: 384 GPUs for about 15 hours (about 5,760 GPU-hours). With GPUs, from the latest GPU block "
              "times (benchmarks/GPU.md, \"2026-11-28\", a 1M x 768 block, pairwise + quality, on an NVIDIA H200; "
              "not in CI) and the reading above (this machine's read rate: a GPU node's disks read faster, and "
              "their rate is not measured here): %s. Without tracking and polish that block's selection holds "
              "99.9974%% of the optimum's gain over random by its certificate (at least that share of the best "
              "greedy's), against 99.99998%% with the defaults (the same selections, by f, as the certificate's "
              "run on an NVIDIA H100, GPU.md \"2026-11-27\"). CPU-only, the rows above are per 2-core rank; d = 768 costs "
              "about 3x more for pairwise similarity (linear in d) and about 9x for DiSF (d^2)." % "; ".join(gpu))
    path = os.path.join(HERE, "RESULTS.md")
    with open(path) as f:
        text = f.read()
    if SECTION in text:  # replace this section, up to the next one
        start = text.index(SECTION)
        nxt = text.find("\n## ", start + len(SECTION))
        text = text[:start] + "\n".join(md).rstrip() + "\n" + (text[nxt:] if nxt >= 0 else "")
    else:  # before the continuous learner's section, which benchmarks/fronts.py rewrites to the end
        at = text.find("## Continuous learner")
        text = (text[:at] + "\n".join(md).rstrip() + "\n\n" + text[at:]) if at >= 0 else text.rstrip() + "\n\n" + "\n".join(md) + "\n"
    with open(path, "w") as f:
        f.write(text)
    print("wrote", path)


# --- bytes read per rank (each MPI rank checks and hashes only its share of the embedding bytes) ---

# Shards of 64 MiB: well above the disk's readahead window (8 MiB here), which reads past a share.
READS_SHARDS, READS_ROWS, READS_D = 4, 131072, 128


def read_ahead_kb(folder):
    """The readahead of the disk holding `folder` (sysfs), or None."""
    dev = os.stat(folder).st_dev
    base = "/sys/dev/block/%d:%d" % (os.major(dev), os.minor(dev))
    for q in (os.path.join(base, "queue", "read_ahead_kb"), os.path.join(base, "..", "queue", "read_ahead_kb")):
        if os.path.exists(q):
            with open(q) as f:
                return int(f.read())
    return None


def rank_reads(a):
    """One rank of `reads`: runs the program in the rank's own copy of the inputs (its own files, so
    its own page cache, as on a machine of its own) and prints the bytes it read from storage."""
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    os.chdir(os.path.join(a.folder, "rank%d" % rank))
    subprocess.run(a.command, check=True, stdout=subprocess.DEVNULL)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.path.join(a.folder, "read-%d.json" % rank), "w") as f:
        json.dump({"rank": rank, "read_bytes": ru.ru_inblock * 512}, f)


def evict(folder):
    """Drops the files under `folder` from the page cache, so that the next reads come from storage."""
    for root, _, files in os.walk(folder):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)


def reads(a):
    """Bytes read from storage per rank at R = 1, 2, 3 by a run whose blocks are all in its checkpoint
    (--resume), so a rank reads only what loading needs: the embedding files of its groups (here a
    file is a group of one block), its rows of the quality column, the checkpoint; and the
    sequential read rate of the files."""
    binary = os.path.abspath(a.binary)
    rnd = random.Random(3)
    out = {"shards": READS_SHARDS, "rows": READS_ROWS, "d": READS_D, "ranks": {}}
    with tempfile.TemporaryDirectory(prefix="dm_reads_", dir=a.tmp) as tmp:
        src = os.path.join(tmp, "src")
        os.mkdir(src)
        names = ["e%d.npy" % s for s in range(READS_SHARDS)]
        tile = 1 << 20  # values drawn once, repeated (the content only has to be finite)
        base = array.array("f", (rnd.gauss(0, 1) for _ in range(tile))).tobytes()
        for name in names:
            whole = READS_ROWS * READS_D * 4
            npy(os.path.join(src, name), "<f4", (READS_ROWS, READS_D), (base * (whole // len(base) + 1))[:whole])
        n = READS_SHARDS * READS_ROWS
        npy(os.path.join(src, "q.npy"), "<f8", (n,), array.array("d", (rnd.random() for _ in range(n))).tobytes())
        cmd = [binary, "--embeddings"] + names + ["--quality", "q.npy", "--block-size", str(READS_ROWS),
               "--objective", "pairwise", "--optimizer", "greedy", "--count", "100", "--threads", "1", "--quiet",
               "--out", "o.npy", "--report", "o.json", "--checkpoint", "ck"]
        subprocess.run(cmd, cwd=src, check=True)  # every block into the checkpoint
        with open(os.path.join(src, "o.json")) as f:
            want = json.load(f)["input"]["hash"]
        out["read_ahead_kb"] = read_ahead_kb(tmp)
        out["embedding_bytes"] = sum(os.path.getsize(os.path.join(src, x)) for x in names)
        out["quality_bytes"] = os.path.getsize(os.path.join(src, "q.npy"))
        out["command"] = " ".join(os.path.basename(c) for c in cmd[:1]) + " " + " ".join(cmd[1:]) + " --resume"
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_btl_vader_single_copy_mechanism="none", OMP_WAIT_POLICY="PASSIVE")
        for ranks in (1, 2, 3):
            for r in range(ranks):
                shutil.rmtree(os.path.join(tmp, "rank%d" % r), ignore_errors=True)
                shutil.copytree(src, os.path.join(tmp, "rank%d" % r))
                os.remove(os.path.join(tmp, "rank%d" % r, "o.json"))
            evict(tmp)
            subprocess.run(["mpirun", "--oversubscribe", "-np", str(ranks), sys.executable, os.path.abspath(__file__),
                            "rank-reads", tmp, "--"] + cmd + ["--resume"], env=env, check=True)
            got = []
            for r in range(ranks):
                with open(os.path.join(tmp, "read-%d.json" % r)) as f:
                    got.append(json.load(f))
                os.remove(os.path.join(tmp, "read-%d.json" % r))
            with open(os.path.join(tmp, "rank0", "o.json")) as f:
                assert json.load(f)["input"]["hash"] == want, "R = %d: another input hash" % ranks
            out["ranks"][str(ranks)] = [g["read_bytes"] for g in got]
            print("R = %d: bytes read per rank %s" % (ranks, out["ranks"][str(ranks)]))
        evict(src)  # the sequential read rate of these files from storage
        t0 = time.monotonic()
        for name in names:
            with open(os.path.join(src, name), "rb", buffering=0) as f:
                while f.read(64 << 20):
                    pass
        out["read_rate"] = out["embedding_bytes"] / (time.monotonic() - t0)
        print("sequential read rate: %.0f MB/s" % (out["read_rate"] / 1e6))
    with open(RAW) as f:
        raw = json.load(f)
    raw["reads"] = out
    with open(RAW, "w") as f:
        json.dump(raw, f, indent=1)
        f.write("\n")
    print("wrote", RAW)


def reads_markdown(r):
    """The subsection of RESULTS.md on the bytes each rank reads (from `reads`)."""
    md = ["", "### Bytes read per rank", ""]
    md.append("`python3 benchmarks/spread.py reads --binary build/tools/datamask-select/datamask-select` (then "
              "`render`). %d embedding shards of %d x %d float32 (%d bytes in all) and a float64 quality column "
              "(%d bytes); every block already in the checkpoint (`%s`), so a rank reads what loading needs. Each "
              "rank runs in its own copy of the files, dropped from the page cache first, as on a machine of its "
              "own; bytes read from storage (getrusage ru_inblock x 512) per rank. Each file is a group of one "
              "block, so rank k of R reads files [4 k / R, 4 (k + 1) / R) and their rows of the quality column "
              "(the last column). The input hash is the one process's at every R (checked by the script). The "
              "files' sequential read rate from storage: %.0f MB/s (read_ahead_kb = %s)."
              % (r["shards"], r["rows"], r["d"], r["embedding_bytes"], r["quality_bytes"], r["command"],
                 r.get("read_rate", float("nan")) / 1e6, r["read_ahead_kb"]))
    md += ["", "| ranks | bytes read per rank | largest / one process | each rank's share: its files + its scores |",
           "|---:|---|---:|---|"]
    one = r["ranks"]["1"][0]
    for ranks, got in sorted(r["ranks"].items()):
        rk = int(ranks)
        files = [r["shards"] * (k + 1) // rk - r["shards"] * k // rk for k in range(rk)]
        shares = [f * (r["embedding_bytes"] + r["quality_bytes"]) / r["shards"] for f in files]
        md.append("| %s | %s | %.2f | %s |" % (ranks, " / ".join(str(b) for b in got), max(got) / one,
                                               " / ".join("%.0f" % x for x in shares)))
    return md


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--binary", required=True)
    r.add_argument("--n", type=int, default=120000)
    r.add_argument("--d", type=int, default=64)
    r.add_argument("--block-size", type=int, default=20000)
    r.add_argument("--objective", default="pairwise")
    r.add_argument("--extra", default="--optimizer pg --steps 100 --rollouts 32")
    sub.add_parser("render")
    rr = sub.add_parser("reads")
    rr.add_argument("--binary", required=True)
    rr.add_argument("--tmp", default=None, help="folder for the inputs (on storage, not tmpfs: default the system's)")
    w = sub.add_parser("rank-reads")  # one rank of `reads`, started by mpirun
    w.add_argument("folder")
    w.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    if a.cmd == "rank-reads" and a.command[:1] == ["--"]:
        a.command = a.command[1:]
    {"run": run, "render": render, "reads": reads, "rank-reads": rank_reads}[a.cmd](a)


if __name__ == "__main__":
    main()
