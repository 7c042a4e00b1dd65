#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs datamask_bench_suite one benchmark per process (so each peak-RSS figure belongs to one
run) and renders RESULTS.md with SVG figures. Standard library only."""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def machine():
    """This machine and its state now, as the report describes the machine of a run."""
    flags = sh("lscpu | grep '^Flags'").split()
    simd = [f for f in ("sse2", "avx2", "fma", "avx512f") if f in flags]
    text = "\n".join([
        sh("lscpu | grep -E 'Model name|^CPU\\(s\\)|Thread|L2|L3'"),
        "Flags (SIMD): " + " ".join(simd),
        "nproc: " + sh("nproc"),
        sh("free -h | head -2"),
        sh("uname -sr"),
        sh("c++ --version | head -1"),
    ])
    return {"date": datetime.date.today().isoformat(), "text": text, "load": sh("cut -d' ' -f1-3 /proc/loadavg")}


def run_all(binary, mode, raw_path, resume=False):
    """Runs each benchmark in its own process, writing raw_path after each. `resume`: keeps the
    finished runs of an interrupted run of the same mode in raw_path and runs the others."""
    names = subprocess.run([binary, "--benchmark_list_tests", f"--dm_mode={mode}"],
                           capture_output=True, text=True, check=True).stdout.split()
    results = []
    if resume and os.path.exists(raw_path):
        with open(raw_path) as f:
            old = json.load(f)
        if old.get("context", {}).get("dm_mode") != mode:
            sys.exit(f"report.py: --resume: {raw_path} holds a run of another mode")
        listed = {base(n) for n in names}
        results = [b for b in old["benchmarks"] if "error" not in b and base(b["name"]) in listed]
    done = {base(b["name"]) for b in results}
    for i, name in enumerate(names):
        if base(name) in done:
            continue
        t0 = time.time()
        out = subprocess.run([binary, f"--benchmark_filter=^{re.escape(name)}$",
                              "--benchmark_format=json", f"--dm_mode={mode}"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            print(f"[{i + 1}/{len(names)}] {name}: FAILED\n{out.stderr}", file=sys.stderr)
            results.append({"name": name, "error": out.stderr.strip()[-500:]})
            continue
        doc = json.loads(out.stdout)
        for b in doc["benchmarks"]:
            b["wall_process_s"] = time.time() - t0
            results.append(b)
        print(f"[{i + 1}/{len(names)}] {name}: {time.time() - t0:.1f} s", file=sys.stderr, flush=True)
        with open(raw_path, "w") as f:
            json.dump({"context": doc.get("context", {}), "benchmarks": results}, f, indent=1)
    return results


def base(name):
    return re.sub(r"/(iterations:\d+|manual_time|min_time:[0-9.]+)", "", name)


# ---- SVG ---------------------------------------------------------------------------------------

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"]


def svg_plot(path, title, xlabel, ylabel, series, logx=False, logy=False):
    """series: list of (label, [(x, y)], style) with style 'line' or 'point'."""
    import math
    w, h, ml, mr, mt, mb = 640, 400, 80, 180, 40, 50
    pts = [(x, y) for _, s, _ in series for x, y in s]
    if not pts:
        return False
    tx = (lambda v: math.log10(v)) if logx else (lambda v: v)
    ty = (lambda v: math.log10(v)) if logy else (lambda v: v)
    xs = [tx(x) for x, _ in pts]
    ys = [ty(y) for _, y in pts]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    if y1 == y0:
        y0, y1 = y0 - 1, y1 + 1
    padx, pady = 0.05 * (x1 - x0), 0.08 * (y1 - y0)
    x0, x1, y0, y1 = x0 - padx, x1 + padx, y0 - pady, y1 + pady
    X = lambda v: ml + (tx(v) - x0) / (x1 - x0) * (w - ml - mr)
    Y = lambda v: h - mb - (ty(v) - y0) / (y1 - y0) * (h - mt - mb)
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
         f'<rect width="{w}" height="{h}" fill="white"/>',
         f'<text x="{w / 2 - mr / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>',
         f'<line x1="{ml}" y1="{h - mb}" x2="{w - mr}" y2="{h - mb}" stroke="black"/>',
         f'<line x1="{ml}" y1="{mt}" x2="{ml}" y2="{h - mb}" stroke="black"/>',
         f'<text x="{(ml + w - mr) / 2}" y="{h - 12}" text-anchor="middle">{xlabel}</text>',
         f'<text x="16" y="{(mt + h - mb) / 2}" text-anchor="middle" transform="rotate(-90 16 {(mt + h - mb) / 2})">{ylabel}</text>']
    for i in range(5):
        fx = x0 + (x1 - x0) * i / 4
        fy = y0 + (y1 - y0) * i / 4
        vx = 10 ** fx if logx else fx
        vy = 10 ** fy if logy else fy
        px = ml + i / 4 * (w - ml - mr)
        py = h - mb - i / 4 * (h - mt - mb)
        o.append(f'<text x="{px}" y="{h - mb + 16}" text-anchor="middle">{vx:.3g}</text>')
        o.append(f'<text x="{ml - 6}" y="{py + 4}" text-anchor="end">{vy:.4g}</text>')
        o.append(f'<line x1="{ml}" y1="{py}" x2="{w - mr}" y2="{py}" stroke="#eee"/>')
    for k, (label, s, style) in enumerate(series):
        c = COLORS[k % len(COLORS)]
        s = sorted(s)
        if style == "line" and len(s) > 1:
            o.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' %
                     (c, " ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in s)))
        for x, y in s:
            o.append(f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="4" fill="{c}"/>')
        o.append(f'<rect x="{w - mr + 10}" y="{mt + 18 * k}" width="10" height="10" fill="{c}"/>')
        o.append(f'<text x="{w - mr + 25}" y="{mt + 18 * k + 9}">{label}</text>')
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")
    return True


# ---- report ------------------------------------------------------------------------------------

def render(results, mode, out_dir, elapsed, where):
    fig_dir = os.path.join(out_dir, "figures")
    os.makedirs(fig_dir, exist_ok=True)
    R = {base(b["name"]): b for b in results if "error" not in b}
    errors = [b for b in results if "error" in b]
    md = []
    md.append("<!-- SPDX-License-Identifier: Apache-2.0 -->")
    md.append("# datamask benchmarks: the learner against greedy baselines\n")
    md.append(f"Generated by `scripts/bench{' --quick' if mode == 'quick' else ''}` "
              f"({mode} mode) on {where['date']}; its benchmarks took "
              f"{elapsed / 60:.1f} minutes. Every benchmark ran once, in its own process "
              "(`benchmarks/report.py`); raw numbers in `results.json`.\n")
    md += by_question()
    md.append("## Machine\n")
    md.append("```")
    md.append(where["text"])
    md.append("```\n")
    md.append("The machine was shared with other engineers' builds during the run (2 cores; "
              "load average at the end: " + where["load"] +
              "). Absolute times are therefore noisy; compare methods within one table, "
              "which ran in the same session. Build: Release, `-march=native` on the benchmark "
              "binary only, OpenMP with `OMP_WAIT_POLICY=PASSIVE`. Data: synthetic, 64 Gaussian "
              "clusters in d = 256 with a shared rank-16 column mixing, quality partly predictable "
              "from the embedding; S = 0.1 n, lambda = 0.5, scales calibrated by the learner "
              "(`learner<>::calibrate`), and every method evaluated by the same `objective_function` "
              "(facility location with the whole block as reference set).\n")

    # 1. quality
    md.append("## 1. Quality of solution\n")
    md.append("Two policy-gradient settings and the continuous learner. \"learner\": the default "
              "options (beta = 5% with the 1,024-item floor on the active batch, uniform init, G = 128, "
              "linear lr 10 -> 1), E steps. \"learner, small batch\": an active batch of m = 256 items "
              "whatever n, and the quality init; the rest as the default (`small_batch_options` in "
              "`benchmarks/suite.cpp`). \"continuous\": the continuous learner (docs/method.md section 6) "
              "with its defaults, E iterations (pairwise similarity and DiSF: dense facility location "
              "has no relaxation). Every learner run uses seed 0, the seed whose calibrated scales "
              "define f here.\n")
    share_rows = []
    for obj, goal in (("pws", 0.99), ("fl", 0.97), ("disf", 0.99)):
        pre = f"quality/{obj}/"
        runs = {k[len(pre):]: v for k, v in R.items() if k.startswith(pre)}
        if not runs:
            continue
        n = int(next(iter(runs.values())).get("n", 0))
        f_rand = runs.get("random", {}).get("objective")
        greedy = {k: v for k, v in runs.items() if k in ("naive", "lazy") or k.startswith("stochastic")}
        # Two learner settings: the defaults ("learner/") and the small active batch with the
        # quality initialisation ("learner_small/", suite.cpp's small_batch_options).
        settings = (("learner/", "learner", "default options"),
                    ("learner_small/", "learner, small batch", "m = 256, quality init"),
                    ("continuous/", "continuous", "continuous learner"))
        sweeps = [(label, what, sorted(((int(v.get("steps", 0)), v) for k, v in runs.items() if k.startswith(key)),
                                       key=lambda t: t[0]))
                  for key, label, what in settings]
        sweeps = [sw for sw in sweeps if sw[2]]
        md.append(f"### {obj.upper()} (n = {n:,}, d = 256, S = {n // 10:,})\n")
        md.append("| method | f | share of best greedy's gain over random | seconds | candidate gains | peak RSS (MiB) |")
        md.append("|---|---:|---:|---:|---:|---:|")
        best_name, best = max(greedy.items(), key=lambda kv: kv[1]["objective"]) if greedy else (None, None)

        def share(v):
            if f_rand is None or best is None or best["objective"] == f_rand:
                return float("nan")
            return (v - f_rand) / (best["objective"] - f_rand)
        if f_rand is not None:
            md.append(f"| random (mean of 64) | {f_rand:.5g} | 0 | {runs['random']['seconds']:.2f} (64 evaluations) | | {runs['random']['peak_rss_mib']:.0f} |")
        for k, v in sorted(greedy.items()):
            md.append(f"| greedy {k}{' (best)' if k == best_name else ''} | {v['objective']:.5g} | {share(v['objective']):.4f} | {v['seconds']:.2f} | {v.get('evaluations', 0):,.0f} | {v['peak_rss_mib']:.0f} |")
        for label, _, learners in sweeps:
            for e, v in learners:
                work = f"{e:,} iterations" if label == "continuous" else f"{128 * e:,} rollouts"
                md.append(f"| {label}, E = {e} | {v['objective']:.5g} | {share(v['objective']):.4f} | {v['seconds']:.2f} | {work} | {v['peak_rss_mib']:.0f} |")
        md.append("")
        if sweeps and best is not None:
            points = [(share(v["objective"]), e, what, v["seconds"]) for _, what, learners in sweeps
                      for e, v in learners]
            at_goal = [p for p in points if p[0] >= goal]
            # The fastest learner point at the goal; where none reached it, the best share.
            s_best, e, what, secs = (min(at_goal, key=lambda p: p[3]) if at_goal
                                     else max(points, key=lambda p: p[0]))
            share_rows.append((obj, goal, s_best, e, what, secs, best_name, best["seconds"]))
        series = []
        for label, _, learners in sweeps:
            series.append((f"{label} (E sweep)", [(v["seconds"], v["objective"]) for _, v in learners], "line"))
        for k, v in sorted(greedy.items()):
            series.append((f"greedy {k}", [(v["seconds"], v["objective"])], "point"))
        if f_rand is not None:
            xs = [p[0] for s in series for p in s[1]]
            series.append(("random subsets", [(min(xs), f_rand), (max(xs), f_rand)], "line"))
        fig = f"quality_{obj}.svg"
        if svg_plot(os.path.join(fig_dir, fig), f"{obj.upper()}: f against wall time (n = {n:,})",
                    "seconds (log)", "f", series, logx=True):
            md.append(f"![{obj} objective against time](figures/{fig})\n")
    md.append("**Summary (goal: >= 99% for PWS and DiSF, >= 97% for FL).**\n")
    md.append("The learner's point: its fastest run at the goal, or its best share where no run reached it.\n")
    md.append("| objective | learner's share | at E | setting | seconds | best greedy | its seconds | goal | met |")
    md.append("|---|---:|---:|---|---:|---|---:|---:|---|")
    for obj, goal, s, e, what, secs, bn, bsecs in share_rows:
        md.append(f"| {obj} | {100 * s:.1f}% | {e} | {what} | {secs:.2f} | {bn} | {bsecs:.2f} | {100 * goal:.0f}% | {'yes' if s >= goal else 'no'} |")
    md.append("")

    # 2. black box
    md.append("## 2. Black-box speed\n")
    md.append("Naive greedy on an evaluation-only f scores every remaining item on S_t + i in every "
              "round: sum_t (n - t) c(t + 1) seconds, with c(s) the time of one evaluation of f on s "
              "items. A full run is far beyond this machine (hours to years), so c(s) was timed at "
              "s = S/8, S/2, S on random rows (the cost of f does not depend on which rows) and the "
              "sum taken over the fitted line. `greedy_select_blackbox` is the implementation; the "
              "tests check it picks what the incremental greedy picks.\n")
    md.append("| objective | n | c(S/8) s | c(S/2) s | c(S) s | naive black-box greedy (estimated) | learner time (E = 300, same n) | time ratio (the learner at E = 300 is NOT at 99% of greedy's f: see the notes) |")
    md.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for obj in ("pws", "fl", "disf"):
        for k, v in R.items():
            if k.startswith(f"blackbox/{obj}/"):
                n = int(v["n"])
                lk = f"scale/{obj}/learner/steps:300/n:{n}" if mode == "full" else f"scale/{obj}/learner/steps:30/n:{n}"
                lt = R.get(lk, {}).get("seconds")
                est = v["naive_blackbox_seconds_est"]
                md.append(f"| {obj} | {n:,} | {v['eval_s_small']:.3g} | {v['eval_s_half']:.3g} | {v['eval_s_full']:.3g} | "
                          f"{est:,.0f} s ({est / 3600:,.1f} h) | {('%.1f s' % lt) if lt else 'not run'} | "
                          f"{('%.0fx' % (est / lt)) if lt else 'n/a'} |")
    md.append("")

    # 3. scale
    md.append("## 3. Structured speed: time against n\n")
    md.append("| objective | n | method | seconds | f | candidate gains | peak RSS (MiB) |")
    md.append("|---|---:|---|---:|---:|---:|---:|")
    scale = {}
    for k, v in sorted(R.items(), key=lambda kv: (kv[0].split("/")[1], int(kv[1].get("n", 0)), kv[0])):
        if not k.startswith("scale/"):
            continue
        parts = k.split("/")
        obj, n = parts[1], int(v["n"])
        meth = "/".join(parts[2:-1])
        scale.setdefault(obj, {}).setdefault(meth, []).append((n, v["seconds"]))
        md.append(f"| {obj} | {n:,} | {meth} | {v['seconds']:.2f} | {v['objective']:.5g} | {v.get('evaluations', 0):,.0f} | {v['peak_rss_mib']:.0f} |")
    md.append("")
    for obj, ms in scale.items():
        fig = f"scale_{obj}.svg"
        if svg_plot(os.path.join(fig_dir, fig), f"{obj.upper()}: seconds against n", "n (log)",
                    "seconds (log)", [(m, s, "line") for m, s in sorted(ms.items())], logx=True, logy=True):
            md.append(f"![{obj} time against n](figures/{fig})\n")

    # 4. kernels
    md.append("## 4. Kernels: reward evaluation against the machine's GEMM rate\n")
    gemm = next((v for k, v in R.items() if k.startswith("kernel/gemm")), None)
    md.append("One learner step's rewards: G = 128 rollouts of k = m/10 items from an active batch "
              "of m, through `eigen_backend::evaluate`; GFLOP/s of the work each kernel does "
              "(PWS 2kd and DiSF kd^2 + 3kd per rollout; FL 2 m u d per step, one product of the "
              "batch with the u distinct rows of the G rollouts, from which every rollout is scored). "
              "Reference: Eigen's float GEMM in the "
              "same binary" + (f", {gemm['gflops']:.1f} GFLOP/s." if gemm else ".") + "\n")
    md.append("| kernel | m | ms per step | rollouts/s | GFLOP/s | share of GEMM rate | goal |")
    md.append("|---|---:|---:|---:|---:|---:|---|")
    for k, v in sorted(R.items()):
        if k.startswith("kernel/") and not k.startswith("kernel/gemm"):
            obj = k.split("/")[1]
            sh_ = v["gflops"] / gemm["gflops"] if gemm else float("nan")
            goal = ">= 50%" if obj in ("disf", "fl") else "(memory-bound)"
            md.append(f"| {obj} | {int(v['m']):,} | {v['real_time']:.1f} | {v['rollouts_per_s']:,.0f} | {v['gflops']:.1f} | {100 * sh_:.0f}% | {goal} |")
    md.append("")

    # 5. memory
    md.append("## 5. Memory\n")
    md.append("Peak resident memory of each run is in the tables above (`getrusage`, one process per "
              "run, including the synthetic block itself: n x 256 floats = 1 KiB per item). No buffer "
              "of the library grows with n^2 past a fixed budget: facility location's greedy keeps "
              "the n x n dot products only where they fit `facility_location::cache_bytes` (256 MiB "
              "by default: up to about 8,000 items, none of the sizes here), and otherwise one running "
              "maximum per item, scoring candidates in tiles; DiSF's keeps d x d matrices.\n")
    if errors:
        md.append("## Failed runs\n")
        for b in errors:
            md.append(f"- `{b['name']}`: {b['error'][:300]}")
        md.append("")
    return md


# The report's sections by the question a reader brings (each section is written by the script
# its text names; this index only points to them).
QUESTIONS = [
    ("How good is the selection?", ["1. Quality of solution", "Real data", "Certificates",
                                    "Goals: met or missed, and what limits each"]),
    ("How fast is it, against greedy?", ["2. Black-box speed", "3. Structured speed: time against n",
                                         "Continuous learner: time-quality fronts",
                                         "4. Kernels: reward evaluation against the machine's GEMM rate"]),
    ("How does it scale (memory, many machines, the paper's corpus)?",
     ["5. Memory", "Many machines: MPI ranks and shards", "One worker's cost at scale (issue 46)",
      "Merge's memory (issue 46, item 4)"]),
    ("What was each default chosen on?", ["Policy gradient: per-item credit against the paper's estimator",
                                          "Facility location on a kNN graph", "Real data", "Certificates"]),
    ("What does an objective of your own cost?", ["A metric of your own (Python)",
                                                 "An objective of your own (C++, registered by name)"]),
]


def anchor(title):
    """A heading's anchor as Markdown renderers make it: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^a-z0-9 _-]", "", title.lower()).replace(" ", "-")


def by_question():
    md = ["## By question\n"]
    for q, titles in QUESTIONS:
        md.append("- **%s** %s" % (q, "; ".join("[%s](#%s)" % (t, anchor(t)) for t in titles)))
    md.append("- **On a GPU?** [GPU.md](GPU.md).\n")
    return md


def other_sections(path, md):
    """The sections of an existing report that other scripts write (benchmarks/fronts.py,
    spread.py, apricot_bench.py, ...; each replaces only its own): from the first top-level
    heading this report does not write to the end, so that a new run keeps them."""
    if not os.path.exists(path):
        return ""
    own = {line for line in "\n".join(md).splitlines() if line.startswith("## ")}
    with open(path) as f:
        text = f.read()
    for m in re.finditer(r"^## .*$", text, re.M):
        if m.group(0) not in own:
            return text[m.start():]
    return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--mode", choices=["quick", "full"], default="quick")
    ap.add_argument("--out", required=True)
    ap.add_argument("--notes", help="a markdown file appended to the report (analysis of goals)")
    ap.add_argument("--render-only", action="store_true", help="re-render from <out>/results.json")
    ap.add_argument("--resume", action="store_true",
                    help="keep the finished runs in <out>/results.json (an interrupted run) and run the rest")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    raw = os.path.join(a.out, "results.json")
    if a.render_only:
        with open(raw) as f:
            doc = json.load(f)
        results = doc["benchmarks"]
        elapsed = doc.get("elapsed_s", 0)
        # results.json of earlier runs did not record the machine; this one may be another
        where = doc.get("machine") or {"date": "(date not recorded)", "load": "not recorded",
                                       "text": "not recorded in results.json (a run before the report kept it)"}
    else:
        results = run_all(a.binary, a.mode, raw, a.resume)
        elapsed = sum(b.get("wall_process_s", 0.0) for b in results)  # a resumed run's parts too
        with open(raw) as f:
            doc = json.load(f)
        doc["elapsed_s"] = elapsed
        doc["mode"] = a.mode
        doc["machine"] = where = machine()
        with open(raw, "w") as f:
            json.dump(doc, f, indent=1)
    md = render(results, a.mode, a.out, elapsed, where)
    if a.notes and os.path.exists(a.notes):
        with open(a.notes) as f:
            md.append(f.read())
    path = os.path.join(a.out, "RESULTS.md")
    rest = other_sections(path, md)
    with open(path, "w") as f:
        f.write("\n".join(md).rstrip() + "\n" + ("\n" + rest if rest else ""))
    print(f"wrote {os.path.join(a.out, 'RESULTS.md')}", file=sys.stderr)


if __name__ == "__main__":
    main()
