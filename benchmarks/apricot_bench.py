#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Dense facility location against apricot (apricot-select on PyPI) on scikit-learn's digits.

    python3 benchmarks/apricot_bench.py run [--repeats 5] [--picks 100] [--wheel PATH | --no-build]
    python3 benchmarks/apricot_bench.py render

`run` makes a virtual environment under the build folder (BUILD_DIR/apricot-venv, default
build/), installs apricot-select and scikit-learn from PyPI into it and a wheel of this checkout
(built into BUILD_DIR/apricot-module, so a second run rebuilds only what changed; `--wheel`
installs a wheel built elsewhere, `--no-build` keeps the installed module), then runs itself in
that environment: apricot's FacilityLocationSelection (naive and lazy optimizer) and datamask's
naive and lazy greedy select `--picks` of the 1,797 x 64 digits under the same kernel, side by
side, `--repeats` times, and every selection is scored by one numpy function in double precision.
Raw figures go to benchmarks/apricot_bench.json. Exits 2, saying why, when apricot cannot be installed
or imported. A benchmark, not a test: CI does not run it.

`render` writes the subsection "Facility location against apricot" of benchmarks/RESULTS.md
(inside "Facility location on a kNN graph", before its goals table) and that table's apricot row.

The kernel: apricot's metric "cosine" turns scikit-learn's cosine distance 1 - cos into
1 - (1 - (1 - cos))^2 and then the similarity 1 - that, i.e. cos^2 (apricot/utils.py,
_calculate_pairwise_distances), which is datamask's kernel cosine2. Both use every item as the
reference set; apricot's f is the sum over the items, datamask's the mean (the same picks).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RAW = os.path.join(HERE, "apricot_bench.json")
RESULTS = os.path.join(HERE, "RESULTS.md")
SUBSECTION = "### Facility location against apricot (digits)"
GOALS = "### Goals of the facility-location issue"
GOAL_ROW = "| same quality as apricot's facility-location greedy"
PACKAGES = ["apricot-select", "scikit-learn"]


# ----------------------------------------------------------------------------------------------
# Outside the environment: make it, then run this script inside it.

def fail(msg):
    print(f"apricot_bench.py: {msg}", file=sys.stderr)
    sys.exit(2)


def setup(args):
    build = os.path.abspath(os.environ.get("BUILD_DIR", os.path.join(ROOT, "build")))
    venv = os.path.join(build, "apricot-venv")
    py = os.path.join(venv, "bin", "python")
    os.makedirs(build, exist_ok=True)
    if not os.path.exists(py):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    pip = [py, "-m", "pip", "--disable-pip-version-check", "-q"]
    r = subprocess.run(pip + ["install"] + PACKAGES, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"cannot install {' and '.join(PACKAGES)} from PyPI into {venv} (pip exit "
             f"{r.returncode}); apricot is not run. pip said:\n{(r.stdout + r.stderr)[-3000:]}")
    if args.wheel:
        wheel = os.path.abspath(args.wheel)
    elif not args.no_build:
        out = os.path.join(build, "apricot-wheel")
        for f in os.listdir(out) if os.path.isdir(out) else []:
            os.remove(os.path.join(out, f))
        env = dict(os.environ, CMAKE_BUILD_PARALLEL_LEVEL=os.environ.get("JOBS", "2"))
        subprocess.run(pip + ["wheel", "--no-deps", "-w", out, "--config-settings=build-dir="
                              + os.path.join(build, "apricot-module"), ROOT], check=True, env=env)
        wheel = os.path.join(out, next(f for f in os.listdir(out) if f.startswith("datamask-")))
    if args.wheel or not args.no_build:
        subprocess.run(pip + ["install", "--force-reinstall", "--no-deps", wheel], check=True)
    env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))
    argv = [py, os.path.abspath(__file__), "measure", "--repeats", str(args.repeats),
            "--picks", str(args.picks), "--out", os.path.abspath(args.out)]
    # From outside the checkout, so that `import datamask` is the installed package.
    sys.exit(subprocess.run(argv, cwd=venv, env=env).returncode)


# ----------------------------------------------------------------------------------------------
# Inside the environment.

def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def score(x, picks):
    """f(S) = (1 / n) sum_v max_{j in S} cos(x_v, x_j)^2, in double, from the raw data: the one
    function both selections are scored by (independent of either library)."""
    import numpy as np

    u = np.asarray(x, dtype=np.float64)
    u = u / np.linalg.norm(u, axis=1, keepdims=True)
    c = u @ u[np.asarray(picks)].T
    return float((c * c).max(axis=1).mean())


class Phases:
    """Wall time of apricot's phases inside fit(): the similarity matrix, _initialize (which
    compiles its numba gain kernels, on every fit), and the optimizer's greedy loop."""

    def __init__(self):
        import apricot.functions.base as base
        import apricot.functions.facilityLocation as fl
        import apricot.optimizers as opt

        self.t = {}
        self._wrap(base, "_calculate_pairwise_distances", "similarities")
        self._wrap(fl.FacilityLocationSelection, "_initialize", "initialize")
        for cls in (opt.NaiveGreedy, opt.LazyGreedy):
            self._wrap(cls, "select", "greedy")

    def _wrap(self, owner, name, key):
        inner = getattr(owner, name)

        def timed(*a, **k):
            t0 = time.perf_counter()
            try:
                return inner(*a, **k)
            finally:
                self.t[key] = self.t.get(key, 0.0) + time.perf_counter() - t0

        setattr(owner, name, timed)


def run_apricot(x, picks, optimizer, phases):
    from apricot import FacilityLocationSelection

    phases.t = {}
    t0 = time.perf_counter()
    sel = FacilityLocationSelection(picks, metric="cosine", optimizer=optimizer).fit(x)
    wall = time.perf_counter() - t0
    return {"wall": wall, **{k: v for k, v in phases.t.items()}, "picks": [int(i) for i in sel.ranking],
            "own_f": float(sel.gains.sum()) / len(x)}


def run_datamask(x32, picks, optimizer):
    import datamask

    t0 = time.perf_counter()
    sel = datamask.select(x32, None, count=picks, objective="facility", lam=0.0, optimizer=optimizer,
                          kernel="cosine2", scaling="raw", block_size=len(x32), seed=0)
    wall = time.perf_counter() - t0
    return {"wall": wall, "optimize": sel.seconds["optimize"], "picks": [int(i) for i in sel.ids],
            "own_f": float(sel.objective.total)}


def median_of(runs, key):
    return statistics.median(r[key] for r in runs)


def measure(args):
    try:
        import apricot
        import numba
    except Exception as e:  # noqa: BLE001 -- any import failure means apricot cannot run here
        fail(f"apricot cannot be imported here ({type(e).__name__}: {e}); not run (`run` installs it)")
    import numpy as np
    import sklearn
    from sklearn.datasets import load_digits

    try:
        import datamask
    except ImportError as e:
        fail(f"the datamask module is not installed in {sys.prefix} ({e}); run without --no-build")

    x = load_digits().data  # float64, 1,797 x 64, bundled with scikit-learn
    x32 = np.ascontiguousarray(x, dtype=np.float32)
    phases = Phases()
    # The kernel check: apricot's own similarity matrix against cos^2 in double.
    from apricot.utils import _calculate_pairwise_distances

    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    kernel_diff = float(np.abs(_calculate_pairwise_distances(x, metric="cosine") - (u @ u.T) ** 2).max())

    runs = {f"{lib}_{opt}": [] for lib in ("apricot", "datamask") for opt in ("naive", "lazy")}
    loads = [loadavg()]
    t_start = time.time()
    # Side by side: each repeat runs all four, so the machine's load falls on each alike. The
    # first repeat is the cold one (apricot: numba's first compilation in the process).
    for rep in range(args.repeats + 1):
        for opt, dm_opt in (("naive", "greedy"), ("lazy", "lazy")):
            runs[f"apricot_{opt}"].append(run_apricot(x, args.picks, opt, phases))
            runs[f"datamask_{opt}"].append(run_datamask(x32, args.picks, dm_opt))
        loads.append(loadavg())
        print(f"repeat {rep}: " + ", ".join(f"{k} {v[-1]['wall']:.3f} s" for k, v in runs.items())
              + f"; load {loads[-1]}", flush=True)

    out = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t_start)),
        "commit": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip(),
        "data": {"name": "sklearn.datasets.load_digits", "n": int(x.shape[0]), "d": int(x.shape[1])},
        "picks": args.picks,
        "repeats": args.repeats,
        "kernel": "cos^2 (apricot metric 'cosine', datamask kernel cosine2)",
        "kernel_max_abs_diff": kernel_diff,
        "versions": {"apricot": apricot.__version__, "numba": numba.__version__, "numpy": np.__version__,
                     "scikit-learn": sklearn.__version__, "datamask": datamask.__version__,
                     "python": platform.python_version()},
        "machine": machine(),
        "numba_threads": numba.config.NUMBA_NUM_THREADS,
        "loadavg": loads,
        "methods": {},
    }
    for opt in ("naive", "lazy"):
        a, d = runs[f"apricot_{opt}"], runs[f"datamask_{opt}"]
        warm_a, warm_d = a[1:], d[1:]
        fa, fd = score(x, a[0]["picks"]), score(x, d[0]["picks"])
        same_picks = all(r["picks"] == a[0]["picks"] for r in a) and all(r["picks"] == d[0]["picks"] for r in d)
        agree = next((i for i, (p, q) in enumerate(zip(a[0]["picks"], d[0]["picks"])) if p != q), None)
        out["methods"][opt] = {
            "apricot": {"f": fa, "own_f": a[0]["own_f"], "cold": {k: v for k, v in a[0].items() if k != "picks"},
                        "warm_median": {k: median_of(warm_a, k) for k in a[0] if k not in ("picks", "own_f")},
                        "warm_walls": [r["wall"] for r in warm_a], "picks": a[0]["picks"]},
            "datamask": {"f": fd, "own_f": d[0]["own_f"], "cold": {k: v for k, v in d[0].items() if k != "picks"},
                         "warm_median": {k: median_of(warm_d, k) for k in d[0] if k not in ("picks", "own_f")},
                         "warm_optimize": [r["optimize"] for r in warm_d], "picks": d[0]["picks"]},
            "picks_agree_in_order": agree is None,
            "first_difference": agree,
            "common_picks": len(set(a[0]["picks"]) & set(d[0]["picks"])),
            "repeats_pick_the_same": same_picks,
        }
        m = out["methods"][opt]
        aw, dw = m["apricot"]["warm_median"], m["datamask"]["warm_median"]
        m["ratio_fit_over_optimize"] = aw["wall"] / dw["optimize"]
        m["ratio_fit_over_wall"] = aw["wall"] / dw["wall"]
        m["ratio_greedy_loop_over_optimize"] = aw["greedy"] / dw["optimize"]
        m["ratio_cold_fit_over_optimize"] = m["apricot"]["cold"]["wall"] / m["datamask"]["cold"]["optimize"]
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    for opt, m in out["methods"].items():
        print(f"{opt}: f apricot {m['apricot']['f']:.9f} datamask {m['datamask']['f']:.9f}; picks agree "
              f"{m['picks_agree_in_order']}; fit/optimize {m['ratio_fit_over_optimize']:.2f}x, fit/wall "
              f"{m['ratio_fit_over_wall']:.2f}x, greedy loop/optimize {m['ratio_greedy_loop_over_optimize']:.2f}x")
    print(f"wrote {args.out}")


def machine():
    def cmd(*c):
        try:
            return subprocess.run(c, capture_output=True, text=True).stdout
        except OSError:
            return ""

    model = next((line.split(":", 1)[1].strip() for line in cmd("lscpu").splitlines()
                  if line.startswith("Model name")), "?")
    mem = next((line.split()[1] for line in cmd("free", "-g").splitlines() if line.startswith("Mem:")), "?")
    return {"cpu": model, "cores": os.cpu_count(), "memory_gib": mem, "kernel": platform.release()}


# ----------------------------------------------------------------------------------------------
# render

def fmt_s(v):
    return f"{v:.3g}" if v < 10 else f"{v:.1f}"


def para(text):
    return textwrap.fill(text, width=100, break_long_words=False, break_on_hyphens=False)


def subsection(d):
    mach, v = d["machine"], d["versions"]
    md = [SUBSECTION, "", "```", f"python3 benchmarks/apricot_bench.py run --repeats {d['repeats']} --picks "
          f"{d['picks']}", "python3 benchmarks/apricot_bench.py render", "```", ""]
    md.append(para(
        f"scikit-learn's digits ({d['data']['n']:,} x {d['data']['d']}, float64), {d['picks']} picks, dense "
        f"facility location with every item as reference set, kernel cos^2: apricot's metric \"cosine\" "
        f"turns the cosine distance into 1 - (1 - distance)^2 and then into the similarity 1 - that (its "
        f"utils.py), which is datamask's `kernel cosine2` (apricot's matrix differs from cos^2 in double "
        f"by at most {d['kernel_max_abs_diff']:.1e}). apricot: `FacilityLocationSelection({d['picks']}, "
        f"metric=\"cosine\", optimizer=\"naive\"|\"lazy\").fit(x)` on the float64 rows. datamask: "
        f"`datamask.select(x, None, count={d['picks']}, objective=\"facility\", lam=0, scaling=\"raw\", "
        f"kernel=\"cosine2\", optimizer=\"greedy\"|\"lazy\")` on the float32 rows (one block, "
        f"pure facility location). Both selections are scored by one numpy function in double (`score` "
        f"in the script: the mean over the items of the best cos^2 to a pick). apricot {v['apricot']} "
        f"(numba {v['numba']}, {d['numba_threads']} threads; scikit-learn {v['scikit-learn']}, numpy "
        f"{v['numpy']}), datamask {v['datamask']} (commit {d['commit']}, 2 threads), Python {v['python']}."))
    md.append("")
    md.append(para(
        f"Machine: {mach['cpu']}, {mach['cores']} cores, {mach['memory_gib']} GiB, shared with other "
        f"engineers' builds and runs ({d['date']}; load average before the first repeat and after each: "
        f"{'; '.join(d['loadavg'])}). Each repeat runs the four selections one after another. The table "
        f"gives the medians of the {d['repeats']} warm repeats and, apart, apricot's first (cold) fit "
        f"in the process. apricot's fit splits into its similarity matrix, `_initialize` (which builds "
        f"and compiles its numba gain kernels again on every fit, so a warm fit pays it too) and the "
        f"greedy loop. \"fit / optimise\" is apricot's fit against datamask's optimisation "
        f"(`Selection.seconds[\"optimize\"]`: unit rows and similarity cache included); \"fit / "
        f"call\" against the whole `datamask.select` call; \"loop / optimise\" is apricot's greedy loop "
        f"alone (matrix and compilation excluded) against datamask's optimisation."))
    md.append("")
    md.append("| greedy | f (apricot) | f (datamask) | same picks in order | apricot fit s (matrix + init + "
              "loop) | apricot cold fit s | datamask optimise s | datamask call s | fit / optimise | "
              "fit / call | loop / optimise |")
    md.append("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for opt, m in d["methods"].items():
        a, dm = m["apricot"], m["datamask"]
        aw, dw = a["warm_median"], dm["warm_median"]
        same = "yes" if m["picks_agree_in_order"] else (
            f"no: first difference at pick {m['first_difference'] + 1}, {m['common_picks']} in common")
        md.append(
            f"| {opt} | {a['f']:.12f} | {dm['f']:.12f} | {same} | {fmt_s(aw['wall'])} ({fmt_s(aw['similarities'])}"
            f" + {fmt_s(aw['initialize'])} + {fmt_s(aw['greedy'])}) | {fmt_s(a['cold']['wall'])} | "
            f"{fmt_s(dw['optimize'])} | {fmt_s(dw['wall'])} | {m['ratio_fit_over_optimize']:.1f}x | "
            f"{m['ratio_fit_over_wall']:.1f}x | {m['ratio_greedy_loop_over_optimize']:.1f}x |")
    return "\n".join(md) + "\n"


def goal_status(d):
    """The goals table's apricot row: quality and both ratios against the 10x goal, per greedy."""
    status, figures = [], []
    for opt, m in d["methods"].items():
        gap = m["datamask"]["f"] - m["apricot"]["f"]
        quality = m["picks_agree_in_order"] or gap >= 0
        r = m["ratio_fit_over_optimize"]
        status.append(f"{opt}: quality {'met' if quality else 'missed'}, speed "
                      + ("met" if r >= 10 else f"missed ({r:.1f}x of 10x)"))
        figures.append(f"{opt}: f {m['datamask']['f']:.9f} against {m['apricot']['f']:.9f} "
                       f"({'the same picks in order' if m['picks_agree_in_order'] else f'difference {gap:+.2e}'}); "
                       f"{r:.1f}x apricot's fit time ({m['ratio_fit_over_wall']:.1f}x against the whole call), "
                       f"{m['ratio_greedy_loop_over_optimize']:.1f}x against apricot's greedy loop alone")
    return (f"{GOAL_ROW} on the same data and kernel; naive and lazy >= 10x faster than apricot | "
            + "; ".join(status) + f" (digits, {d['picks']} picks, cos^2; load average about "
            f"{d['loadavg'][-1].split()[0]} on 2 cores) | " + "; ".join(figures) + " |")


def render(args):
    with open(args.out) as f:
        d = json.load(f)
    with open(RESULTS) as f:
        text = f.read()
    if GOALS not in text:
        fail(f"{RESULTS} has no '{GOALS}' heading to place the subsection before")
    sub = subsection(d) + "\n"  # one blank line before the next heading
    if SUBSECTION in text:  # replace this subsection only, up to the next heading
        start = text.index(SUBSECTION)
        ends = [p for p in (text.find("\n### ", start), text.find("\n## ", start)) if p >= 0]
        end = min(ends) + 1 if ends else len(text)
        text = text[:start] + sub + text[end:]
    else:
        at = text.index(GOALS)
        text = text[:at] + sub + text[at:]
    lines = text.split("\n")
    rows = [i for i, line in enumerate(lines) if line.startswith(GOAL_ROW)]
    if len(rows) != 1:
        fail(f"expected one goals-table row starting with '{GOAL_ROW}' in {RESULTS}, found {len(rows)}")
    lines[rows[0]] = goal_status(d)
    with open(RESULTS, "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {SUBSECTION!r} and the apricot goal row of {RESULTS}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("run", "measure"):
        p = sub.add_parser(name, help="set up the environment and measure" if name == "run" else
                           "measure (inside the environment `run` made)")
        p.add_argument("--repeats", type=int, default=5, help="warm repeats after the cold one")
        p.add_argument("--picks", type=int, default=100)
        p.add_argument("--out", default=RAW, help="raw figures (JSON)")
        if name == "run":
            g = p.add_mutually_exclusive_group()
            g.add_argument("--wheel", help="install this datamask wheel instead of building one")
            g.add_argument("--no-build", action="store_true", help="keep the datamask module installed")
    p = sub.add_parser("render", help="write the RESULTS.md subsection from the raw figures")
    p.add_argument("--out", default=RAW, help="raw figures (JSON)")
    args = ap.parse_args()
    if args.cmd != "render" and args.repeats < 1:
        ap.error("--repeats must be at least 1")
    {"run": setup, "measure": measure, "render": render}[args.cmd](args)


if __name__ == "__main__":
    main()
