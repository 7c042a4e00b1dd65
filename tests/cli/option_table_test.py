#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every option is used or refused, never ignored (Python standard library only).

    option_table_test.py PROGRAM table

For every objective (pairwise, dense facility location, facility location on a kNN graph, DiSF)
and every optimizer, each option of the program is given alone with a value other than its
default, and again with each of the options it needs (--gamma with --kernel rbf, --adam-beta1
with --step-rule adam, ...). The run must either be refused (exit 2, the message naming the
option) or differ from the same run without the option in what it writes: the ids, the objective
and its terms' raw values and scales, the steps, the per-step log, the certificate, the graph.

A few options cannot change those by design (threads, caches, memory and time budgets,
checkpoint cadence); for them the test holds the rule the program must follow instead
(`UNOBSERVABLE`), and checks that they are refused everywhere else.
"""
import csv
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_test as c  # noqa: E402  (its .npy writers, corpus and runner)

OPTIMIZERS = ["auto", "continuous", "pg", "greedy", "lazy", "stochastic"]
# name -> the arguments of the objective's run
OBJECTIVES = {
    "pairwise": ["--objective", "pairwise"],
    "facility": ["--objective", "facility"],
    "facility-knn": ["--objective", "facility", "--neighbors", "6"],
    "disf": ["--objective", "disf"],
}
# Small, fast learners: the options below change these runs when they are read.
FAST = {"pg": ["--steps", "12", "--rollouts", "8"], "continuous": ["--iterations", "12"]}

# option -> (values to try, [contexts: the options it needs, each tried as well as none]).
# A value is a list of arguments ([] for a flag's own name).
OPTIONS = {
    "--ratio": (["0.2"], []),
    "--count": (["15"], []),
    "--lambda": (["0.3"], []),
    "--rollouts": (["4"], []),
    "--steps": (["5"], []),
    "--active-fraction": (["0.5"], [["--min-active", "10"]]),
    "--min-active": (["20"], []),
    "--reference-size": (["30"], []),
    "--init": (["quality"], []),
    "--prune": (["0.3"], []),
    "--advantage": (["leave-one-out"], []),
    "--credit": (["rollout", "item"], []),
    "--scaling": (["raw"], []),
    "--scales": (["2,3"], []),
    "--calibration-subsets": (["5"], [["--scaling", "raw"]]),
    "--quality-aggregate": (["sum"], [["--lambda", "0"]]),
    "--readout": (["sample"], []),
    "--seed": (["7"], [["--scaling", "raw"]]),
    "--normalized": ([None], []),
    "--no-keep-best-rollout": ([None], []),
    "--epsilon": (["0.5"], []),
    "--lr-max": (["2"], []),
    "--lr-min": (["0.5"], [["--schedule", "constant"]]),
    "--schedule": (["cosine", "constant"], []),
    "--logprob": (["plackett-luce"], []),
    "--kernel": (["rbf", "dot"], []),
    "--gamma": (["3"], [["--kernel", "rbf"]]),
    "--facility-cache": (["0"], []),
    "--knn-build": (["clustered"], []),
    "--knn-clusters": (["3"], [["--knn-build", "clustered"]]),
    "--knn-probes": (["1"], [["--knn-build", "clustered"]]),
    "--certify-steps": (["2"], [["--certify"]]),
    "--certify-memory": (["0"], [["--certify"]]),
    "--iterations": (["5"], []),
    "--parameterization": (["logits"], []),
    "--step-rule": (["plain", "normalized", "adam"], []),
    "--step-size": (["0.05"], []),
    "--step-decay": (["cosine", "constant", "linear"], []),
    "--step-final-fraction": (["0.5"], [["--step-decay", "constant"]]),
    "--adam-beta1": (["0.2"], [["--step-rule", "adam"]]),
    "--adam-beta2": (["0.5"], [["--step-rule", "adam"]]),
    "--adam-epsilon": (["0.5"], [["--step-rule", "adam"]]),
    "--track-every": (["3", "0"], []),
    "--no-polish": ([None], []),
    "--polish-rounds": (["1"], [["--no-polish"]]),
    "--polish-candidates": (["1"], [["--no-polish"]]),
    "--polish-pair-candidates": (["1", "0"], [["--no-polish"]]),
    "--polish-refresh-every": (["1"], [["--no-polish"]]),
    "--polish-seconds": (["100"], [["--no-polish"]]),
    "--no-polish-stochastic-start": ([None], [["--no-polish"]]),
    "--block-size": (["60"], []),
    "--checkpoint-every": (["3"], [["--checkpoint", "CK"]]),
    "--threads": (["1"], []),
    "--quality-weights": (["2"], [["--lambda", "0"]]),
    "--objective-weights": (["2"], [["--lambda", "1"]]),
}
LEARNERS = {"continuous", "pg"}
# Read everywhere, but changing nothing without their context: the active batch is at least
# --min-active items (default larger than these blocks).
NEEDS_CONTEXT = {"--active-fraction"}


def dense(objective):
    return objective == "facility"


# Options that change nothing a run writes, by design: the rule under which each is read.
# (optimizer that runs, objective, extra arguments) -> read or not.
UNOBSERVABLE = {
    "--threads": lambda o, obj, extra: True,
    # The greedy baselines' cache of dense facility location's similarities.
    "--facility-cache": lambda o, obj, extra: dense(obj) and o in ("greedy", "lazy", "stochastic"),
    "--certify-memory": lambda o, obj, extra: dense(obj) and "--certify" in extra,
    "--polish-seconds": lambda o, obj, extra: o == "continuous" and "--no-polish" not in extra,
    "--checkpoint-every": lambda o, obj, extra: o in LEARNERS and "--checkpoint" in extra,
}


# Options read by the optimizer that runs, whose effect needs an instance where it changes the
# outcome: the polish's knobs and the tracked read-out change nothing where the polish of every
# start ends at the same set (these small blocks), the best rollout nothing where the read-out is
# better, and the stochastic start (its epsilon, its seed) nothing where it loses. For them the
# test checks the refusals only (with --no-polish, --optimizer pg, ...).
def polished(o, extra):
    return o == "continuous" and "--no-polish" not in extra


DATA_DEPENDENT = {
    "--track-every": lambda o, obj, extra: o == "continuous",
    "--polish-rounds": lambda o, obj, extra: polished(o, extra),
    "--polish-candidates": lambda o, obj, extra: polished(o, extra),
    "--polish-pair-candidates": lambda o, obj, extra: polished(o, extra),
    "--polish-refresh-every": lambda o, obj, extra: polished(o, extra),
    "--no-polish-stochastic-start": lambda o, obj, extra: polished(o, extra),
    "--epsilon": lambda o, obj, extra: polished(o, extra) or o == "stochastic",
    "--seed": lambda o, obj, extra: polished(o, extra) or o == "stochastic",
    "--no-keep-best-rollout": lambda o, obj, extra: o == "pg",
}


def what_it_wrote(d):
    """What a run writes that a setting can change: ids, objective, terms (raw and scale), steps,
    the log's rows, the certificate, the graph's record."""
    rep = json.load(open(os.path.join(d, "r.json")))
    ids = c.read_npy_ids(os.path.join(d, "o.npy"))
    blocks = []
    for b in rep["blocks"]:
        keep = {k: b.get(k) for k in ("selected", "steps_run", "objective", "certificate", "graph", "optimizer")}
        if isinstance(keep.get("certificate"), dict):
            keep["certificate"] = {k: v for k, v in keep["certificate"].items() if k != "seconds"}
        if isinstance(keep.get("graph"), dict):
            keep["graph"] = {k: v for k, v in keep["graph"].items() if k != "seconds"}
        blocks.append(keep)
    log = []
    lp = os.path.join(d, "l.csv")
    if os.path.exists(lp):
        with open(lp) as f:
            log = [row for row in csv.reader(f)]
    return json.dumps([ids, blocks, log], sort_keys=True)


class runner:
    def __init__(self, files):
        self.files = files
        self.cache = {}
        self.count = 0

    def run(self, args):
        """(exit code, stderr, what it wrote) of one run in a fresh folder."""
        key = tuple(args)
        if key in self.cache:
            return self.cache[key]
        self.count += 1
        d = c.path("run%d" % self.count)
        os.mkdir(d)
        full = [a.replace("CK", os.path.join(d, "ck")) for a in args]
        p = c.run(self.files + full + ["--out", os.path.join(d, "o.npy"), "--report", os.path.join(d, "r.json"),
                                       "--quiet"], expect=None)
        if p.returncode == 0:
            # The per-step log where the run has steps (refused with a greedy baseline).
            again = [a.replace("CK", os.path.join(d, "ck2")) for a in args]
            lp = c.run(self.files + again + ["--out", os.path.join(d, "o2.npy"), "--log", os.path.join(d, "l.csv"),
                                            "--quiet"], expect=None)
            if lp.returncode != 0 and "--log" not in lp.stderr:
                raise AssertionError("the log run of %s failed: %s" % (args, lp.stderr))
            out = what_it_wrote(d)
        else:
            out = None
        self.cache[key] = (p.returncode, p.stderr, out)
        return self.cache[key]


def test_table():
    rows, q, ids = c.make_corpus(n=120, d=8, seed=3, clusters=6)
    e = c.npy_f32(c.path("emb.npy"), rows)
    qf = c.npy_vec(c.path("q.npy"), q)
    r = runner(["--embeddings", e, "--quality", qf])
    ignored = []
    checked = 0
    for obj, obj_args in OBJECTIVES.items():
        for o in OPTIMIZERS:
            base_args = obj_args + ["--optimizer", o] + FAST.get(o, [])
            for opt, (values, contexts) in OPTIONS.items():
                for ctx in ([] if opt in NEEDS_CONTEXT else [[]]) + contexts:
                    base = r.run(base_args + ctx)
                    if base[0] != 0:
                        continue  # the context itself is refused with this objective and optimizer
                    ran = json.loads(base[2])[1]
                    optimizer = next((b["optimizer"] for b in ran if b.get("optimizer")), o)
                    verdicts = []
                    for v in values:
                        got = r.run(base_args + ctx + [opt] + ([] if v is None else [v]))
                        if got[0] == 2:
                            name = opt[5:] if opt.startswith("--no-") else opt[2:]
                            if name not in got[1]:
                                raise AssertionError("%s refused without naming it: %s" % (opt, got[1]))
                            verdicts.append("refused")
                        elif got[0] != 0:
                            raise AssertionError("%s %s: exit %d: %s" % (opt, v, got[0], got[1]))
                        elif got[2] != base[2]:
                            verdicts.append("used")
                        elif opt in UNOBSERVABLE and UNOBSERVABLE[opt](optimizer, obj, ctx):
                            verdicts.append("used")
                        elif opt in DATA_DEPENDENT and DATA_DEPENDENT[opt](optimizer, obj, ctx):
                            verdicts.append("used")
                        else:
                            verdicts.append("ignored")
                    checked += 1
                    if "used" not in verdicts and "refused" not in verdicts:
                        ignored.append("%s %s with --objective %s, --optimizer %s (ran %s)%s" %
                                       (opt, "/".join(str(v) for v in values), obj, o, optimizer,
                                        (" and " + " ".join(ctx)) if ctx else ""))
    print("checked %d option cases in %d runs" % (checked, r.count))
    if ignored:
        raise AssertionError("%d options ignored (exit 0, nothing they set changed):\n  %s" %
                             (len(ignored), "\n  ".join(ignored)))


if __name__ == "__main__":
    c.run_scenario(globals(), prefix="dmopt-")
