# SPDX-License-Identifier: Apache-2.0
"""Tests of the reference certificates (certify.py) against exhaustive search, HiGHS and a
constructed instance whose optimum is known.

    build/venv/bin/python -m pytest -q benchmarks/certificates
"""
from itertools import product

import numpy as np
import pytest

import certify as c

SIZES = (2, 4, 7)
LAMBDAS = (0.0, 0.3, 0.7, 1.0)
# given scales (as a run's calibration would fix them), away from 1 so that a mix-up shows
WEIGHTS = dict(scale_q=0.7, scale_d=1.3, weight_q=1.1, weight_d=0.9)


def tiny(seed, n=12, d=5):
    g = np.random.default_rng(seed)
    x = g.standard_normal((n, d)) + 0.8 * g.standard_normal((1, d))
    q = g.standard_normal(n)
    return x, q


def objectives(x, q, size, lam):
    w = c.Weights(lam, **WEIGHTS)
    xu = c.unit_rows(x)
    return {
        "pairwise": c.PairwiseQuality(x, q, size, w),
        "facility-dense": c.FacilityQuality(c.DenseCosine(xu), q, size, w),
        "facility-knn": c.FacilityQuality(c.knn_graph(xu, 4), q, size, w),
        "disf": c.DisfQuality(x, q, size, w),
    }


def indicator(n, u):
    p = np.zeros(n)
    p[np.asarray(u)] = 1.0
    return p


def bounds(obj):
    """Every bound the module computes for obj, by name."""
    if isinstance(obj, c.PairwiseQuality):
        u = c.greedy(obj)
        return {"frank-wolfe": c.pairwise_frank_wolfe(obj, indicator(obj.n, u), 40).bound,
                "frank-wolfe-uniform": c.pairwise_frank_wolfe(obj, np.full(obj.n, obj.size / obj.n), 40).bound}
    if isinstance(obj, c.FacilityQuality):
        u = c.greedy(obj)
        out = {m: c.facility_bound(obj, u, m, 40).bound for m in c.DUAL_METHODS}
        out["start"] = c.facility_bound(obj, u, "polyak", 1).bound
        out["lp"] = c.facility_lp(obj)[0]
        return out
    return {"quality+0": c.disf_bound(obj)}


@pytest.mark.parametrize("seed,size,lam", list(product((1, 2), SIZES, LAMBDAS)))
def test_bounds_hold_on_tiny_blocks(seed, size, lam):
    x, q = tiny(seed)
    for name, obj in objectives(x, q, size, lam).items():
        optimum = c.exhaustive_optimum(obj)
        tol = 1e-10 * max(1.0, abs(optimum))
        for method, bound in bounds(obj).items():
            assert bound >= optimum - tol, (name, method, bound, optimum)
            if lam == 1.0:  # quality only: every bound is the top S exactly
                assert bound == pytest.approx(optimum, abs=tol), (name, method)


def test_quality_only_optimum_is_the_top_s():
    x, q = tiny(3)
    obj = objectives(x, q, 4, 1.0)["pairwise"]
    assert c.exhaustive_optimum(obj) == pytest.approx(obj.w.cq * np.sort(q)[-4:].mean(), abs=1e-12)


def naive_greedy_by_evaluation(obj):
    """Naive greedy on f itself: f(U + i) for every candidate, ties to the smaller id."""
    picks = []
    for _ in range(obj.size):
        rest = [i for i in range(obj.n) if i not in picks]
        values = [obj.value(np.array(picks + [i])) for i in rest]
        picks.append(rest[int(np.argmax(values))])
    return np.array(picks)


@pytest.mark.parametrize("lam", (0.0, 0.5, 1.0))
def test_incremental_greedy_equals_greedy_by_evaluation(lam):
    x, q = tiny(4, n=30, d=6)
    for name, obj in objectives(x, q, 7, lam).items():
        fast, slow = c.greedy(obj), naive_greedy_by_evaluation(obj)
        assert obj.value(fast) == pytest.approx(obj.value(slow), rel=1e-12), name
        if lam > 0:  # at lambda 0 quality breaks no ties, and float sums may order ties apart
            assert list(fast) == list(slow), name


@pytest.mark.parametrize("lam", (0.2, 0.5, 0.8))
def test_certificates_recheck(lam):
    g = np.random.default_rng(5)
    x, q = g.standard_normal((80, 8)), g.standard_normal(80)
    objs = objectives(x, q, 9, lam)
    pws = objs["pairwise"]
    run = c.pairwise_frank_wolfe(pws, indicator(80, c.greedy(pws)), 25)
    assert c.check_pairwise(x, q, 9, pws.w, run.certificate) == pytest.approx(run.bound, rel=1e-12)
    assert run.lower <= run.bound + 1e-12 * abs(run.bound)
    for name in ("facility-dense", "facility-knn"):
        obj = objs[name]
        u = c.greedy(obj)
        for method in c.DUAL_METHODS:
            run = c.facility_bound(obj, u, method, 30)
            assert c.check_facility(obj, run.certificate) == pytest.approx(run.bound, rel=1e-12)
            assert run.bound >= obj.value(u) * (1 - 1e-12)  # equal where greedy is optimal
        with pytest.raises(ValueError):
            c.check_facility(obj, -np.ones(80))


def test_any_point_certifies_the_pairwise_bound():
    """g is concave on all of R^n: g(p) + linear gap bounds max f even for p outside P."""
    x, q = tiny(6)
    g = np.random.default_rng(7)
    for lam in (0.0, 0.5):
        obj = objectives(x, q, 4, lam)["pairwise"]
        optimum = c.exhaustive_optimum(obj)
        for _ in range(20):
            p = g.normal(0.3, 1.0, obj.n)
            assert c.check_pairwise(x, q, 4, obj.w, p) >= optimum - 1e-12


@pytest.mark.parametrize("kernel", ("facility-dense", "facility-knn"))
def test_lp_duals_give_the_lp_value_and_no_method_goes_below(kernel):
    g = np.random.default_rng(8)
    x, q = g.standard_normal((60, 6)), g.standard_normal(60)
    obj = objectives(x, q, 6, 0.5)[kernel]
    value, lam = c.facility_lp(obj)
    assert c.check_facility(obj, lam) == pytest.approx(value, rel=1e-9)
    u = c.greedy(obj)
    for method in c.DUAL_METHODS:
        assert c.facility_bound(obj, u, method, 60).bound >= value - 1e-9 * abs(value)
    if kernel == "facility-dense":
        lower, upper, _, _ = c.dense_lp_by_columns(obj, k0=4, add=4)
        assert lower == pytest.approx(value, rel=1e-9) and upper == pytest.approx(value, rel=1e-9)


def separated_clusters(clusters=20, per=10, seed=9):
    """Cluster k lies in span(e_k, e_{clusters + k}): across clusters every cosine is exactly 0,
    inside one close to 1. With S = clusters and coverage worth far more than quality, the
    optimum takes one item per cluster: the one with the best quality + coverage of its own."""
    g = np.random.default_rng(seed)
    n = clusters * per
    x = np.zeros((n, 2 * clusters))
    label = np.repeat(np.arange(clusters), per)
    x[np.arange(n), label] = 1.0
    x[np.arange(n), clusters + label] = 0.05 * g.standard_normal(n)
    q = 0.01 * g.random(n)
    return x, q, label


@pytest.mark.parametrize("kernel", ("dense", "knn"))
def test_dual_is_tight_where_the_optimum_is_known(kernel):
    clusters = 20
    x, q, label = separated_clusters(clusters)
    xu = c.unit_rows(x)
    kern = c.DenseCosine(xu) if kernel == "dense" else c.knn_graph(xu, 12)
    obj = c.FacilityQuality(kern, q, clusters, c.Weights(0.5, scale_q=0.01, scale_d=0.05))
    # the best item of each cluster on its own (coverage counts only inside the cluster)
    own = obj.w.cq * q / clusters + obj.w.cd / obj.n * np.array(
        [float((xu[label == label[i]] @ xu[i]).sum()) for i in range(obj.n)])
    best = np.array([np.flatnonzero(label == k)[np.argmax(own[label == k])] for k in range(clusters)])
    optimum = obj.value(best)
    run = c.facility_bound(obj, best, "polyak-level", 400)
    assert run.bound >= optimum
    assert run.bound - optimum <= 1e-9 * abs(optimum)
    assert c.check_facility(obj, run.certificate) - optimum <= 1e-9 * abs(optimum)
    assert c.facility_lp(obj)[0] == pytest.approx(optimum, rel=1e-9)
    # the small version is checked exhaustively: 3 clusters of 4
    xs, qs, ls = separated_clusters(3, 4, seed=10)
    small = c.FacilityQuality(c.DenseCosine(c.unit_rows(xs)), qs, 3, obj.w)
    run = c.facility_bound(small, c.greedy(small), "polyak-level", 400)
    assert run.bound - c.exhaustive_optimum(small) <= 1e-9


def test_disf_bound_is_quality_only():
    x, q = tiny(11)
    obj = objectives(x, q, 4, 0.5)["disf"]
    assert c.disf_bound(obj) == pytest.approx(obj.w.cq * np.sort(q)[-4:].mean(), rel=1e-12)
    assert all(c.disf_term(x, u) <= 0 for u in c.random_subsets(12, 4, 50))


def test_pairwise_polish_never_worsens_and_ends_at_a_swap_optimum():
    x, q = tiny(12, n=14, d=4)
    obj = objectives(x, q, 5, 0.5)["pairwise"]
    start = c.greedy(obj)
    polished = c.polish_pairwise(obj, start)
    assert polished.size == 5 and obj.value(polished) >= obj.value(start)
    for i in polished:
        for j in set(range(14)) - set(polished):
            swapped = np.array(sorted(set(polished) - {i} | {j}))
            assert obj.value(swapped) <= obj.value(polished) + 1e-12


def test_accelerated_projected_gradient_bound_holds_and_rechecks():
    x, q = tiny(13)
    obj = objectives(x, q, 4, 0.4)["pairwise"]
    run = c.pairwise_accelerated(obj, np.full(12, 4 / 12), 30)
    assert run.bound >= c.exhaustive_optimum(obj) - 1e-12
    assert c.check_pairwise(x, q, 4, obj.w, run.certificate) == pytest.approx(run.bound, rel=1e-12)
