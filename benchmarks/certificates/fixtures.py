# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the library's certificate tests (tests/test_certify.cpp, "[certify][reference]"):
small blocks and the bounds this folder's reference (certify.py) computes on them, as .npy files.

    build/venv/bin/python benchmarks/certificates/fixtures.py tests/data/certify

Per block B (embeddings B_x.npy, quality B_q.npy, an exact cosine kNN graph B_knn_ids.npy and
B_knn_sims.npy with K = 8, its similarities rounded to float as the library stores them) and
objective O (pairwise, dense = facility location with the cosine kernel on every pair, knn =
facility location on the graph), each with mean quality at lambda 0.5 and the scales calibrated
as the study calibrates them (the terms' standard deviations over 256 random S-subsets):
- B_O_selection.npy: the reference's greedy selection (S = n / 10), the bounds' start;
- B_O_certificate.npy: the certificate after the recommended method's budget (pairwise: p after
  30 Frank-Wolfe steps; facility location: lambda after 100 evaluations of polyak-level-deflected);
- B_O_meta.npy: [lambda, scale_q, scale_d, S, budget, bound, check(certificate), f(selection),
  random, LP], random = the mean f over the calibration's subsets, LP = the optimum of facility
  location's LP relaxation by HiGHS (the least bound any lambda gives; NaN for pairwise).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import certify as c  # noqa: E402

# name: (n, d, seed); rows N(0, 1) plus a shared offset, so that cosines are not all near 0
# (clustered rows would make greedy optimal and the dual's start already tight)
BLOCKS = {"a": (120, 6, 21), "b": (200, 10, 22)}
LAMBDA = 0.5
K = 8
PAIRWISE_STEPS = 30
DUAL_EVALUATIONS = 100


def block(n, d, seed):
    g = np.random.default_rng(seed)
    x = g.standard_normal((n, d)) + 0.8 * g.standard_normal((1, d))
    q = g.standard_normal(n)
    return x, q


def main(out):
    os.makedirs(out, exist_ok=True)

    def save(name, array):
        np.save(os.path.join(out, name + ".npy"), array)

    for name, (n, d, seed) in BLOCKS.items():
        x, q = block(n, d, seed)
        xu = c.unit_rows(x)
        graph = c.knn_graph(xu, K)
        sims = graph.sims.astype(np.float32).astype(np.float64)  # what the library's graph holds
        graph = c.KnnCosine(graph.ids, sims)
        save(f"{name}_x", x)
        save(f"{name}_q", q)
        save(f"{name}_knn_ids", graph.ids)
        save(f"{name}_knn_sims", sims)
        size = n // 10
        raw = c.Weights(LAMBDA)
        objectives = {
            "pairwise": c.PairwiseQuality(x, q, size, raw),
            "dense": c.FacilityQuality(c.DenseCosine(xu), q, size, raw),
            "knn": c.FacilityQuality(graph, q, size, raw),
        }
        subsets = c.random_subsets(n, size)
        for label, obj in objectives.items():
            w, random = c.calibrate(obj, LAMBDA, subsets)
            obj = obj.with_weights(w)
            lp = np.nan
            u = np.sort(c.greedy(obj))
            if label == "pairwise":
                p0 = np.zeros(n)
                p0[u] = 1.0
                run = c.pairwise_frank_wolfe(obj, p0, PAIRWISE_STEPS)
                budget = PAIRWISE_STEPS
                check = c.check_pairwise(x, q, size, w, run.certificate)
            else:
                run = c.facility_bound(obj, u, "polyak-level-deflected", DUAL_EVALUATIONS)
                budget = DUAL_EVALUATIONS
                check = c.check_facility(obj, run.certificate)
                lp = c.facility_lp(obj)[0]
            save(f"{name}_{label}_selection", u.astype(np.int64))
            save(f"{name}_{label}_certificate", run.certificate)
            meta = np.array([LAMBDA, w.scale_q, w.scale_d, size, budget, run.bound, check, obj.value(u), random, lp])
            save(f"{name}_{label}_meta", meta)
            print(f"{name} {label}: n {n} d {d} S {size} f(U) {obj.value(u):.12f} bound {run.bound:.12f} "
                  f"check {check:.12f} random {random:.6f} LP {lp:.12f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/certify")
