# SPDX-License-Identifier: Apache-2.0
"""The program and the module over the whole option table: every option, set to a value other
than its default, under auto, continuous and pg, is accepted by both (with the same ids and block
records) or refused by both (each message naming the option as its front end spells it). Both
resolve a request in one place (frontend/request.hpp)."""

import json
import os
import subprocess

import numpy as np
import pytest

import datamask

PROGRAM = os.environ.get("DATAMASK_SELECT")
pytestmark = pytest.mark.skipif(
    not (PROGRAM and os.access(PROGRAM, os.X_OK)),
    reason="datamask-select not built: set DATAMASK_SELECT to its path (scripts/python-test does)",
)

SKIPPED = {"threads"}  # the program says a cap on stderr, Python warns: not a selection


def changed(option):
    """(program arguments, keyword value): a value other than the option's default."""
    d = option.default
    flag = "--" + option.option.lstrip("-")
    if isinstance(d, bool):
        return ([flag] if not d else ["--no-" + flag[2:]]), (not d)
    if option.choices:
        v = next(c for c in option.choices if c != d)
        return [flag, v], v
    if isinstance(d, list):  # scales: one per term of f (quality, pairwise)
        return [flag, "1,2"], [1.0, 2.0]
    if isinstance(d, int):
        v = 40 if flag == "--count" else d + 1  # a count of 1 would make the pairwise term constant
        return [flag, str(v)], v
    v = d * 0.5 if d > 0 else 0.1
    return [flag, repr(v)], v


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("front_ends")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((400, 8)).astype(np.float32)
    q = rng.random(400)
    np.save(tmp / "x.npy", x)
    np.save(tmp / "q.npy", q)
    return tmp, x, q


# auto: naive greedy on this block, by cost
@pytest.mark.parametrize("optimizer", ["auto", "continuous", "pg"])
@pytest.mark.parametrize("keyword", sorted(k for k in datamask.options() if k not in SKIPPED))
def test_every_option_is_accepted_or_refused_alike(inputs, keyword, optimizer):
    tmp, x, q = inputs
    args, value = changed(datamask.options()[keyword])
    out = tmp / f"{keyword}-{optimizer}.npy"
    report = tmp / f"{keyword}-{optimizer}.json"
    run = subprocess.run([PROGRAM, "--embeddings", str(tmp / "x.npy"), "--quality", str(tmp / "q.npy"),
                          "--out", str(out), "--report", str(report), "--quiet", "--optimizer", optimizer, *args],
                         stderr=subprocess.PIPE, text=True)
    try:
        sel = datamask.select(x, q, optimizer=optimizer, **{keyword: value})
    except datamask.InvalidInput as e:
        assert run.returncode == 2, f"Python refused {keyword}={value!r} ({e}); the program accepted {args}"
        assert keyword in str(e), str(e)
        assert datamask.options()[keyword].option in run.stderr, run.stderr  # "--polish" for --no-polish
        return
    assert run.returncode == 0, f"the program refused {args} ({run.stderr.strip()}); Python accepted {keyword}={value!r}"
    np.testing.assert_array_equal(sel.ids, np.load(out))
    # The same block records: counts, the optimizer that ran, f (its last bits where the backends differ).
    rep = json.loads(report.read_text())
    same = (lambda v: v) if rep["configuration"]["backend"] == datamask.backend else pytest.approx
    for mine, theirs in zip(sel.blocks, rep["blocks"], strict=True):
        for k in ("items", "kept", "selected", "optimizer", "steps_run", "zero_variance_steps", "nonfinite_steps"):
            assert mine[k] == theirs[k], (k, mine[k], theirs[k])
        assert mine["objective"]["total"] == same(theirs["objective"]["total"])
