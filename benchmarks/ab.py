#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Before/after timings of two builds of a Google Benchmark program, side by side in one run.

    benchmarks/ab.py BEFORE_BINARY AFTER_BINARY [--filter REGEX] [--rounds 3] [--args "EXTRA ARGS"]

Each benchmark both binaries list runs in its own process, alternately (before, after, before,
...) for --rounds rounds, so that a change in the machine's load falls on both sides alike; the
table gives each side's median time and after / before. --args go to both binaries (the
suite's `--args=--dm_mode=quick`, for example). Used for the rule that a change makes no benchmark more
than 5% slower: rows above 1.05 are marked.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys


def listed(binary, extra, pattern):
    out = subprocess.run([binary, "--benchmark_list_tests", *extra], capture_output=True, text=True, check=True)
    return [n for n in out.stdout.split() if re.search(pattern, n)]


def seconds(binary, name, extra):
    """The benchmark's real time in seconds (the mean when it ran several iterations)."""
    # The filter is a std::regex (ECMAScript), where re.escape's "\-" is not a valid escape.
    literal = re.sub(r"([.^$|?*+()\[\]{}\\])", r"\\\1", name)
    out = subprocess.run([binary, f"--benchmark_filter=^{literal}$", "--benchmark_format=json", *extra],
                         capture_output=True, text=True)
    if out.returncode != 0 or not out.stdout.strip():
        sys.exit(f"ab.py: {binary} {name} failed or printed nothing:\n{out.stderr[-800:]}")
    runs = [b for b in json.loads(out.stdout)["benchmarks"] if b.get("run_type", "iteration") == "iteration"]
    scale = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
    return statistics.fmean(b["real_time"] * scale[b["time_unit"]] for b in runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--filter", default=".", help="regex on the benchmark names")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--args", default="", help="arguments for both binaries, separated by spaces")
    a = ap.parse_args()
    a.extra = a.args.split()
    for path in (a.before, a.after):
        if not os.access(path, os.X_OK):
            sys.exit(f"ab.py: {path} is not an executable program")
    names = [n for n in listed(a.after, a.extra, a.filter) if n in set(listed(a.before, a.extra, a.filter))]
    if not names:
        sys.exit(f"ab.py: the two binaries list no common benchmark matching '{a.filter}'")
    print(f"load average {os.getloadavg()[0]:.2f}; {a.rounds} alternating rounds; median seconds")
    print(f"{'benchmark':<60} {'before':>10} {'after':>10} {'after/before':>13}")
    worst = 0.0
    for name in names:
        t = {a.before: [], a.after: []}
        for _ in range(a.rounds):
            for side in (a.before, a.after):
                t[side].append(seconds(side, name, a.extra))
        before, after = statistics.median(t[a.before]), statistics.median(t[a.after])
        ratio = after / before if before > 0 else float("nan")
        worst = max(worst, ratio)
        mark = "  > 5% slower" if ratio > 1.05 else ""
        print(f"{name:<60} {before:10.4f} {after:10.4f} {ratio:13.3f}{mark}", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}; worst after/before {worst:.3f}")


if __name__ == "__main__":
    main()
