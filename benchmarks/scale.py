#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What one worker of a large corpus costs against a run of its share alone (issue 46).

    python3 benchmarks/scale.py [--program PATH] [--multiples 10,100] [--rows 2000000] [--dims 16]
                                [--mpi] [--keep] [--extra "ARGS"]
    python3 benchmarks/scale.py --merge 2000000,20000000 [--program PATH]

A worker's share is `--rows` rows (one file); the corpus of multiple M is M such files (float16
embeddings, d = --dims), one uint64 id file and one float32 quality file, written once under
BUILD_DIR/scale/ (numpy, from the build folder's real-venv: benchmarks/real_data.py makes it).
For each M the script runs, with every input dropped from the page cache first
(posix_fadvise DONTNEED):
  share   one process on the share alone (its file, its ids, its scores), --out and --report;
  plan    `datamask-select plan --plan PLAN.json` on the whole corpus, run apart (once per run, not
          per worker: it reads every id and score, and the calibration sample's rows);
  shard   `--shard 0/M --parts DIR --plan PLAN.json` on the whole corpus: one scheduler task of M;
  rank    (--mpi) `mpirun -np M --oversubscribe` on the whole corpus, every rank's cost divided
          evenly (the ranks' bytes summed over M; the largest rank's peak memory).
and prints, from the kernel's accounting of each process (GNU time: file system inputs and the
largest resident set): the bytes read from disk, the peak resident memory and the wall time, and
each over the share's. The bar (issue 46): bytes and memory within 1.25x, wall within 1.5x, at every M.
The same options for every run: --block-size --rows (one block per share), the default optimizer
with --extra added (default: --iterations 20, so the reading and planning weigh as they do at
scale, where an iteration over 10^6 rows is short against reading them).
"""
import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("BUILD_DIR", os.path.join(ROOT, "build"))


def in_venv():
    """Re-runs this script in the real-data virtual environment (numpy) unless it is the one."""
    try:
        import numpy  # noqa: F401
        return
    except ImportError:
        pass
    py = os.path.join(BUILD, "real-venv", "bin", "python")
    if not os.path.exists(py):
        subprocess.run([sys.executable, os.path.join(HERE, "real_data.py"), "data", "--sets", "wine"], check=True)
    os.execv(py, [py] + sys.argv)


def write_corpus(folder, files, rows, d):
    """M files of `rows` x d float16 rows, uint64 ids (distinct, shuffled) and float32 scores; kept
    between runs (a marker file says it is whole)."""
    import numpy as np

    done = os.path.join(folder, "complete")
    if os.path.exists(done):
        return
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "emb"))
    rng = np.random.default_rng(files)
    n = files * rows
    ids = np.lib.format.open_memmap(os.path.join(folder, "ids.npy"), "w+", np.uint64, (n,))
    q = np.lib.format.open_memmap(os.path.join(folder, "q.npy"), "w+", np.float32, (n,))
    centres = rng.standard_normal((64, d)).astype(np.float32)
    for f in range(files):
        c = rng.integers(0, 64, rows)
        x = (centres[c] + 0.3 * rng.standard_normal((rows, d), dtype=np.float32)).astype(np.float16)
        np.save(os.path.join(folder, "emb", "part-%05d.npy" % f), x)
        lo = f * rows
        ids[lo:lo + rows] = (np.uint64(1) << np.uint64(63)) + np.uint64(lo) + rng.permutation(rows).astype(np.uint64)
        q[lo:lo + rows] = np.cos(c).astype(np.float32) + 0.2 * rng.standard_normal(rows, dtype=np.float32)
    ids.flush()
    q.flush()
    del ids, q
    open(done, "w").close()


def share_of(corpus, folder, rows):
    """The share alone: the corpus's first file, and its rows of the ids and scores."""
    import numpy as np

    if os.path.exists(os.path.join(folder, "complete")):
        return
    os.makedirs(folder, exist_ok=True)
    shutil.copy(os.path.join(corpus, "emb", "part-00000.npy"), os.path.join(folder, "emb.npy"))
    np.save(os.path.join(folder, "ids.npy"), np.load(os.path.join(corpus, "ids.npy"), mmap_mode="r")[:rows])
    np.save(os.path.join(folder, "q.npy"), np.load(os.path.join(corpus, "q.npy"), mmap_mode="r")[:rows])
    open(os.path.join(folder, "complete"), "w").close()


def drop_cache(paths):
    for p in paths:
        if os.path.isdir(p):
            drop_cache([os.path.join(p, f) for f in os.listdir(p)])
            continue
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)  # pages not yet written back (a file just made) cannot be dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def read_rate(folder):
    """This machine's sequential read rate from disk in bytes per second: the embedding files of
    `folder` read in 64 MiB pieces, dropped from the page cache first (for the FineWeb projection
    in RESULTS.md: a worker's bytes over this rate)."""
    files = [os.path.join(folder, f) for f in sorted(os.listdir(folder))]
    drop_cache(files)
    total, t0 = 0, time.monotonic()
    for name in files:
        with open(name, "rb", buffering=0) as f:
            while True:
                got = f.read(64 << 20)
                if not got:
                    break
                total += len(got)
    return total / (time.monotonic() - t0)


def mpi_env():
    """Open MPI's environment for mpirun here: as root (a container) it needs the two variables
    that allow it; shared memory without the kernel's single-copy mechanism (not in containers)."""
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none")
    return env


def measure(cmd, inputs, divide=1, env=None):
    """(bytes read from disk, peak RSS in bytes, wall seconds, CPU seconds) of `cmd` and what it starts, its
    inputs dropped from the page cache first, from the kernel's accounting (GNU time's %I, file
    system inputs in 512-byte blocks, and %M, the largest resident set of the process and its
    waited-for children: mpirun's ranks), CPU seconds (user + system, %U + %S); bytes and CPU
    seconds divided by `divide` (ranks: ten ranks on two cores share them, so a rank's wall
    time is not its own cost, its CPU time is). Through
    /usr/bin/time, not this interpreter's wait4: a child forked from it counts the interpreter's
    own memory before it executes the program."""
    drop_cache(inputs)
    with tempfile.NamedTemporaryFile("r") as usage, tempfile.TemporaryFile("w+") as err:
        t0 = time.monotonic()
        r = subprocess.run(["/usr/bin/time", "-f", "%M %I %U %S", "-o", usage.name] + cmd, stdout=subprocess.DEVNULL,
                           stderr=err, text=True, env=env)
        wall = time.monotonic() - t0
        if r.returncode != 0:
            err.seek(0)
            sys.exit("scale.py: %s failed (exit %d):\n%s" % (" ".join(cmd), r.returncode, err.read()))
        rss_kb, blocks, user, system = usage.read().split()[-4:]
    return int(blocks) * 512 / divide, int(rss_kb) * 1024, wall, (float(user) + float(system)) / divide


def merge_cost(program, selected, shards, keep):
    """(peak RSS, wall) of `datamask-select merge` of `shards` parts that select `selected` ids in
    all: a corpus of `selected` rows (d = 4, float16, ids the row numbers) of which --ratio 1
    selects every item (no optimizer runs; the parts are what is measured), blocks of 10^6."""
    import numpy as np

    folder = os.path.join(BUILD, "scale", "merge-%d" % selected)
    emb = os.path.join(folder, "emb.npy")
    if not os.path.exists(emb):
        os.makedirs(folder, exist_ok=True)
        x = np.lib.format.open_memmap(emb + ".tmp.npy", "w+", np.float16, (selected, 4))
        for lo in range(0, selected, 1 << 22):
            hi = min(selected, lo + (1 << 22))
            x[lo:hi] = np.random.default_rng(lo).standard_normal((hi - lo, 4)).astype(np.float16)
        x.flush()
        del x
        os.rename(emb + ".tmp.npy", emb)
    with tempfile.TemporaryDirectory(prefix="dmmerge-") as tmp:
        parts = os.path.join(tmp, "parts")
        for i in range(shards):
            subprocess.run([program, "--embeddings", emb, "--lambda", "0", "--ratio", "1", "--block-size", "1000000",
                            "--quiet", "--shard", "%d/%d" % (i, shards), "--parts", parts], check=True,
                           stdout=subprocess.DEVNULL)
        _, rss, wall, _ = measure([program, "merge", "--out", os.path.join(tmp, "ids.npy"), "--report",
                                os.path.join(tmp, "r.json"), parts], [parts])
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)
    return rss, wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--program", default=os.path.join(BUILD, "tools", "datamask-select", "datamask-select"))
    ap.add_argument("--multiples", default="10,100")
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--dims", type=int, default=16)
    ap.add_argument("--mpi", action="store_true", help="also one MPI rank of M (mpirun --oversubscribe)")
    ap.add_argument("--extra", default="--iterations 20", help="options added to every run")
    ap.add_argument("--keep", action="store_true", help="keep the corpora (default: remove them at the end)")
    ap.add_argument("--merge", default="", metavar="N,N",
                    help="instead: merge's peak memory and time for parts selecting N ids in all (4 shards each), "
                         "e.g. 2000000,20000000 (the bar: within 10%% of each other)")
    a = ap.parse_args()
    if not os.path.exists("/usr/bin/time"):
        sys.exit("scale.py: needs GNU time (/usr/bin/time; Debian's package 'time') for each run's memory and reads")
    in_venv()
    if a.merge:
        print("`datamask-select merge` of 4 parts (--ratio 1 of a corpus of N rows, blocks of 10^6):")
        print()
        print("| ids selected | peak RSS MB | wall s |")
        print("|---|---|---|")
        got = []
        for n in [int(x) for x in a.merge.split(",")]:
            rss, wall = merge_cost(a.program, n, 4, a.keep)
            got.append(rss)
            print("| %d | %.0f | %.2f |" % (n, rss / 1e6, wall))
        print()
        print("Peak RSS, largest over smallest: %.2f (bar, issue 46: at most 1.10)." % (max(got) / min(got)))
        return
    common = ["--block-size", str(a.rows), "--quiet"] + shlex.split(a.extra)
    rows, rates = [], []
    base = os.path.join(BUILD, "scale")
    for m in [int(x) for x in a.multiples.split(",")]:
        corpus = os.path.join(base, "corpus-%dx%d" % (m, a.rows))
        write_corpus(corpus, m, a.rows, a.dims)
        share = os.path.join(base, "share-%dx%d" % (m, a.rows))
        share_of(corpus, share, a.rows)
        whole = ["--embeddings", os.path.join(corpus, "emb"), "--ids", os.path.join(corpus, "ids.npy"),
                 "--quality", os.path.join(corpus, "q.npy")]
        alone = ["--embeddings", os.path.join(share, "emb.npy"), "--ids", os.path.join(share, "ids.npy"),
                 "--quality", os.path.join(share, "q.npy")]
        with tempfile.TemporaryDirectory(prefix="dmscale-") as tmp:
            ref = measure([a.program] + alone + common + ["--out", os.path.join(tmp, "s.npy"),
                                                          "--report", os.path.join(tmp, "s.json")], [share])
            rows.append((m, "share", ref, ref))
            plan = os.path.join(tmp, "plan.json")
            got = measure([a.program, "plan"] + whole + common + ["--plan", plan], [corpus])
            rows.append((m, "plan step (apart)", got, ref))
            got = measure([a.program] + whole + common + ["--shard", "0/%d" % m, "--parts", os.path.join(tmp, "parts"),
                                                          "--plan", plan], [corpus])
            rows.append((m, "shard 0/%d" % m, got, ref))
            if a.mpi and shutil.which("mpirun"):
                cmd = ["mpirun", "-np", str(m), "--oversubscribe", a.program] + whole + common + [
                    "--threads", "1", "--out", os.path.join(tmp, "m.npy")]
                got = measure(cmd, [corpus], m, mpi_env())
                rows.append((m, "rank of %d (mean bytes)" % m, got, ref))
        rates.append(read_rate(os.path.join(corpus, "emb")))
        if not a.keep:
            shutil.rmtree(corpus, ignore_errors=True)
            shutil.rmtree(share, ignore_errors=True)
    print("One worker against a run of its share alone (%d rows x %d float16 per share; %s):" %
          (a.rows, a.dims, " ".join(common)))
    print()
    print("| corpus | run | MB read | peak RSS MB | wall s | CPU s | read / share | RSS / share | wall / share "
          "| CPU / share |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    worst = {"read": 0.0, "rss": 0.0, "wall": 0.0}
    for m, name, (b, rss, wall, cpu), (rb, rrss, rwall, rcpu) in rows:
        ratios = (b / max(rb, 1.0), rss / rrss, wall / rwall, cpu / rcpu)
        if name not in ("share", "plan step (apart)"):
            # A rank's wall time is M ranks sharing this machine's cores: its CPU time is its cost.
            own = ratios[3] if name.startswith("rank") else ratios[2]
            worst = {k: max(worst[k], r) for k, r in zip(worst, ratios[:2] + (own,))}
        print("| %dx | %s | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |" %
              (m, name, b / 1e6, rss / 1e6, wall, cpu, *ratios))
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print()
    print("Sequential read rate of the corpus's embedding files from disk (page cache dropped): %s MB/s." %
          ", ".join("%.0f" % (r / 1e6) for r in rates))
    print()
    print("Bar (issue 46): read and RSS at most 1.25x the share's, wall at most 1.5x; worst here: read %.2fx, "
          "RSS %.2fx, wall %.2fx (a rank's: CPU time; the plan step apart). Machine: %d CPUs, load %s at the end." %
          (worst["read"], worst["rss"], worst["wall"], os.cpu_count(), load))


if __name__ == "__main__":
    main()
