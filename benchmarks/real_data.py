#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The default optimizer against the greedy baselines on real data (issue 24).

    python3 benchmarks/real_data.py run [--sets small|text|all|NAME,...] [options]
    python3 benchmarks/real_data.py data [--sets ...]
    python3 benchmarks/real_data.py check [--sets ...] [options]

`data` builds the data sets under BUILD_DIR/real-data (default build/), `run` builds what is
missing, then runs datamask-select (BUILD_DIR/tools/datamask-select/datamask-select, or
--program) over a grid and prints a markdown table. Both first make a virtual environment,
BUILD_DIR/real-venv, with numpy and scikit-learn from PyPI, and run themselves inside it.

The data sets (nothing is downloaded besides the packages):
- digits (1,797 x 64, raw pixels), digits-std (the same, each pixel standardised), wine (178 x 13)
  and cancer (breast cancer, 569 x 30), both standardised: scikit-learn's bundled sets.
- text: the English manual pages of this machine (/usr/share/man/man[1-9]/*, troff requests and
  escapes stripped), one document per page, TF-IDF (English stop words, min_df 2, max_df 0.5,
  sublinear tf) then TruncatedSVD to d = 128 (seed 0); pages left without a term stay zero rows.
  Its label is the manual section. The set depends on what this machine has installed.
Quality columns: `proba` (a logistic regression's probability of the item's true class, from
5-fold cross-validated predictions), `random` (uniform, seed 0) and `label` (the class as a number).

The grid: objectives pairwise, disf, facility (dense, cosine) and knn (facility location on the
exact 32-nearest-neighbour cosine graph of the set, built here once in numpy and passed with
--graph, so graph building is outside every optimizer's time); ratios, lambdas; at lambda 0 one
cell per (objective, ratio), as quality does not count. Each cell runs each optimizer with seed 0
(so the same calibrated scales, i.e. the same f) and --threads 1 (default), its time the report's
seconds.optimize (best of --repeats runs, one run when it takes over 0.25 s; the optimizer that
auto resolves to is not run again, it takes auto's figures). The reference greedy: naive greedy
for pairwise and DiSF, lazy greedy for facility location (--reference names another, where naive
greedy is out of reach; the table says which). The zero: the mean f of --random-subsets uniform subsets
of the same size, f computed here in double precision from the report's scales (the program's f
of each run's selection is checked against this independent evaluation). A cell's share is
(f - zero) / (f(reference greedy) - zero); its time ratio is seconds / seconds(reference greedy).

`check` runs the grid (the same options) with the optimizers auto and the reference greedy only, and
exits 1, listing them, when a cell's auto reaches less than 99.5% of the reference's gain (the
ctest entry cli.real_data_grid runs it on the small sets). When numpy and scikit-learn cannot be
installed, every command exits 77 (ctest: skipped).

`table --json PATH` prints the tables again from a run's --json (its cells of --objectives and,
unless small or all, --sets). Both also print auto's cost
rule (naive greedy where it costs no more operations than the continuous learner, two ascents, per
block: datamask::auto_block_optimizer) against the continuous learner's measured time over
naive greedy's, per (set, objective, S).

--dtype float16|bfloat16 gives the program a 16-bit copy of each set's embeddings (x.npy rounded to
nearest even; bfloat16 as ml_dtypes' 2-byte void dtype) and the kNN graph of the rounded rows, and
computes f, the zero and the check from the rounded values.

--certify runs every optimizer with --certify and adds a table of the certified shares: how close
to the optimum each optimizer's selection is proven to be (the report's certificate).

--try NAME=ARGS adds an optimizer column: datamask-select with ARGS (e.g.
--try 'long=--optimizer continuous --polish-rounds 100'). --json PATH writes every run.
"""
import argparse
import gzip
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PACKAGES = ["numpy", "scikit-learn"]
SMALL = ["digits", "digits-std", "wine", "cancer"]
ALL = SMALL + ["text"]
QUALITIES = ["proba", "random", "label"]
OBJECTIVES = ["pairwise", "disf", "facility", "knn"]
OPTIMIZERS = ["auto", "continuous", "greedy", "lazy", "stochastic"]
REFERENCE = {"pairwise": "greedy", "disf": "greedy", "facility": "lazy", "knn": "lazy"}
NEIGHBORS = 32
BAR = 0.995  # the share of the reference greedy's gain that auto must reach (issue 24)


def build_dir():
    return os.path.abspath(os.environ.get("BUILD_DIR", os.path.join(ROOT, "build")))


def fail(msg):
    print(f"real_data.py: {msg}", file=sys.stderr)
    sys.exit(2)


def program(path=None):
    """The datamask-select to run: `path` (a script's --program), else the build folder's."""
    return path or os.path.join(build_dir(), "tools", "datamask-select", "datamask-select")


def add_grid_options(p, sets, qualities):
    """The options of a study over the real sets' cells: --sets, --ratios, --lambdas, --qualities
    (defaults `sets` and `qualities`), --program, and --in-venv (`run_in_venv`'s re-run)."""
    p.add_argument("--sets", default=sets)
    p.add_argument("--ratios", default="0.05,0.1,0.2,0.3")
    p.add_argument("--lambdas", default="0,0.2,0.5,0.9")
    p.add_argument("--qualities", default=qualities)
    p.add_argument("--program")
    p.add_argument("--in-venv", action="store_true", help=argparse.SUPPRESS)


def print_cells_head(columns):
    """The head of a study's markdown table: a cell's set, ratio, lambda and quality, then `columns`."""
    print("| set | ratio | lambda | quality | " + " | ".join(columns) + " |")
    print("|" + "---|" * (4 + len(columns)))


def run_in_venv(script, args):
    """Unless `args.in_venv`: runs `script` again with the same arguments and --in-venv in the
    virtual environment `setup` makes (OpenMP's passive wait unless set), and exits with its status."""
    if args.in_venv:
        return
    py = setup()
    env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"), BUILD_DIR=build_dir())
    sys.exit(subprocess.run([py, os.path.abspath(script)] + sys.argv[1:] + ["--in-venv"], env=env).returncode)


def setup():
    """Makes BUILD_DIR/real-venv (numpy, scikit-learn) when it is missing; returns its python."""
    venv = os.path.join(build_dir(), "real-venv")
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        os.makedirs(build_dir(), exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    r = subprocess.run([py, "-c", "import numpy, sklearn"], capture_output=True)
    if r.returncode != 0:
        r = subprocess.run([py, "-m", "pip", "--disable-pip-version-check", "-q", "install"] + PACKAGES,
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"real_data.py: cannot install {', '.join(PACKAGES)} into {venv}: {(r.stdout + r.stderr)[-2000:]}",
                  file=sys.stderr)
            sys.exit(77)
    return py


# ----------------------------------------------------------------------------------------------
# Data sets (inside the environment).

def strip_troff(text):
    """The words of a manual page: comments, request names, escapes and fonts removed."""
    out = []
    for line in text.splitlines():
        if line.startswith(('.\\"', "'\\\"", '.\\}', "\\\"")):
            continue
        if line.startswith((".", "'")):
            parts = line[1:].split(None, 1)
            if not parts or parts[0] in ("de", "de1", "ds", "nr", "if", "ie", "el", "so", "ig", "TH"):
                continue
            line = parts[1] if len(parts) > 1 else ""
        line = re.sub(r"\\f(\[[^\]]*\]|\(..|.)", " ", line)
        line = re.sub(r"\\\*(\[[^\]]*\]|\(..|.)", " ", line)
        line = re.sub(r"\\\((..)", " ", line)
        line = re.sub(r"\\[ -~]", " ", line)
        out.append(line)
    return "\n".join(out)


def man_pages():
    """(text, section) of every English manual page, in path order."""
    docs = []
    base = "/usr/share/man"
    for sec in sorted(d for d in os.listdir(base) if re.fullmatch(r"man[1-9]", d)):
        folder = os.path.join(base, sec)
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if not os.path.isfile(path):
                continue
            try:
                raw = gzip.open(path, "rb").read() if name.endswith(".gz") else open(path, "rb").read()
            except OSError:
                continue
            docs.append((strip_troff(raw.decode("utf-8", "replace")), int(sec[3:])))
    return docs


def knn_graph(x, k):
    """The exact k-nearest-neighbour graph under cosine, each item its own first neighbour (a zero
    row's similarities are all 0, as the library defines them): (ids int64, sims float32)."""
    import numpy as np

    u = x.astype(np.float64)
    norms = np.linalg.norm(u, axis=1)
    u = np.divide(u, norms[:, None], out=np.zeros_like(u), where=norms[:, None] > 0)
    n = len(u)
    k = min(k, n)
    ids = np.empty((n, k), np.int64)
    sims = np.empty((n, k), np.float32)
    for a in range(0, n, 2048):
        c = u[a:a + 2048] @ u.T
        rows = np.arange(a, min(a + 2048, n))
        self_sim = c[rows - a, rows].copy()
        c[rows - a, rows] = np.inf  # itself first
        part = np.argpartition(-c, k - 1, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(c, part, 1), axis=1, kind="stable")
        top = np.take_along_axis(part, order, 1)
        s = np.take_along_axis(c, top, 1)
        s[:, 0] = self_sim
        ids[a:a + len(rows)] = top
        sims[a:a + len(rows)] = s
    return ids, sims


def build_set(name, folder):
    import numpy as np
    from sklearn import datasets
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.preprocessing import StandardScaler

    t0 = time.time()
    if name == "text":
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import TfidfVectorizer

        docs = man_pages()
        if len(docs) < 1000:
            fail(f"text: only {len(docs)} manual pages under /usr/share/man")
        tfidf = TfidfVectorizer(stop_words="english", min_df=2, max_df=0.5, sublinear_tf=True,
                                token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z0-9_]+\b", dtype=np.float32)
        m = tfidf.fit_transform([d for d, _ in docs])
        x = TruncatedSVD(128, random_state=0).fit_transform(m).astype(np.float32)
        x[np.asarray(m.sum(axis=1)).ravel() == 0] = 0.0
        y = np.array([s for _, s in docs])
        features = x
    else:
        load = {"digits": datasets.load_digits, "digits-std": datasets.load_digits, "wine": datasets.load_wine,
                "cancer": datasets.load_breast_cancer}[name]
        raw, y = load(return_X_y=True)
        std = StandardScaler().fit_transform(raw)
        x = (raw if name == "digits" else std).astype(np.float32)
        features = std
    classes, yi = np.unique(y, return_inverse=True)
    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    proba = cross_val_predict(LogisticRegression(max_iter=3000), features, yi, cv=cv, method="predict_proba")
    os.makedirs(folder, exist_ok=True)
    np.save(os.path.join(folder, "x.npy"), x)
    np.save(os.path.join(folder, "q_proba.npy"), proba[np.arange(len(yi)), yi].astype(np.float32))
    np.save(os.path.join(folder, "q_random.npy"), np.random.default_rng(0).random(len(x)).astype(np.float32))
    np.save(os.path.join(folder, "q_label.npy"), y.astype(np.float32))
    ids, sims = knn_graph(x, NEIGHBORS)
    np.save(os.path.join(folder, f"knn{NEIGHBORS}.ids.npy"), ids)
    np.save(os.path.join(folder, f"knn{NEIGHBORS}.sims.npy"), sims)
    zero = int((np.abs(x).sum(axis=1) == 0).sum())
    info = {"name": name, "n": int(x.shape[0]), "d": int(x.shape[1]), "zero_rows": zero,
            "classes": int(len(classes)), "seconds": round(time.time() - t0, 1)}
    with open(os.path.join(folder, "info.json"), "w") as f:
        json.dump(info, f)
    print(f"real_data.py: built {name}: {info}", file=sys.stderr)


def ensure_sets(names):
    infos = {}
    for name in names:
        folder = os.path.join(build_dir(), "real-data", name)
        if not os.path.exists(os.path.join(folder, "info.json")):
            build_set(name, folder)
        with open(os.path.join(folder, "info.json")) as f:
            infos[name] = json.load(f)
    return infos


# ----------------------------------------------------------------------------------------------
# f in double precision, independent of the program.

EMBEDDING_DTYPES = ("float32", "float16", "bfloat16")


def embeddings_file(folder, dtype):
    """The set's embeddings as the program reads them in `dtype`: x.npy (float32) itself, or
    x.<dtype>.npy, its values rounded to nearest even (written once). bfloat16 is stored as
    ml_dtypes stores it, a 2-byte void dtype ('|V2'), so that no package beyond numpy is needed."""
    import numpy as np

    src = os.path.join(folder, "x.npy")
    if dtype == "float32":
        return src
    path = os.path.join(folder, f"x.{dtype}.npy")
    if not os.path.exists(path):
        x = np.load(src).astype(np.float32)
        if dtype == "float16":
            out = x.astype(np.float16)
        else:
            bits = x.view(np.uint32).astype(np.uint64)
            rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # to nearest even (finite inputs)
            out = rounded.astype(np.uint16).view("V2")
        tmp = path + ".tmp.npy"
        np.save(tmp, out)
        os.replace(tmp, path)
    return path


def graph_prefix(folder, dtype):
    """The set's kNN graph files (PREFIX.ids.npy, PREFIX.sims.npy) for `dtype`: knn32, the graph of
    x.npy, or knn32.<dtype>, the graph of the rounded rows (written once), so that a 16-bit run's
    facility location is on its own values' graph."""
    import numpy as np

    prefix = os.path.join(folder, f"knn{NEIGHBORS}")
    if dtype == "float32":
        return prefix
    prefix += f".{dtype}"
    if not os.path.exists(prefix + ".sims.npy"):
        ids, sims = knn_graph(load_embeddings(embeddings_file(folder, dtype)), NEIGHBORS)
        np.save(prefix + ".ids.npy", ids)
        np.save(prefix + ".sims.npy", sims)
    return prefix


def load_embeddings(path):
    """An embeddings file as float64, bfloat16 ('|V2') widened exactly."""
    import numpy as np

    x = np.load(path)
    if x.dtype.kind == "V" and x.dtype.itemsize == 2:
        x = (x.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return x.astype(np.float64)


class Evaluator:
    def __init__(self, folder, dtype="float32"):
        import numpy as np

        self.np = np
        # f of the values the program read: the rounded ones for 16-bit inputs.
        self.x = load_embeddings(embeddings_file(folder, dtype))
        norms = np.linalg.norm(self.x, axis=1)
        self.u = np.divide(self.x, norms[:, None], out=np.zeros_like(self.x), where=norms[:, None] > 0)
        self.c = (norms > 0).astype(np.float64)  # ||u_i||^2
        self.q = {k: np.load(os.path.join(folder, f"q_{k}.npy")).astype(np.float64) for k in QUALITIES}
        graph = graph_prefix(folder, dtype)
        self.gids = np.load(graph + ".ids.npy")
        self.gsims = np.load(graph + ".sims.npy").astype(np.float64)
        self.dense = None

    def term(self, name, sel, quality):
        np = self.np
        k = len(sel)
        if name == "quality":
            return float(self.q[quality][sel].mean())
        if name == "pairwise":
            s = self.u[sel].sum(axis=0)
            return float(-(s @ s - self.c[sel].sum()) / (k * (k - 1)))
        if name == "disf":
            z = self.x[sel]
            z = (z - z.mean(axis=0)) / np.sqrt(z.var(axis=0, ddof=1) + 1e-8)
            cm = z.T @ z / (k - 1)
            return float(-((cm * cm).sum() - (np.diag(cm) ** 2).sum()) / 1e4)
        if name == "facility":
            return float((self.u @ self.u[sel].T).max(axis=1).mean())
        if name == "facility_knn":
            mask = np.zeros(len(self.x), bool)
            mask[sel] = True
            return float(np.where(mask[self.gids], self.gsims, 0.0).max(axis=1).clip(min=0.0).mean())
        raise KeyError(name)

    def f(self, terms, sel, quality):
        """f = sum weight * raw / scale over the report's terms (constant terms count as reported)."""
        total = 0.0
        for name, t in terms.items():
            total += t["weight"] * self.term(name, sel, quality) / t["scale"]
        return total

    def random_mean(self, terms, k, quality, count):
        rng = self.np.random.default_rng(12345)
        n = len(self.x)
        return float(self.np.mean([self.f(terms, rng.choice(n, k, replace=False), quality) for _ in range(count)]))


# ----------------------------------------------------------------------------------------------
# The grid.

def program_args(obj, folder, ratio, lam, quality, dtype="float32"):
    a = ["--embeddings", embeddings_file(folder, dtype), "--ratio", str(ratio), "--lambda", str(lam)]
    if lam > 0:
        a += ["--quality", os.path.join(folder, f"q_{quality}.npy")]
    if obj == "knn":
        a += ["--objective", "facility", "--graph", graph_prefix(folder, dtype)]
    else:
        a += ["--objective", obj]
    return a


def ran_optimizer(report):
    """The optimizer the report's blocks ran (auto is resolved per block); the configuration's
    for a report without per-block names."""
    names = {b.get("optimizer") for b in report["blocks"] if b.get("optimizer")}
    return names.pop() if len(names) == 1 else report["configuration"]["optimizer"]


def run_one(prog, args, tmp, repeats, timeout):
    best = None
    out = os.path.join(tmp, "sel.npy")
    rep = os.path.join(tmp, "report.json")
    for _ in range(repeats):
        t0 = time.time()
        try:
            r = subprocess.run([prog] + args + ["--out", out, "--report", rep, "--quiet"], capture_output=True,
                               text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"timeout": timeout}
        if r.returncode != 0:
            return {"error": (r.stderr or r.stdout).strip()[-400:]}
        with open(rep) as f:
            report = json.load(f)
        secs = report["total"]["seconds"]["optimize"]
        if best is None or secs < best["seconds"]:
            import numpy as np

            best = {"seconds": secs, "wall": time.time() - t0, "f": report["total"]["objective"]["total"],
                    "terms": report["total"]["objective"]["terms"], "sel": np.load(out),
                    "optimizer": ran_optimizer(report),
                    "certified": (report["total"].get("certificate") or {}).get("certified_share"),
                    "certify_seconds": report["total"]["seconds"].get("certify")}
        if secs > 0.25:  # longer runs: one timing is enough
            break
    return best


def parse_list(text, allowed=None, kind=str):
    items = [kind(t) for t in text.split(",") if t]
    if allowed is not None:
        for t in items:
            if t not in allowed:
                fail(f"'{t}' is not one of {', '.join(map(str, allowed))}")
    return items


def run_grid(a):
    import numpy as np

    sets = {"small": SMALL, "text": ["text"], "all": ALL}.get(a.sets) or parse_list(a.sets, ALL)
    infos = ensure_sets(sets)
    prog = program(a.program)
    if not os.path.exists(prog):
        fail(f"{prog} is not built (cmake --build {build_dir()} --target datamask-select)")
    objectives = parse_list(a.objectives, OBJECTIVES)
    optimizers = parse_list(a.optimizers, OPTIMIZERS)
    tries = []
    for t in a.try_:
        name, _, extra = t.partition("=")
        tries.append((name, shlex.split(extra)))
    columns = optimizers + [n for n, _ in tries]
    ratios = parse_list(a.ratios, kind=float)
    lambdas = parse_list(a.lambdas, kind=float)
    qualities = parse_list(a.qualities, QUALITIES)
    cells = []
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for name in sets:
            folder = os.path.join(build_dir(), "real-data", name)
            ev = Evaluator(folder, a.dtype)
            for obj in objectives:
                if name in a.skip_facility_dense.split(",") and obj == "facility":
                    continue
                for ratio in ratios:
                    for lam in lambdas:
                        for quality in (qualities if lam > 0 else [None]):
                            base = program_args(obj, folder, ratio, lam, quality, a.dtype) + ["--threads", str(a.threads)]
                            base += ["--certify"] if a.certify else []
                            runs = {}
                            reference = a.reference or REFERENCE[obj]
                            need = set(columns) | {reference}
                            for opt in optimizers + [o for o in OPTIMIZERS if o in need and o not in optimizers]:
                                ran = runs.get("auto") or {}
                                if opt != "auto" and ran.get("optimizer") == opt:
                                    runs[opt] = ran  # the same run: auto resolved to it
                                else:
                                    runs[opt] = run_one(prog, base + ["--optimizer", opt], tmp, a.repeats, a.timeout)
                            for tname, extra in tries:
                                runs[tname] = run_one(prog, base + extra, tmp, a.repeats, a.timeout)
                            ref = runs[reference]
                            cell = {"set": name, "objective": obj, "ratio": ratio, "lambda": lam, "quality": quality,
                                    "reference": reference, "runs": {}}
                            if ref is None or "f" not in ref:
                                cell["error"] = f"reference {reference}: {ref}"
                                cells.append(cell)
                                print(f"{name} {obj} {ratio} {lam} {quality}: {cell['error']}", file=sys.stderr)
                                continue
                            terms = ref["terms"]
                            k = len(ref["sel"])
                            zero = ev.random_mean(terms, k, quality, a.random_subsets)
                            gain = ref["f"] - zero
                            cell["zero"] = zero
                            for opt, r in runs.items():
                                if r is None or "f" not in r:
                                    cell["runs"][opt] = r
                                    continue
                                mine = ev.f(terms, r["sel"], quality)
                                if abs(mine - r["f"]) > 1e-4 * max(1.0, abs(r["f"])):
                                    fail(f"{name} {obj} {ratio} {lam} {quality} {opt}: the program's f {r['f']} is "
                                         f"not f recomputed here ({mine})")
                                if r["terms"].keys() != terms.keys() or any(
                                        abs(r["terms"][t]["scale"] - terms[t]["scale"]) > 1e-9 * terms[t]["scale"]
                                        for t in terms):
                                    fail(f"{name} {obj} {ratio} {lam} {quality} {opt}: other scales than the reference")
                                cell["runs"][opt] = {"f": r["f"], "seconds": r["seconds"], "ran": r["optimizer"],
                                                     "share": (r["f"] - zero) / gain if gain > 0 else float("nan"),
                                                     "time_ratio": r["seconds"] / max(ref["seconds"], 1e-9),
                                                     "certified": r["certified"],
                                                     "certify_ratio": (r["certify_seconds"] / max(r["seconds"], 1e-9)
                                                                       if r.get("certify_seconds") is not None
                                                                       else None)}
                            cells.append(cell)
                            if a.verbose:
                                print(f"{name} {obj} r={ratio} l={lam} q={quality}: " + " ".join(
                                    f"{o}={c['share']:.4f}/{c['time_ratio']:.2f}" for o, c in cell["runs"].items()
                                    if c and "share" in c), file=sys.stderr, flush=True)
    return cells, columns, infos, time.time() - started


def fmt_share(v):
    return "n/a" if v is None or v != v else f"{100 * v:.2f}"


def table(cells, columns, infos, a, elapsed):
    lines = []
    lines.append("Sets: " + "; ".join(f"{n} ({i['n']} x {i['d']}, {i['zero_rows']} zero rows, {i['classes']} classes)"
                                      for n, i in infos.items()) + ".")
    lines.append("")
    lines.append("Share of the reference greedy's gain over random subsets, in %: the worst cell of each "
                 "(set, objective) and, in brackets, the mean; then the time against the reference greedy "
                 "(the largest ratio, and the reference's largest time in seconds).")
    lines.append("")
    head = "| set | objective | cells | " + " | ".join(columns) + " | time ratio (max): " + ", ".join(columns) + \
           " | reference's time (max) |"
    lines.append(head)
    lines.append("|" + "---|" * (head.count("|") - 1))
    groups = {}
    for c in cells:
        groups.setdefault((c["set"], c["objective"]), []).append(c)
    for (s, o), cs in groups.items():
        row = [s, o + f" ({cs[0]['reference']})", str(len(cs))]
        ok = [c for c in cs if "error" not in c]
        for col in columns:
            v = [c["runs"][col]["share"] for c in ok if c["runs"].get(col) and "share" in c["runs"][col]]
            miss = len(ok) - len(v)
            row.append((f"{fmt_share(min(v))} ({fmt_share(sum(v) / len(v))})" if v else "n/a")
                       + (f", {miss} failed" if miss else ""))
        ratios = []
        for col in columns:
            v = [c["runs"][col]["time_ratio"] for c in ok if c["runs"].get(col) and "time_ratio" in c["runs"][col]]
            ratios.append(f"{max(v):.2f}" if v else "n/a")
        row.append(", ".join(ratios))
        refs = [c["runs"][c["reference"]]["seconds"] for c in ok]
        row.append(f"{max(refs):.3f}" if refs else "n/a")
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    bad = [c for c in cells if "error" not in c and c["runs"].get("auto") and
           (c["runs"]["auto"].get("share", 0) < BAR)]
    if "auto" in columns:
        lines.append(f"Cells where auto is below 99.5%: {len(bad)} of {len(cells)}.")
        for c in bad[:a.list_cells]:
            r = c["runs"]["auto"]
            lines.append(f"- {c['set']} {c['objective']} ratio {c['ratio']} lambda {c['lambda']} "
                         f"quality {c['quality']}: auto ({r['ran']}) {fmt_share(r['share'])}%, "
                         f"time ratio {r['time_ratio']:.2f}")
        if len(bad) > a.list_cells:
            lines.append(f"- ... and {len(bad) - a.list_cells} more")
        slow = [c for c in cells if "error" not in c and c["runs"].get("auto") and "time_ratio" in c["runs"]["auto"]
                and c["runs"]["auto"]["time_ratio"] > 1.0 and c["runs"][c["reference"]]["seconds"] > 0.01]
        lines.append(f"Cells where auto takes longer than the reference greedy (which takes over 0.01 s): "
                     f"{len(slow)}.")
        lines.append("")
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    lines.append(f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, load {load} at the end; "
                 f"{a.threads} thread(s) per run; grid time {elapsed:.0f} s.")
    return "\n".join(lines)


def certified_table(cells, columns):
    """With --certify: per (set, objective) and optimizer, the certified share of its selection
    (the program's certificate: (f - random mean) / (bound - random mean), a proven share of the
    best possible gain over random), worst cell and, in brackets, the mean, in %."""
    have = [c for c in cells if "error" not in c and any(r and r.get("certified") is not None
                                                        for r in c["runs"].values())]
    if not have:
        return ""
    lines = ["Certified share of the best possible gain over random, in %: the worst cell of each "
             "(set, objective) and, in brackets, the mean (--certify; DiSF has no bound).", "",
             "| set | objective | cells | " + " | ".join(columns) + " |",
             "|" + "---|" * (len(columns) + 3)]
    groups = {}
    for c in have:
        groups.setdefault((c["set"], c["objective"]), []).append(c)
    for (st, o), cs in groups.items():
        row = [st, o, str(len(cs))]
        for col in columns:
            v = [c["runs"][col]["certified"] for c in cs
                 if c["runs"].get(col) and c["runs"][col].get("certified") is not None]
            row.append(f"{fmt_share(min(v))} ({fmt_share(sum(v) / len(v))})" if v else "n/a")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def certify_cost_table(cells, columns):
    """With --certify: per (set, objective) and optimizer, the certificate's seconds over the
    optimising seconds of the same run (the report's seconds.certify / seconds.optimize: the bound,
    its check and the random mean), min / median / max over the cells, in %; the last rows give
    each objective's range over every set, and how many of its cells cost more than optimising."""
    rows, overall = {}, {}
    for c in cells:
        if "error" in c:
            continue
        for col in columns:
            r = c["runs"].get(col)
            if r and r.get("certify_ratio") is not None:
                rows.setdefault((c["set"], c["objective"]), {}).setdefault(col, []).append(r["certify_ratio"])
                overall.setdefault(c["objective"], {}).setdefault(col, []).append(r["certify_ratio"])
    if not rows:
        return ""

    def span(v, over=False):
        v = sorted(v)
        text = f"{100 * v[0]:.0f} / {100 * v[len(v) // 2]:.0f} / {100 * v[-1]:.0f}"
        return text + (f" ({sum(x > 1 for x in v)} of {len(v)} over 100)" if over else "")

    lines = ["The certificate's cost: seconds.certify over seconds.optimize of the same run, min / median / max "
             "over the cells, in % (--certify).", "",
             "| set | objective | " + " | ".join(columns) + " |", "|" + "---|" * (len(columns) + 2)]
    for (st, o), by in list(rows.items()) + [(("every set", o), by) for o, by in overall.items()]:
        over = st == "every set"
        lines.append(f"| {st} | {o} | " + " | ".join(span(by[col], over) if col in by else "n/a" for col in columns) +
                     " |")
    return "\n".join(lines) + "\n"


def cost_rule(cells, infos, iterations=100, ascents=2):
    """auto's cost rule against the times measured: per (set, objective, S) where naive greedy is
    the reference, S, the rule's largest S for greedy (S g <= ascents x iterations h, g and h the
    per-item multiply-adds of the objectives' costs_per_item, quality 1 each, ascents
    datamask::learner_ascents), what auto ran, and the continuous learner's time over naive
    greedy's (min, median, max over the cells)."""
    costs = {"pairwise": lambda d: (d + 1, 2 * d + 1), "disf": lambda d: (2 * d * d + 1, 2 * d * d + 1)}
    rows = {}
    for c in cells:
        runs = c.get("runs", {})
        if "error" in c or c["reference"] != "greedy" or c["objective"] not in costs:
            continue
        cont, auto = runs.get("continuous"), runs.get("auto")
        if not cont or "time_ratio" not in cont or not auto or "ran" not in auto:
            continue
        info = infos[c["set"]]
        s = int(info["n"] * c["ratio"] + 0.5)  # the library's round(ratio n)
        g, h = costs[c["objective"]](info["d"])
        r = rows.setdefault((c["set"], c["objective"], s), {"edge": ascents * iterations * h // g, "ran": set(), "t": []})
        r["ran"].add(auto["ran"])
        r["t"].append(cont["time_ratio"])
    if not rows:
        return ""
    lines = [f"auto's cost rule (naive greedy where S g <= {ascents} x iterations h) against the times measured: "
             "the continuous learner's time over naive greedy's, min / median / max over the cells.", "",
             "| set | objective | S | greedy while S <= | auto ran | cells | continuous / greedy time |",
             "|---|---|---|---|---|---|---|"]
    for (st, o, s), r in rows.items():
        t = sorted(r["t"])
        lines.append(f"| {st} | {o} | {s} | {r['edge']} | {', '.join(sorted(r['ran']))} | {len(t)} | "
                     f"{t[0]:.2f} / {t[len(t) // 2]:.2f} / {t[-1]:.2f} |")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["run", "data", "check", "table"])
    p.add_argument("--sets", default="small")
    p.add_argument("--objectives", default=",".join(OBJECTIVES))
    p.add_argument("--optimizers", default=",".join(OPTIMIZERS))
    p.add_argument("--try", dest="try_", action="append", default=[], metavar="NAME=ARGS")
    p.add_argument("--ratios", default="0.05,0.1,0.2,0.3")
    p.add_argument("--lambdas", default="0,0.2,0.5,0.9")
    p.add_argument("--qualities", default=",".join(QUALITIES))
    p.add_argument("--skip-facility-dense", default="text", help="sets without dense facility location")
    p.add_argument("--reference", choices=OPTIMIZERS, help="another reference than the issue's greedy (where "
                   "naive greedy is out of reach; the table names it)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dtype", choices=EMBEDDING_DTYPES, default="float32",
                   help="the embeddings file's precision (16-bit: x.npy rounded to nearest even)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--random-subsets", type=int, default=64)
    p.add_argument("--program")
    p.add_argument("--json")
    p.add_argument("--list-cells", type=int, default=40)
    p.add_argument("--certify", action="store_true", help="run each optimizer with --certify and print the "
                   "certified shares (the optimizing times exclude the certificates)")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--in-venv", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    run_in_venv(__file__, a)
    if a.command == "data":
        sets = {"small": SMALL, "text": ["text"], "all": ALL}.get(a.sets) or parse_list(a.sets, ALL)
        print(json.dumps(ensure_sets(sets), indent=1))
        return
    if a.command == "table":  # the tables again, from the --json of one run or several (comma-separated)
        cells = []
        for path in a.json.split(","):
            with open(path) as f:
                cells += json.load(f)["cells"]
        objectives = parse_list(a.objectives, OBJECTIVES)  # --objectives and --sets pick cells
        sets = None if a.sets in ("small", "all") else parse_list(a.sets, ALL)
        cells = [c for c in cells if c["objective"] in objectives and (sets is None or c["set"] in sets)]
        infos = ensure_sets(sorted({c["set"] for c in cells}, key=ALL.index))
        columns = list(dict.fromkeys(o for c in cells for o in c.get("runs", {})))
        print(table(cells, columns, infos, a, float("nan")))
        print(certified_table(cells, columns))
        print(certify_cost_table(cells, columns))
        print(cost_rule(cells, infos))
        return
    if a.command == "check":
        a.optimizers = "auto"
        a.repeats = 1
    cells, columns, infos, elapsed = run_grid(a)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"argv": sys.argv[1:-1], "cells": cells}, f, indent=1)
    print(table(cells, columns, infos, a, elapsed))
    print(certified_table(cells, columns))
    print(certify_cost_table(cells, columns))
    print(cost_rule(cells, infos))
    if a.command == "check":
        bad = [c for c in cells if "error" in c or not c["runs"].get("auto") or
               not c["runs"]["auto"].get("share", 0) >= BAR]
        print(f"check: {len(cells) - len(bad)} of {len(cells)} cells reach {100 * BAR}% of the reference greedy's gain")
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
