# SPDX-License-Identifier: Apache-2.0
"""The cost of a diversity metric written in numpy (datamask.Metric) against the built-in one with
the same maths (pairwise similarity), on the --demo corpus (20,000 x 32, S = 2,000, lambda 0.5).

    python python/benchmarks/metric_overhead.py [repetitions]

For each optimizer (pg: 100 steps of 64 rollouts, the paper's credit, one metric call per step;
continuous: 100 iterations, the metric's relaxation once per iteration, then the polish, whose
swaps a metric scores by evaluation; stochastic greedy: two calls per pick), runs the built-in
and the metric alternately, checks that they select the same ids, and prints the medians of the
library's optimising time and their ratio.
"""

import os
import statistics
import sys

import numpy as np

import datamask

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from numpy_metrics import pws, pws_relax  # noqa: E402  (the tests' metric)


RUNS = {
    "pg": dict(optimizer="pg", steps=100, rollouts=64, credit="rollout"),
    "continuous": dict(optimizer="continuous"),
    "continuous, no polish": dict(optimizer="continuous", polish=False),
    "stochastic": dict(optimizer="stochastic"),
}


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    x, q = datamask.demo_corpus(0)
    print(f"backend {datamask.backend}; corpus {x.shape[0]} x {x.shape[1]}, ratio 0.1, lambda 0.5; medians of {reps}")
    print(f"{'optimizer':<22} {'built-in s':>11} {'metric s':>9} {'ratio':>7}  same ids")
    for name, kw in RUNS.items():
        times = {"builtin": [], "metric": []}
        same = True
        for _ in range(reps):
            a = datamask.select(x, q, ratio=0.1, lam=0.5, objective="pairwise", **kw)
            m = datamask.Metric(pws, relax=pws_relax, name="pws")
            b = datamask.select(x, q, ratio=0.1, lam=0.5, objective=m, **kw)
            times["builtin"].append(a.seconds["optimize"])
            times["metric"].append(b.seconds["optimize"])
            same = same and np.array_equal(a.ids, b.ids)
        t0, t1 = statistics.median(times["builtin"]), statistics.median(times["metric"])
        print(f"{name:<22} {t0:>11.3f} {t1:>9.3f} {t1 / t0:>7.1f}  {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
