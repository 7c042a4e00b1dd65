#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The cost of an objective registered by name (dmfront::objective_registry) against the same
objective built in: datamask-select --objective pairwise against a program that registers the
library's own `pairwise_similarity` type as "pairwise-registered" (tests/cli/own_objective_program.cpp),
on the --demo corpus, per optimizer; medians of REPEATS runs alternating the two; the library's
optimising seconds from each report; and whether the ids are the same.

    benchmarks/registered_objective.py [BUILD_DIR] [REPEATS]    (default: build 3)
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

CASES = [  # (label, options); demo corpus 20,000 x 32 unless a case splits it
    ("continuous", ["--optimizer", "continuous"]),
    ("continuous, no polish", ["--optimizer", "continuous", "--no-polish"]),
    ("pg (rollout credit)", ["--optimizer", "pg", "--credit", "rollout"]),
    ("stochastic", ["--optimizer", "stochastic"]),
    ("lazy", ["--optimizer", "lazy"]),
    ("greedy", ["--optimizer", "greedy"]),
]


def run(program, objective, options, tmp, tag):
    out, report = os.path.join(tmp, tag + ".npy"), os.path.join(tmp, tag + ".json")
    subprocess.run([program, "--demo", "--quiet", "--objective", objective, "--out", out, "--report", report]
                   + options, check=True, stdout=subprocess.DEVNULL)
    with open(report) as f:
        seconds = json.load(f)["total"]["seconds"]["optimize"]
    with open(out, "rb") as f:
        return seconds, f.read()


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    builtin = os.path.join(build, "tools", "datamask-select", "datamask-select")
    registered = os.path.join(build, "tests", "cli", "datamask_own_objective_program")
    print(f"demo corpus 20000 x 32, ratio 0.1 unless said; optimising seconds, medians of {repeats}")
    print(f"{'optimizer':30s} {'built-in s':>10s} {'registered s':>12s} {'ratio':>7s}  same ids")
    with tempfile.TemporaryDirectory() as tmp:
        for label, options in CASES:
            a, b, same = [], [], True
            for r in range(repeats):
                ta, ids_a = run(builtin, "pairwise", options, tmp, "a")
                tb, ids_b = run(registered, "pairwise-registered", options, tmp, "b")
                a.append(ta)
                b.append(tb)
                same = same and ids_a == ids_b
            ma, mb = statistics.median(a), statistics.median(b)
            print(f"{label:30s} {ma:10.3f} {mb:12.3f} {mb / ma:7.1f}  {'yes' if same else 'no'}")


if __name__ == "__main__":
    main()
