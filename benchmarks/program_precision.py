#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""datamask-select on one corpus stored as float32, float16 and bfloat16 (issue 48).

    python3 benchmarks/program_precision.py [--rows 300000] [--dims 256] [--program PATH]
                                            [--repeats 2] [--extra "ARGS"]

Writes under BUILD_DIR/precision/ a clustered corpus (numpy, seed 0: 6 centres, unit noise) of
--rows x --dims values rounded to float16, and its scores; stores it three ways: float32 and
float16 files of the same values (a float16 value widens exactly), and a bfloat16 file (the
float32 values rounded to nearest even, '|V2' as ml_dtypes writes it: other values). Runs the
program's defaults (the continuous learner on pairwise similarity + quality, ratio 0.1, with
--extra added) on each file, the three in turn --repeats times, each run's inputs dropped from the
page cache first, and prints per file: the peak resident memory (GNU time's %M) and the wall and
optimize seconds (medians), f, and how many selected ids the float32 file's selection shares.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import scale  # noqa: E402  (its page-cache drop and GNU time measure)

KINDS = ("float32", "float16", "bfloat16")


def write_corpus(folder, rows, d):
    """The three embeddings files and the scores (kept between runs: a marker says they are whole)."""
    import numpy as np

    done = os.path.join(folder, f"complete-{rows}x{d}")
    if os.path.exists(done):
        return
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    centres = 2.0 * rng.standard_normal((6, d))
    x16 = (centres[rng.integers(0, 6, rows)] + rng.standard_normal((rows, d))).astype(np.float16)
    x32 = x16.astype(np.float32)
    bits = x32.view(np.uint32).astype(np.uint64)
    b16 = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16).view("V2")
    for kind, values in zip(KINDS, (x32, x16, b16)):
        np.save(os.path.join(folder, f"x.{kind}.npy"), values)
    np.save(os.path.join(folder, "q.npy"), rng.random(rows).astype(np.float32))
    open(done, "w").close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--program", default=os.path.join(scale.BUILD, "tools", "datamask-select", "datamask-select"))
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--dims", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--extra", default="", help="options added to every run")
    a = ap.parse_args()
    scale.in_venv()
    import numpy as np

    if not os.path.exists("/usr/bin/time"):
        sys.exit("program_precision.py: needs GNU time (/usr/bin/time; Debian's package 'time')")
    folder = os.path.join(scale.BUILD, "precision")
    write_corpus(folder, a.rows, a.dims)
    q = os.path.join(folder, "q.npy")
    runs = {k: [] for k in KINDS}
    with tempfile.TemporaryDirectory(prefix="dmprecision-") as tmp:
        for _ in range(a.repeats):
            for kind in KINDS:
                x = os.path.join(folder, f"x.{kind}.npy")
                out, rep = os.path.join(tmp, f"{kind}.npy"), os.path.join(tmp, f"{kind}.json")
                cmd = [a.program, "--embeddings", x, "--quality", q, "--ratio", "0.1", "--out", out, "--report", rep,
                       "--quiet"] + shlex.split(a.extra)
                _, rss, wall, _ = scale.measure(cmd, [x, q])
                with open(rep) as f:
                    report = json.load(f)
                runs[kind].append({"rss": rss, "wall": wall, "optimize": report["total"]["seconds"]["optimize"],
                                   "f": report["total"]["objective"]["total"], "ids": np.load(out)})
    base = runs["float32"][0]
    print(f"datamask-select defaults, ratio 0.1, {a.rows} x {a.dims} {a.extra}; medians of {a.repeats} runs "
          f"per file, in turn; {os.cpu_count()} CPUs")
    print("| file | peak RSS MiB | x float32 | wall s | optimize s | f | ids shared with float32 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    rss32 = statistics.median(r["rss"] for r in runs["float32"])
    for kind in KINDS:
        rs = runs[kind]
        rss = statistics.median(r["rss"] for r in rs)
        shared = len(np.intersect1d(rs[0]["ids"], base["ids"]))
        same = all(np.array_equal(r["ids"], rs[0]["ids"]) for r in rs)
        print(f"| {kind} | {rss / 2**20:.0f} | {rss / rss32:.2f} | {statistics.median(r['wall'] for r in rs):.2f} | "
              f"{statistics.median(r['optimize'] for r in rs):.2f} | {rs[0]['f']!r} | {shared} of {len(base['ids'])}"
              f"{'' if same else ' (runs differ!)'} |")


if __name__ == "__main__":
    main()
