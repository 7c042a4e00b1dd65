#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Golden runs of datamask-select: the selected ids of a handful of runs, pinned bit for bit.

    golden_test.py PROGRAM            compare every run with tests/golden/golden.json
    golden_test.py PROGRAM --record   (re)write golden.json from PROGRAM's output

The runs cover each objective, both gradient modes, a pruned run, a multi-block run, the
small-block path (every rollout a complete selection), and the greedy baselines whose order is
defined exactly (naive, stochastic, and lazy on facility location, where it equals naive). The
inputs are written here from Python's own generator, so they do not depend on any C++ corpus
generator. A redesign must leave these ids unchanged; a deliberate change of behaviour re-records
them in the same commit and says why.
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import cli_test  # noqa: E402  (its .npy writers and corpus)

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden.json")

BASE = ["--rollouts", "16", "--steps", "60", "--min-active", "300", "--quiet", "--optimizer", "pg"]
RUNS = {
    "pairwise_relaxed": BASE + ["--objective", "pairwise", "--count", "120", "--credit", "rollout"],
    "pairwise_plackett_luce": BASE + ["--objective", "pairwise", "--count", "120", "--logprob", "plackett-luce"],
    "facility_cosine2": BASE + ["--objective", "facility", "--kernel", "cosine2", "--count", "120", "--credit", "rollout"],
    "disf_quality_init": BASE + ["--objective", "disf", "--count", "120", "--init", "quality"],
    "mix_pruned": BASE + ["--objective", "pairwise", "--objective", "disf", "--objective-weights", "1,0.5",
                          "--prune", "0.3", "--count", "150", "--schedule", "cosine"],
    "multi_block": BASE + ["--objective", "pairwise", "--block-size", "700", "--ratio", "0.05", "--seed", "7",
                           "--credit", "rollout"],
    "small_block": ["--rollouts", "32", "--steps", "80", "--quiet", "--optimizer", "pg", "--objective",
                    "pairwise", "--count", "40", "--block-size", "400", "--credit", "rollout"],
    # --credit auto (the default): per-item credit on pairwise similarity and facility location
    "pairwise_auto_credit": BASE + ["--objective", "pairwise", "--count", "120"],
    "facility_auto_credit": BASE + ["--objective", "facility", "--kernel", "cosine2", "--count", "120"],
    "greedy_naive_pairwise": ["--quiet", "--optimizer", "greedy", "--objective", "pairwise", "--count", "60"],
    "greedy_stochastic_disf": ["--quiet", "--optimizer", "stochastic", "--objective", "disf", "--count", "60"],
    # --optimizer auto on dense facility location alone: lazy greedy
    "facility_auto_optimizer": ["--quiet", "--objective", "facility", "--count", "60"],
    "greedy_lazy_facility": ["--quiet", "--optimizer", "lazy", "--objective", "facility", "--count", "60",
                             "--prune", "0.2"],
}


def main():
    prog = os.path.abspath(sys.argv[1])
    record = "--record" in sys.argv[2:]
    golden = {} if record else json.load(open(GOLDEN))
    out = {}
    with tempfile.TemporaryDirectory(prefix="dmgolden-") as d:
        rows, q, ids = cli_test.make_corpus(n=1400, d=12, seed=5)
        e = cli_test.npy_f32(os.path.join(d, "emb.npy"), rows)
        qf = cli_test.npy_vec(os.path.join(d, "q.npy"), q)
        idf = cli_test.npy_vec(os.path.join(d, "ids.npy"), ids, "<i8")
        failed = []
        for name, args in RUNS.items():
            sel = os.path.join(d, name + ".npy")
            cmd = [prog, "--embeddings", e, "--quality", qf, "--ids", idf, "--out", sel] + args
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if p.returncode != 0:
                raise SystemExit("golden %s: exit %d\n%s" % (name, p.returncode, p.stderr))
            got = cli_test.read_npy_ids(sel)
            out[name] = {"count": len(got), "sha256": hashlib.sha256(json.dumps(got).encode()).hexdigest(),
                         "first": got[:5]}
            if not record and out[name] != golden.get(name):
                failed.append("%s: expected %s, got %s" % (name, golden.get(name), out[name]))
    if record:
        with open(GOLDEN, "w") as f:
            json.dump(out, f, indent=1, sort_keys=True)
            f.write("\n")
        print("recorded %d golden runs" % len(out))
        return
    if failed:
        raise SystemExit("golden runs changed:\n" + "\n".join(failed))
    print("%d golden runs unchanged" % len(out))


if __name__ == "__main__":
    main()
