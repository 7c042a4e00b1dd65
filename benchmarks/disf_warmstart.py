#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A numpy prototype for DiSF on real data: a swap search started from stochastic greedy's set
(or from auto's selection) against naive greedy, on the same f (issue 24).

    python3 benchmarks/disf_warmstart.py [--sets wine,cancer] [--ratios ...] [--lambdas ...]
                                         [--qualities ...] [--candidates 16]

Runs inside benchmarks/real_data.py's environment and data sets. For each cell the program runs
naive greedy (the reference and f's scales), stochastic greedy and auto (seed 0); each start set
is then improved by swaps: rank the selected items by f without them and the others by f with
them added (exact, in double), take the C best of each side, apply the best improving swap among
those C x C by its exact f, repeat until none improves ("best of the two swapped": the better of
the swapped stochastic and auto sets, which a learner could track). The table gives shares of naive greedy's
gain over random subsets (real_data.py's zero). f is evaluated from scratch each time (O(S d^2)),
so this is a measurement of where a swap search ends, not of its speed.
"""
import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import real_data as rd  # noqa: E402


def swap_search(ev, terms, quality, sel, candidates, max_swaps=10000):
    import numpy as np

    n = len(ev.x)
    inside = np.zeros(n, bool)
    inside[sel] = True
    f = ev.f(terms, np.flatnonzero(inside), quality)
    swaps = 0
    for _ in range(max_swaps):
        ins = np.flatnonzero(inside)
        outs = np.flatnonzero(~inside)
        without = np.array([ev.f(terms, ins[ins != i], quality) for i in ins])  # S - 1 items
        with_ = np.array([ev.f(terms, np.append(ins, j), quality) for j in outs])  # S + 1 items
        drop = ins[np.argsort(-without, kind="stable")[:candidates]]
        take = outs[np.argsort(-with_, kind="stable")[:candidates]]
        best, move = f, None
        for i in drop:
            base = ins[ins != i]
            for j in take:
                g = ev.f(terms, np.append(base, j), quality)
                if g > best + 1e-12 * max(1.0, abs(best)):
                    best, move = g, (i, j)
        if move is None:
            break
        inside[move[0]] = False
        inside[move[1]] = True
        f = best
        swaps += 1
    return f, swaps


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    rd.add_grid_options(p, sets="wine,cancer", qualities="proba,random,label")
    p.add_argument("--candidates", type=int, default=16)
    a = p.parse_args()
    rd.run_in_venv(__file__, a)
    sets = rd.parse_list(a.sets, rd.ALL)
    rd.ensure_sets(sets)
    prog = rd.program(a.program)
    cols = ["stochastic", "stochastic + swaps", "auto", "auto + swaps", "best of the two swapped", "greedy + swaps"]
    rd.print_cells_head(cols)
    worst = {}
    below = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in sets:
            ev = rd.Evaluator(os.path.join(rd.build_dir(), "real-data", name))
            folder = os.path.join(rd.build_dir(), "real-data", name)
            mine = worst.setdefault(name, {c: 1e9 for c in cols})
            low = below.setdefault(name, {c: 0 for c in cols})
            for ratio in rd.parse_list(a.ratios, kind=float):
                for lam in rd.parse_list(a.lambdas, kind=float):
                    for quality in (rd.parse_list(a.qualities, rd.QUALITIES) if lam > 0 else [None]):
                        base = rd.program_args("disf", folder, ratio, lam, quality) + ["--threads", "1"]
                        runs = {o: rd.run_one(prog, base + ["--optimizer", o], tmp, 1, 600)
                                for o in ("greedy", "stochastic", "auto")}
                        terms = runs["greedy"]["terms"]
                        k = len(runs["greedy"]["sel"])
                        zero = ev.random_mean(terms, k, quality, 64)
                        gain = runs["greedy"]["f"] - zero

                        def share(f):
                            return (f - zero) / gain

                        row = {"stochastic": share(runs["stochastic"]["f"]), "auto": share(runs["auto"]["f"])}
                        for o in ("stochastic", "auto", "greedy"):
                            f, _ = swap_search(ev, terms, quality, runs[o]["sel"], a.candidates)
                            row[f"{o} + swaps"] = share(f)
                        row["best of the two swapped"] = max(row["stochastic + swaps"], row["auto + swaps"])
                        for c in cols:
                            mine[c] = min(mine[c], row[c])
                            low[c] += row[c] < rd.BAR
                        print(f"| {name} | {ratio} | {lam} | {quality} | "
                              + " | ".join(f"{100 * row[c]:.2f}" for c in cols) + " |", flush=True)
    for name, mine in worst.items():
        print(f"| {name}: worst | | | | " + " | ".join(f"{100 * mine[c]:.2f}" for c in cols) + " |")
        print(f"| {name}: cells below 99.5% | | | | " + " | ".join(str(below[name][c]) for c in cols) + " |")


if __name__ == "__main__":
    main()
