# SPDX-License-Identifier: Apache-2.0
"""A diversity metric of the caller's (datamask.Metric): written in numpy with the maths of the
built-in pairwise similarity, it selects the built-in's ids with every optimizer; it is called
once per batch of subsets; its errors, wrong shapes and non-finite values end the run naming it;
without a relaxation the continuous learner refuses it and auto does not run it."""

import numpy as np
import pytest

import datamask
from numpy_metrics import pws, pws_relax


X, Q = (a[:600] for a in datamask.demo_corpus(0))
RUNS = {
    "continuous": dict(optimizer="continuous", iterations=40),
    "pg": dict(optimizer="pg", steps=20, credit="rollout"),  # a metric has no per-item credit
    "greedy": dict(optimizer="greedy"),
    "lazy": dict(optimizer="lazy"),
    "stochastic": dict(optimizer="stochastic"),
}


@pytest.mark.parametrize("run", sorted(RUNS))
def test_a_numpy_metric_selects_what_the_builtin_with_its_maths_selects(run):
    kw = dict(RUNS[run], ratio=0.05, lam=0.5)
    calls = []

    def counted(x, subsets):
        calls.append(len(subsets))
        return pws(x, subsets)

    builtin = datamask.select(X, Q, objective="pairwise", **kw)
    mine = datamask.select(X, Q, objective=datamask.Metric(counted, relax=pws_relax, name="mine"), **kw)
    np.testing.assert_array_equal(mine.ids, builtin.ids)
    assert mine.objective.total == pytest.approx(builtin.objective.total, rel=1e-9)
    assert [t.name for t in mine.objective.terms] == ["quality", "mine"]
    assert mine.objective["mine"].raw == pytest.approx(builtin.objective["pairwise"].raw, rel=1e-9)
    assert mine.blocks[0]["objective"]["terms"].keys() == {"quality", "mine"}
    # Called once per batch of subsets, never once per subset: a pg step's rollouts; a greedy
    # round's candidates S + i, then S + the pick.
    if run == "pg":
        assert len(calls) <= 20 + 3 and max(calls) >= 64
    if run == "greedy":
        assert len(calls) <= 2 * len(mine.ids) + 3 and max(calls) == len(X)


def test_a_metric_beside_a_builtin_term_and_in_evaluate():
    sel = datamask.select(X, Q, objective=["disf", pws], ratio=0.05, optimizer="stochastic")
    assert [t.name for t in sel.objective.terms] == ["quality", "disf", "pws"]
    both = datamask.evaluate(X, Q, sel.ids, objective=["pairwise", datamask.Metric(pws, name="again")],
                             optimizer="stochastic")
    assert both["again"].raw == pytest.approx(both["pairwise"].raw, rel=1e-12)


@pytest.mark.parametrize("run", ["continuous", "stochastic"])
def test_several_metrics_are_terms_of_their_own(run):
    kw = dict(RUNS[run], ratio=0.05, lam=0.4, objective_weights=[1.0, 0.5])
    builtin = datamask.select(X, Q, objective=["pairwise", datamask.Metric(pws, relax=pws_relax, name="b")], **kw)
    mine = datamask.select(X, Q, objective=[datamask.Metric(pws, relax=pws_relax, name="a"),
                                            datamask.Metric(pws, relax=pws_relax, name="b")], **kw)
    np.testing.assert_array_equal(mine.ids, builtin.ids)
    assert [t.name for t in mine.objective.terms] == ["quality", "a", "b"]
    assert mine.objective["a"].raw == pytest.approx(builtin.objective["pairwise"].raw, rel=1e-9)
    assert mine.objective.total == pytest.approx(builtin.objective.total, rel=1e-9)


def test_each_metric_calls_its_own_functions():
    def twice(x, subsets):
        return 2.0 * pws(x, subsets)

    def twice_relax(x, p, size):
        value, grad = pws_relax(x, p, size)
        return 2.0 * value, 2.0 * grad

    ids = datamask.select(X, Q, ratio=0.05, optimizer="stochastic").ids
    both = datamask.evaluate(X, Q, ids, objective=[datamask.Metric(pws, name="once"), datamask.Metric(twice, name="twice")],
                             optimizer="stochastic")
    assert both["twice"].raw == pytest.approx(2.0 * both["once"].raw, rel=1e-12)
    # And each its own relaxation: the continuous learner's f is the weighted sum of the two.
    mine = datamask.select(X, Q, ratio=0.05, lam=0.4, optimizer="continuous", iterations=40,
                           objective=[datamask.Metric(pws, relax=pws_relax, name="once"),
                                      datamask.Metric(twice, relax=twice_relax, name="twice")])
    assert mine.objective["twice"].raw == pytest.approx(2.0 * mine.objective["once"].raw, rel=1e-9)


def test_several_blocks_call_the_metric_on_each_block():
    sel = datamask.select(X, Q, objective=datamask.Metric(pws, name="m"), ratio=0.1, block_size=250,
                          optimizer="stochastic")
    assert len(sel.blocks) > 1 and len(sel.ids) == 60
    builtin = datamask.select(X, Q, ratio=0.1, block_size=250, optimizer="stochastic")
    np.testing.assert_array_equal(sel.ids, builtin.ids)


def test_without_a_relaxation_continuous_is_refused_and_auto_runs_stochastic_greedy():
    with pytest.raises(datamask.InvalidInput, match=r'optimizer="continuous": pws has no relaxation'):
        datamask.select(X, Q, objective=pws, optimizer="continuous")
    assert datamask.select(X, Q, objective=pws, ratio=0.05).optimizer == "stochastic"
    assert datamask.select(X, Q, objective=datamask.Metric(pws, relax=pws_relax),
                           ratio=0.05).optimizer == "continuous"


class Boom(Exception):
    pass


def boom(x, subsets):
    raise Boom("the metric failed")


BAD = {
    "raises": (boom, Boom, "the metric failed"),
    "shape": (lambda x, s: np.zeros(3), datamask.InvalidInput, r"objective: <lambda> returned shape \(3,\) for"),
    "nan": (lambda x, s: np.full(len(s), np.nan), datamask.InvalidInput, "objective: <lambda> returned nan for subset 0"),
}


@pytest.mark.parametrize("optimizer", ["pg", "greedy", "stochastic", "continuous"])
@pytest.mark.parametrize("case", sorted(BAD))
def test_a_failing_metric_ends_the_run_with_its_error(case, optimizer):
    score, error, message = BAD[case]
    metric = datamask.Metric(score, relax=pws_relax)
    with pytest.raises(error, match=message):
        datamask.select(X, Q, objective=["pairwise", metric], ratio=0.05, optimizer=optimizer,
                        **({"steps": 5} if optimizer == "pg" else {}))


def test_a_failing_relaxation_ends_the_run_naming_it():
    def bad_relax(x, p, size):
        return 0.0, np.zeros(3)

    with pytest.raises(datamask.InvalidInput, match=r"objective: pws's relax returned a gradient of shape \(3,\)"):
        datamask.select(X, Q, objective=datamask.Metric(pws, relax=bad_relax), optimizer="continuous")


def test_bad_metric_arguments_are_refused():
    with pytest.raises(datamask.InvalidInput, match="may not be named 'disf'"):
        datamask.select(X, Q, objective=datamask.Metric(pws, name="disf"))
    with pytest.raises(datamask.InvalidInput, match="expected a name"):
        datamask.select(X, Q, objective=["pairwise", 3])
    with pytest.raises(datamask.InvalidInput, match="objective_weights: 1 weights for 2 objectives"):
        datamask.select(X, Q, objective=["pairwise", pws], objective_weights=[1.0])
