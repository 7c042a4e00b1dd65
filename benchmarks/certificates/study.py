#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Measurements of the certificate study (STUDY.md): for each block, objective and method, the
certified share of naive greedy's selection at several budgets, the passes and seconds spent, and
for facility location the distance of each bound from the LP optimum.

    build/venv/bin/python benchmarks/certificates/study.py run BLOCK OBJECTIVE [--lp]
    build/venv/bin/python benchmarks/certificates/study.py table

BLOCK: synth-N-D (synthetic, N items in R^D) or digits, wine, breast_cancer; OBJECTIVE: pairwise,
facility-knn, facility-dense, disf. `run` prints its rows and stores them in results.json beside
this file (one entry per block and objective, replaced on a re-run); `table` prints every stored
row as the markdown table of STUDY.md. S = round(n / 10), lambda 0.5, scales calibrated on 256
uniformly random S-subsets of the block, whose mean f is the "random" of the certified share
(f(U) - random) / (bound - random); --lam sets another lambda. BLAS runs on one thread (set before numpy loads).
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import blocks  # noqa: E402
import certify as c  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results.json")
LAMBDA = 0.5
K = 32
BUDGETS = (1, 10, 30, 50, 100, 300)


def load(block):
    if block.startswith("synth-"):
        _, n, d = block.split("-")
        return blocks.synthetic(int(n), int(d))
    return blocks.real(block)


def make(objective, x, q, size, lam):
    w = c.Weights(lam)
    if objective == "pairwise":
        return c.PairwiseQuality(x, q, size, w)
    if objective == "disf":
        return c.DisfQuality(x, q, size, w)
    xu = c.unit_rows(x)
    kernel = c.knn_graph(xu, min(K, x.shape[0])) if objective == "facility-knn" else c.DenseCosine(xu)
    return c.FacilityQuality(kernel, q, size, w)


def at_budget(history, evals):
    """The history's row after `evals` evaluations (the last one if the run stopped earlier)."""
    rows = [h for h in history if h.evals <= evals]
    return rows[-1]


def run(block, objective, with_lp, lam=LAMBDA):
    x, q = load(block)
    n = x.shape[0]
    size = max(2, round(n / 10))
    obj = make(objective, x, q, size, lam)
    w, random_f = c.calibrate(obj, lam, c.random_subsets(n, size, 256, seed=1))
    label = block if lam == LAMBDA else f"{block}, lambda {lam:g}"
    obj = obj.with_weights(w)
    start = time.perf_counter()
    selection = c.greedy(obj)
    greedy_s = time.perf_counter() - start
    f = obj.value(selection)
    gain = f - random_f
    rows = []

    def share(bound):
        return gain / (bound - random_f)

    def add(method, evals, passes, seconds, bound, reference=None, note=""):
        row = dict(block=label, n=n, d=x.shape[1], S=size, objective=objective, method=method,
                   evals=evals, passes=round(passes, 2), seconds=round(seconds, 4), bound=bound,
                   share=share(bound), f=f, random=random_f, note=note)
        if reference is not None:
            row["gap_to_reference"] = (bound - reference) / (reference - random_f)
        rows.append(row)

    head = dict(block=label, objective=objective, n=n, d=x.shape[1], S=size, f=f, random=random_f,
                greedy_seconds=round(greedy_s, 3))
    if objective == "pairwise":
        p0 = np.zeros(n)
        p0[selection] = 1.0
        long = c.pairwise_frank_wolfe(obj, p0, 1000)
        head["relaxation"] = [long.lower, long.bound]
        if n <= 5000:  # best-improvement swaps from greedy's set: where greedy is not optimal
            t0 = time.perf_counter()
            polished = c.polish_pairwise(obj, selection, rounds=300)
            head["polished"] = dict(f=obj.value(polished), seconds=round(time.perf_counter() - t0, 3))
        for evals in BUDGETS:
            h = at_budget(long.history, evals)
            add("frank-wolfe", h.evals, h.passes, h.seconds, h.bound, note="from greedy's set")
        fista = c.pairwise_accelerated(obj, p0, 300)
        for evals in (10, 30, 100, 300):
            h = at_budget(fista.history, evals)
            add("accelerated projected gradient", h.evals, h.passes, h.seconds, h.bound,
                note="from greedy's set")
        uniform = c.pairwise_frank_wolfe(obj, np.full(n, size / n), 300)
        for evals in (10, 30, 100, 300):
            h = at_budget(uniform.history, evals)
            add("frank-wolfe", h.evals, h.passes, h.seconds, h.bound, note="from p = S/n")
        # the continuous learner's defaults: its own selection, certified from its final p
        t0 = time.perf_counter()
        p_cont, u_cont = c.continuous_pairwise(obj)
        head["continuous"] = dict(f=obj.value(u_cont), seconds=round(time.perf_counter() - t0, 3))
        fw = c.pairwise_frank_wolfe(obj, p_cont, 30)
        for evals in (1, 10, 30):
            h = at_budget(fw.history, evals)
            bound = h.bound
            rows.append(dict(block=label, n=n, d=x.shape[1], S=size, objective=objective,
                             method="frank-wolfe", evals=h.evals, passes=round(h.passes, 2),
                             seconds=round(h.seconds, 4), bound=bound,
                             share=(obj.value(u_cont) - random_f) / (bound - random_f),
                             f=obj.value(u_cont), random=random_f,
                             note="continuous learner's set, from its p"))
    elif objective.startswith("facility"):
        reference = None
        if with_lp:
            t0 = time.perf_counter()
            if objective == "facility-dense" and n > 700:
                lower, upper, _, rounds = c.dense_lp_by_columns(obj)
                head["lp_rounds"] = rounds
                reference = upper
                head["lp_bracket"] = [lower, upper]
            else:
                reference, _ = c.facility_lp(obj)
            head["lp"] = reference
            head["lp_seconds"] = round(time.perf_counter() - t0, 2)
            add("LP (HiGHS)", 0, 0, head["lp_seconds"], reference, reference)
        dual = c.FacilityDual.of(obj)
        for method in c.DUAL_METHODS:
            longest = BUDGETS[-1] if objective == "facility-knn" or n <= 5000 else 100
            r = c.facility_bound(obj, selection, method, longest, dual=dual)
            for evals in BUDGETS:
                if evals > longest:
                    continue
                h = at_budget(r.history, evals)
                add(method, h.evals, h.passes, h.seconds, h.bound, reference)
    else:
        bound = c.disf_bound(obj)
        add("quality + 0", 0, 0, 0.0, bound)
        fq, fd = obj.terms(selection)
        random_terms = np.array([obj.terms(u) for u in c.random_subsets(n, size, 256, seed=1)])
        best_q = c.top_sum(q, size) / size
        d = x.shape[1]
        head["disf"] = dict(
            greedy_F=fd, random_F=float(random_terms[:, 1].mean()),
            # E[sum_{a != b} C_ab^2] for d independent columns and S rows: d (d - 1) / (S - 1)
            independent_columns_F=-d * (d - 1) / (size - 1) / 1e4,
            quality_gap=w.cq * (best_q - fq),
            diversity_gap=w.cd * (0.0 - fd))
    return head, rows


def store(head, rows):
    data = json.load(open(RESULTS)) if os.path.exists(RESULTS) else {"runs": []}
    data["runs"] = [r for r in data["runs"]
                    if (r["head"]["block"], r["head"]["objective"]) != (head["block"], head["objective"])]
    head["machine"] = f"{platform.processor() or platform.machine()}, numpy {np.__version__}, 1 BLAS thread"
    data["runs"].append(dict(head=head, rows=rows))
    with open(RESULTS, "w") as out:
        json.dump(data, out, indent=1)


def fmt_row(r):
    gap = r.get("gap_to_reference")
    return (f"| {r['block']} | {r['objective']} | {r['method']}"
            f"{' (' + r['note'] + ')' if r['note'] else ''} | {r['evals']} | {r['passes']:g} | "
            f"{r['seconds']:.3f} | {100 * r['share']:.4f}% | "
            f"{'' if gap is None else f'{100 * gap:.3f}%'} |")


HEADER = ("| block | objective | method | evals | passes | seconds | certified share | "
          "bound - LP (% of gain) |\n|---|---|---|---|---|---|---|---|")
SHOWN = (1, 10, 30, 50, 100, 300)


def table():
    """One line per block, objective and method: the certified share after each budget of
    evaluations, the distance from the LP after 30, 50, 100 and 300, passes per evaluation and the
    seconds of the longest run."""
    data = json.load(open(RESULTS))
    print("| block | objective | method | passes / eval | " + " | ".join(f"share @{e}" for e in SHOWN)
          + " | bound - LP @30 / @50 / @100 / @300 | s @max |")
    print("|" + "---|" * (len(SHOWN) + 6))
    for entry in data["runs"]:
        groups = {}
        for r in entry["rows"]:
            key = r["method"] + (f" ({r['note']})" if r["note"] else "")
            groups.setdefault(key, []).append(r)
        for key, rows in groups.items():
            by_evals = {r["evals"]: r for r in rows}
            last = rows[-1]
            if last["evals"] == 0:  # LP, or DiSF's closed form: no iterations
                cells = [f"{100 * last['share']:.4f}%"] + [""] * (len(SHOWN) - 1)
                per = "-"
            else:
                cells = [f"{100 * by_evals[e]['share']:.4f}%" if e in by_evals else "" for e in SHOWN]
                per = f"{(last['passes'] - rows[0]['passes']) / max(last['evals'] - rows[0]['evals'], 1):.2f}"
            gaps = [by_evals[e].get("gap_to_reference") if e in by_evals else None for e in (30, 50, 100, 300)]
            gap = " / ".join("" if g is None else f"{100 * g:.2f}%" for g in gaps) if any(
                g is not None for g in gaps) else ""
            print(f"| {last['block']} | {last['objective']} | {key} | {per} | " + " | ".join(cells)
                  + f" | {gap} | {last['seconds']:.2f} |")
    print()
    print("| block | objective | n | d | S | f(greedy) | mean f random | greedy s | notes |")
    print("|---|---|---|---|---|---|---|---|---|")
    for entry in data["runs"]:
        h = entry["head"]
        notes = []
        if "relaxation" in h:
            notes.append(f"max g in [{h['relaxation'][0]:.6f}, {h['relaxation'][1]:.6f}]")
        if "polished" in h:
            share = (h["polished"]["f"] - h["random"]) / (h["relaxation"][1] - h["random"])
            notes.append(f"greedy + 1-swaps f = {h['polished']['f']:.6f} (share {100 * share:.4f}%)")
        if "continuous" in h:
            notes.append(f"continuous learner f = {h['continuous']['f']:.6f} ({h['continuous']['seconds']} s)")
        if "lp" in h:
            notes.append(f"LP {h['lp']:.6f} in {h['lp_seconds']} s"
                         + (f" ({h['lp_rounds']} column-generation rounds)" if "lp_rounds" in h else ""))
        if "disf" in h:
            dd = h["disf"]
            notes.append(f"F_disf greedy {dd['greedy_F']:.3e}, random {dd['random_F']:.3e}, "
                         f"independent columns {dd['independent_columns_F']:.3e}; bound - f = "
                         f"{dd['quality_gap']:.3f} (quality) + {dd['diversity_gap']:.3f} (DiSF)")
        print(f"| {h['block']} | {h['objective']} | {h['n']} | {h['d']} | {h['S']} | {h['f']:.6f} | "
              f"{h['random']:.6f} | {h['greedy_seconds']} | {'; '.join(notes)} |")
    print()
    print(f"Machine: {data['runs'][0]['head']['machine']}.")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("block")
    r.add_argument("objective", choices=("pairwise", "facility-knn", "facility-dense", "disf"))
    r.add_argument("--lp", action="store_true", help="solve the LP with HiGHS (facility location)")
    r.add_argument("--lam", type=float, default=LAMBDA, help="lambda (default 0.5)")
    sub.add_parser("table")
    args = parser.parse_args()
    if args.command == "table":
        table()
        return
    head, rows = run(args.block, args.objective, args.lp, args.lam)
    store(head, rows)
    print(HEADER)
    for row in rows:
        print(fmt_row(row))
    print({k: v for k, v in head.items()})


if __name__ == "__main__":
    main()
