#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What datamask-select --certify costs and certifies: one run per row, with --certify, whose
report gives the block's optimising seconds and its certificate's seconds side by side (the same
process, the same block; the bound's, and the random mean's of the share), the certified share
and the method. Standard library only.

    cli_cost.py PROGRAM [--quick] [--million] [--before OTHER_PROGRAM [--rounds 3]]

Corpora: the program's --demo corpus (20,000 x 32), and clustered Gaussian corpora written here
as .npy (64 clusters, quality = a noisy function of the cluster; seed 1). Prints a Markdown table;
a kNN row also gives the seconds of the block's graph (built before the optimiser runs, used by
it and by the bound) and the bound's share of graph and optimiser together. Pairwise similarity on
a 100,000 x 256 corpus of the same kind (the fronts' width) is written with numpy (another
generator, so other numbers than corpus() would give; skipped without numpy); --million adds
1,000,000 x 256.
--before adds a second table: each certified row run by OTHER_PROGRAM (another build) and PROGRAM
alternately, --rounds times each, so that the machine's load falls on both alike: the median
bound seconds of each, after / before, and whether the two bounds are equal.
--budget STEPS,... adds a table of the 100,000 x 64 kNN row (with --quick, the 20,000 demo's
instead) at each --certify-steps value (0: the default): its seconds against the optimiser's, and what
it certifies.
"""
import json
import math
import os
import random
import statistics
import struct
import subprocess
import sys
import tempfile


def npy(path, descr, shape, payload):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else ""))
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + payload)


def corpus(folder, n, d, seed=1, clusters=64):
    rnd = random.Random(seed)
    centres = [[rnd.gauss(0, 1) for _ in range(d)] for _ in range(clusters)]
    emb, q = [], []
    for _ in range(n):
        c = rnd.randrange(clusters)
        emb.extend(x + 0.5 * rnd.gauss(0, 1) for x in centres[c])
        q.append(math.cos(c) + 0.3 * rnd.gauss(0, 1))
    e, qf = os.path.join(folder, "emb-%d-%d.npy" % (n, d)), os.path.join(folder, "q-%d.npy" % n)
    npy(e, "<f4", (n, d), struct.pack("<%df" % len(emb), *emb))
    npy(qf, "<f8", (n,), struct.pack("<%dd" % n, *q))
    return ["--embeddings", e, "--quality", qf]


def corpus_numpy(folder, n, d, seed=1, clusters=64):
    """corpus()'s kind of corpus written with numpy, for sizes pure Python is too slow for."""
    import numpy as np

    rng = np.random.default_rng(seed)
    label = rng.integers(0, clusters, n)
    x = rng.standard_normal((clusters, d)).astype(np.float32)[label]
    x += 0.5 * rng.standard_normal((n, d), dtype=np.float32)
    # names of their own: corpus() may have written another corpus of n rows
    e, qf = os.path.join(folder, "np-emb-%d-%d.npy" % (n, d)), os.path.join(folder, "np-q-%d-%d.npy" % (n, d))
    np.save(e, x)
    np.save(qf, np.cos(label) + 0.3 * rng.standard_normal(n))
    return ["--embeddings", e, "--quality", qf]


def run(program, folder, inputs, args, certify=("--certify",)):
    report = os.path.join(folder, "r.json")
    subprocess.run([program] + inputs + args + list(certify) + ["--quiet", "--report", report],
                   check=True, stdout=subprocess.DEVNULL)
    with open(report) as f:
        rep = json.load(f)
    b = rep["blocks"][0]
    c = b["certificate"]
    c["graph_seconds"] = b["graph"]["seconds"] if "graph" in b else None
    return rep["configuration"]["optimizer"], b["seconds"]["optimize"], c


def option(name, default=None):
    if name not in sys.argv:
        return default
    at = sys.argv.index(name) + 1
    if at == len(sys.argv) or sys.argv[at].startswith("--"):
        sys.exit("cli_cost.py: %s needs a value" % name)
    return sys.argv[at]


def before_after(before, program, folder, cases, rounds):
    """Markdown rows: each case's bound seconds by both programs, in the order before, after,
    after, before, ... (so that neither always runs first)."""
    rows = []
    for name, inputs, args, objective in cases:
        times = ([], [])
        bounds = [None, None]
        for r in range(rounds):
            for side in ((0, 1) if r % 2 == 0 else (1, 0)):
                _, _, c = run((before, program)[side], folder, inputs, args)
                times[side].append(c["seconds"] - c["random_seconds"])
                bounds[side] = c["bound"]
        b, a = statistics.median(times[0]), statistics.median(times[1])
        rows.append("| %s | %s | %.2f | %.2f | %.2f | %s |" % (
            name, objective, b, a, a / b, "yes" if bounds[0] == bounds[1] else "no"))
    return rows


def budget_rows(program, folder, name, inputs, args, steps):
    """Markdown rows: the case at each --certify-steps value."""
    rows = []
    for st in steps:
        _, optimize, c = run(program, folder, inputs, args, ("--certify", "--certify-steps", str(st)))
        bound = c["seconds"] - c["random_seconds"]
        rows.append("| %s | %s | %.2f | %.2f | %.0f%% | %.0f%% | %.4f%% |" % (
            name, "default (100)" if st == 0 else str(st), optimize, bound, 100 * bound / optimize,
            100 * c["seconds"] / optimize, 100 * c["certified_share"]))
    return rows


def main():
    program = os.path.abspath(sys.argv[1])
    before = option("--before")
    quick = "--quick" in sys.argv
    rows = []
    with tempfile.TemporaryDirectory(prefix="dmcert-") as folder:
        big = [] if quick else corpus(folder, 100000, 64)
        small = corpus(folder, 5000 if not quick else 1000, 32)
        cases = [("demo (20,000 x 32)", ["--demo"], [], "pairwise"),
                 ("demo (20,000 x 32)", ["--demo"], ["--objective", "facility", "--neighbors", "32"], "facility, kNN K = 32"),
                 ("demo (20,000 x 32)", ["--demo"], ["--objective", "pairwise", "--objective", "disf"], "pairwise + disf"),
                 ("%s" % ("5,000 x 32" if not quick else "1,000 x 32"), small, ["--objective", "facility"], "facility, dense")]
        if big:
            cases += [("100,000 x 64", big, [], "pairwise"),
                      ("100,000 x 64", big, ["--objective", "facility", "--neighbors", "32"], "facility, kNN K = 32")]
        wide = [] if quick else [(100000, "100,000 x 256")]
        if "--million" in sys.argv:
            wide.append((1000000, "1,000,000 x 256"))
        for n, name in wide:
            try:
                cases += [(name, corpus_numpy(folder, n, 256), [], "pairwise")]
            except ImportError:
                print("cli_cost.py: numpy not found; the %s row is skipped" % name, file=sys.stderr)
        certified = []
        for name, inputs, args, objective in cases:
            optimizer, optimize, c = run(program, folder, inputs, args)
            if c["certified_share"] is not None:
                certified.append((name, inputs, args, objective))
            share = "no certificate" if c["certified_share"] is None else "%.4f%%" % (100 * c["certified_share"])
            bound = c["seconds"] - c["random_seconds"]
            graph = c["graph_seconds"]
            with_graph = "-" if graph is None else "%.0f%%" % (100 * bound / (graph + optimize))
            rows.append("| %s | %s | %s | %.2f | %s | %.2f | %.2f | %.0f%% | %.0f%% | %s | %s | %s |" % (
                name, objective, optimizer, optimize, "-" if graph is None else "%.2f" % graph, bound,
                c["random_seconds"], 100 * bound / optimize, 100 * c["seconds"] / optimize, with_graph,
                c["method"], share))
        if before:
            compared = before_after(os.path.abspath(before), program, folder, certified,
                                    int(option("--rounds", 3)))
        budgets = []
        if option("--budget"):
            steps = [int(x) for x in option("--budget").split(",")]
            knn = ["--objective", "facility", "--neighbors", "32"]
            name, inputs = ("demo (20,000 x 32)", ["--demo"]) if quick else ("100,000 x 64", big)
            budgets = budget_rows(program, folder, name, inputs, knn, steps)
    print("| corpus | objective + quality | optimizer | optimize s | graph s | bound s | random mean s "
          "| bound / optimize | certify / optimize | bound / (graph + optimize) | method | certified share |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    if before:
        print("\n| corpus | objective + quality | bound s before | bound s after | after / before | same bound |")
        print("|---|---|---|---|---|---|")
        print("\n".join(compared))
    if budgets:
        print("\n| corpus (facility, kNN K = 32, lazy) | dual steps | optimize s | bound s | bound / optimize "
              "| certify / optimize | certified share |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(budgets))


if __name__ == "__main__":
    main()
