#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A program of a user's own objectives (dmfront::select_main) is datamask-select with more names.

    own_program_test.py DATAMASK_SELECT TEST_NAME OWN_PROGRAM PROGRAM_DEFINITIONS

OWN_PROGRAM (own_objective_program.cpp) registers "replica" (pairwise similarity written in
double: batched, with a relaxation) and "replica-plain" (the same, one subset per call, no
relaxation). Their selections must be the built-in pairwise objective's ids, with every optimizer,
in one process, in scheduler shards merged, resumed from a checkpoint and under mpirun; what each
can do follows from its concepts (auto, refusals). MPI scenarios exit 77 (skipped) when the
program has no MPI (PROGRAM_DEFINITIONS lacks DATAMASK_SELECT_MPI=1) or mpirun is missing.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_test as ct  # noqa: E402  (the corpus and its files)
import spread_test as st  # noqa: E402  (mpirun's environment)

BUILTIN = OWN = TMP = None
HAS_MPI = False

def path(name):
    return os.path.join(TMP, name)


def run(prog, args, expect=0, env=None, launcher=()):
    p = subprocess.run(list(launcher) + [prog] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=env)
    if expect is not None and p.returncode != expect:
        raise AssertionError("exit %d (expected %d) for %s\nstdout:\n%s\nstderr:\n%s" %
                             (p.returncode, expect, " ".join(args), p.stdout, p.stderr))
    return p


def corpus():
    """Two blocks of about 1,500 items (16 dimensions, 8 clusters), quality scores and ids."""
    rows, q, ids = ct.make_corpus(n=3000, d=16, seed=3)
    return ["--embeddings", ct.npy_f32(path("emb.npy"), rows), "--quality", ct.npy_vec(path("q.npy"), q),
            "--ids", ct.npy_vec(path("ids.npy"), ids, "<i8"), "--block-size", "1500", "--threads", "1", "--quiet"]


def selection(prog, args, tag, **kw):
    """The ids `prog` selects (and its report) with `args`."""
    run(prog, args + ["--out", path(tag + ".npy"), "--report", path(tag + ".json")], **kw)
    with open(path(tag + ".json")) as f:
        return ct.read_npy_ids(path(tag + ".npy")), json.load(f)


def optimizers(report):
    return [b["optimizer"] for b in report["blocks"]]


def total(report):
    return report["total"]["objective"]["total"]


OPTIMIZERS = {
    "continuous": ["--optimizer", "continuous"],
    "pg": ["--optimizer", "pg", "--credit", "rollout", "--steps", "40", "--rollouts", "16"],
    "greedy": ["--optimizer", "greedy"],
    "lazy": ["--optimizer", "lazy"],
    "stochastic": ["--optimizer", "stochastic"],
}


def test_same_ids():
    base = corpus()
    for name, extra in OPTIMIZERS.items():
        want, rep = selection(BUILTIN, base + ["--objective", "pairwise"] + extra, "b_" + name)
        mine = ["replica", "pairwise-registered"] + ([] if name == "continuous" else ["replica-plain"])
        for objective in mine:
            got, own = selection(OWN, base + ["--objective", objective] + extra, objective + "_" + name)
            differ = len(set(got) ^ set(want)) // 2
            assert differ == 0, "%s with %s: %d of %d ids differ" % (objective, name, differ, len(want))
            assert optimizers(own) == optimizers(rep), (optimizers(own), optimizers(rep))
            terms = own["blocks"][0]["objective"]["terms"]
            assert objective in terms and "pairwise" not in terms, terms
            f, f0 = total(own), total(rep)
            assert ct.close(f, f0, rel=1e-6), (f, f0)
    # In a mix with a built-in term, weighted (the continuous learner named: auto gives the
    # built-in mix's blocks to naive greedy by its cost, and a registered objective has no cost).
    mix = ["--objective", "disf", "--objective-weights", "0.5,2", "--lambda", "0.3", "--optimizer", "continuous"]
    want, _ = selection(BUILTIN, base + mix[:2] + ["--objective", "pairwise"] + mix[2:], "b_mix")
    got, _ = selection(OWN, base + mix[:2] + ["--objective", "replica"] + mix[2:], "own_mix")
    assert got == want, "disf + replica: the ids differ from disf + pairwise"


def test_shards():
    base = corpus() + ["--objective", "replica"]
    want, _ = selection(OWN, base, "one")
    parts = path("parts")
    for i in range(2):
        run(OWN, base + ["--shard", "%d/2" % i, "--parts", parts])
    names = sorted(os.path.join(parts, f) for f in os.listdir(parts) if f.endswith(".json"))
    assert len(names) == 2, names
    run(OWN, ["merge", "--out", path("merged.npy")] + names)
    assert ct.read_npy_ids(path("merged.npy")) == want, "shards merged differ from one process"
    # A finished run resumed from its checkpoint gives the same ids without running a block again.
    ckpt = ["--checkpoint", path("ckpt")]
    assert selection(OWN, base + ckpt, "ck")[0] == want
    assert selection(OWN, base + ckpt + ["--resume"], "resumed")[0] == want


def test_mpi():
    st.HAS_MPI = HAS_MPI
    st.need_mpi()  # or exit 77 saying why
    base = corpus() + ["--objective", "replica"]
    want, _ = selection(OWN, base, "one")
    got, rep = selection(OWN, base, "ranks", env=st.mpi_env(), launcher=("mpirun", "--oversubscribe", "-np", "2"))
    assert got == want, "mpirun -np 2 differs from one process"
    assert len(rep["blocks"]) == 2


def test_capabilities():
    base = corpus()
    # No relaxation: auto runs stochastic greedy, as for the built-in's relaxation-less terms ...
    _, rep = selection(OWN, base + ["--objective", "replica-plain"], "plain")
    assert optimizers(rep) == ["stochastic"] * 2, optimizers(rep)
    p = run(OWN, base[:-1] + ["--objective", "replica-plain", "--out", path("plain2.npy")])
    assert "(auto: replica-plain has no relaxation" in p.stderr, p.stderr
    # ... and the continuous learner is refused naming it, before anything is written.
    p = run(OWN, base + ["--objective", "replica-plain", "--optimizer", "continuous", "--out", path("x.npy")], expect=2)
    assert "replica-plain" in p.stderr and "no relaxation" in p.stderr, p.stderr
    assert not os.path.exists(path("x.npy"))
    # Several of one's own in a run, each a term of f: beside replica-plain, replica selects
    # what the built-in pairwise selects there (stochastic greedy: replica-plain has no relaxation).
    two = ["--objective", "replica-plain", "--objective-weights", "1,0.5"]
    want, rep = selection(OWN, base + ["--objective", "pairwise"] + two, "builtin_and_own")
    got, own = selection(OWN, base + ["--objective", "replica"] + two, "two_own")
    assert got == want, "replica + replica-plain: the ids differ from pairwise + replica-plain"
    assert optimizers(own) == ["stochastic"] * 2, optimizers(own)
    terms = own["blocks"][0]["objective"]["terms"]
    assert {"quality", "replica", "replica-plain"} == set(terms), terms
    assert ct.close(total(own), total(rep), rel=1e-6), (total(own), total(rep))


def test_names():
    h = run(OWN, ["--help"]).stdout
    assert "replica: pairwise similarity in double" in h and "disf:" in h, h
    assert "replica" not in run(BUILTIN, ["--help"]).stdout
    p = run(OWN, ["--demo", "--objective", "nope"], expect=2)
    assert "--objective" in p.stderr and "replica-plain" in p.stderr, p.stderr
    p = run(BUILTIN, ["--demo", "--objective", "replica"], expect=2)
    assert "--objective" in p.stderr, p.stderr
    # Each program says its own name (that of its file) in messages, help and --version.
    own = os.path.basename(OWN)
    p = run(OWN, ["--demo", "--objective", "nope"], expect=2)
    assert p.stderr.startswith(own + ": --objective"), p.stderr
    assert run(OWN, ["--version"]).stdout.startswith(own + " "), run(OWN, ["--version"]).stdout
    assert h.startswith(own + ": select"), h[:200]
    assert run(BUILTIN, ["--version"]).stdout.startswith("datamask-select "), "datamask-select --version"


def main():
    global BUILTIN, OWN, TMP, HAS_MPI
    BUILTIN, name, OWN = sys.argv[1], sys.argv[2], sys.argv[3]
    HAS_MPI = len(sys.argv) > 4 and "DATAMASK_SELECT_MPI=1" in sys.argv[4]
    with tempfile.TemporaryDirectory(prefix="dm_own_") as tmp:
        TMP = ct.TMP = tmp
        t0 = time.time()
        globals()["test_" + name]()
        print("cli.own_program_%s passed in %.1f s" % (name, time.time() - t0))


if __name__ == "__main__":
    main()
