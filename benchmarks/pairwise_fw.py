#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A numpy prototype for the pairwise objective on real data: Frank-Wolfe on the concave
relaxation of docs/method.md 7.1 instead of projected ascent on the expected value, its read-out, and a
1-swap polish, against datamask-select's naive greedy and `auto` on the same f (issue 24).

    python3 benchmarks/pairwise_fw.py [--sets digits-std,cancer] [--ratios ...] [--lambdas ...]
                                      [--qualities ...] [--iterations 100] [--candidates 16,64]

Runs inside benchmarks/real_data.py's environment and data sets (BUILD_DIR/real-venv,
BUILD_DIR/real-data). For each cell: the program's greedy gives f's scales (seed 0) and the
reference; g(p) = a.p - b (||X^T p||^2 - S) with a = lambda q / (S s_q), b = (1 - lambda) /
(s_p S (S - 1)) is maximised over {0 <= p <= 1, sum p = S} by Frank-Wolfe with exact line search
(the direction's vertex: the S largest entries of grad g = a - 2 b X X^T p), started at p = S / n;
the read-out is the S largest p; polish then applies the best exact 1-swap among the C selected
items with the smallest gradient and the C unselected with the largest, until none improves. The
table gives each method's share of naive greedy's gain over random subsets (real_data.py's zero)
and, for the relaxation, the certified upper bound's share (max_P g <= g(p) + FW gap).
"""
import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import real_data as rd  # noqa: E402


def frank_wolfe(u, a, b, k, iterations):
    import numpy as np

    n = len(u)
    p = np.full(n, k / n)
    s = u.T @ p
    bound = np.inf
    for _ in range(iterations):
        grad = a - 2.0 * b * (u @ s)
        top = np.argpartition(-grad, k - 1)[:k]
        v = np.zeros(n)
        v[top] = 1.0
        d = v - p
        gap = float(grad @ d)
        g = float(a @ p - b * (s @ s - k))
        bound = min(bound, g + gap)
        sd = u.T @ d
        curv = 2.0 * b * float(sd @ sd)
        if gap <= 0 or curv <= 0:
            break
        step = min(1.0, gap / curv)
        p += step * d
        s += step * sd
    return p, bound


def polish(u, c, a, b, sel, candidates, max_rounds=100000):
    """Best-improvement 1-swaps on f(U) = a.1_U - b (||sum_U u||^2 - sum_U c), exact gains."""
    import numpy as np

    n = len(u)
    inside = np.zeros(n, bool)
    inside[sel] = True
    s = u[inside].sum(axis=0)
    swaps = 0
    for _ in range(max_rounds):
        grad = a - 2.0 * b * (u @ s)  # the gain of adding j; removing i loses grad_i + 2 b c_i
        ins = np.flatnonzero(inside)
        outs = np.flatnonzero(~inside)
        drop = ins[np.argsort(grad[ins] + 2.0 * b * c[ins], kind="stable")[:candidates]]
        take = outs[np.argsort(-grad[outs], kind="stable")[:candidates]]
        # gain of (i out, j in): a_j - a_i - b (||s - u_i + u_j||^2 - ||s||^2 - c_j + c_i)
        su = u @ s
        gain = (a[take][None, :] - a[drop][:, None]
                - b * (2.0 * (su[take][None, :] - su[drop][:, None]) + c[take][None, :] + c[drop][:, None]
                       - 2.0 * (u[drop] @ u[take].T) - c[take][None, :] + c[drop][:, None]))
        i, j = np.unravel_index(np.argmax(gain), gain.shape)
        if gain[i, j] <= 1e-12:
            break
        inside[drop[i]] = False
        inside[take[j]] = True
        s += u[take[j]] - u[drop[i]]
        swaps += 1
    return np.flatnonzero(inside), swaps


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    rd.add_grid_options(p, sets="digits-std,cancer", qualities="proba,label")
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--candidates", default="16,64")
    a = p.parse_args()
    rd.run_in_venv(__file__, a)
    import numpy as np

    sets = rd.parse_list(a.sets, rd.ALL)
    rd.ensure_sets(sets)
    prog = rd.program(a.program)
    cands = rd.parse_list(a.candidates, kind=int)
    cols = ["auto", "FW read-out"] + [f"FW + polish C={c}" for c in cands] + ["bound"]
    rd.print_cells_head(cols)
    worst = {c: 1e9 for c in cols}
    per_set = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in sets:
            folder = os.path.join(rd.build_dir(), "real-data", name)
            ev = rd.Evaluator(folder)
            for ratio in rd.parse_list(a.ratios, kind=float):
                for lam in rd.parse_list(a.lambdas, kind=float):
                    for quality in (rd.parse_list(a.qualities, rd.QUALITIES) if lam > 0 else [None]):
                        base = rd.program_args("pairwise", folder, ratio, lam, quality) + ["--threads", "1"]
                        ref = rd.run_one(prog, base + ["--optimizer", "greedy"], tmp, 1, 600)
                        auto = rd.run_one(prog, base + ["--optimizer", "auto"], tmp, 1, 600)
                        terms = ref["terms"]
                        k = len(ref["sel"])
                        zero = ev.random_mean(terms, k, quality, 64)
                        gain = ref["f"] - zero
                        qa = np.zeros(len(ev.u))
                        if "quality" in terms:
                            t = terms["quality"]
                            qa = t["weight"] * ev.q[quality] / (k * t["scale"])
                        t = terms["pairwise"]
                        b = t["weight"] / (t["scale"] * k * (k - 1))
                        pfw, bound = frank_wolfe(ev.u, qa, b, k, a.iterations)
                        read = np.argsort(-pfw, kind="stable")[:k]
                        row = {"auto": (auto["f"] - zero) / gain,
                               "FW read-out": (ev.f(terms, read, quality) - zero) / gain,
                               "bound": (bound - zero) / gain}
                        for c in cands:
                            sel, _ = polish(ev.u, ev.c, qa, b, read, c)
                            row[f"FW + polish C={c}"] = (ev.f(terms, sel, quality) - zero) / gain
                        mine = per_set.setdefault(name, {c: 1e9 for c in cols})
                        for col in cols:
                            worst[col] = min(worst[col], row[col])
                            mine[col] = min(mine[col], row[col])
                        print(f"| {name} | {ratio} | {lam} | {quality} | "
                              + " | ".join(f"{100 * row[col]:.2f}" for col in cols) + " |", flush=True)
    for name, mine in per_set.items():
        print(f"| {name}: worst | | | | " + " | ".join(f"{100 * mine[col]:.2f}" for col in cols) + " |")
    print("| worst | | | | " + " | ".join(f"{100 * worst[col]:.2f}" for col in cols) + " |")


if __name__ == "__main__":
    main()
