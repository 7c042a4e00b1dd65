# SPDX-License-Identifier: Apache-2.0
"""A running selection: progress events, Ctrl-C, a failing callback, the GIL."""

import math
import os
import signal
import sys
import threading
import time

import numpy as np
import pytest

import datamask


def data(n=4000, d=32):
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, d)).astype(np.float32), rng.random(n)


# A run that takes minutes unless stopped.
LONG = dict(optimizer="pg", steps=10**6, rollouts=64, ratio=0.1)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_stops_a_long_run_within_a_second():
    x, q = data()
    events = []
    sent = []

    def interrupt():
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(1.0, interrupt)
    # A lost interrupt fails the test (datamask.Cancelled instead of KeyboardInterrupt) instead of
    # running 10^6 steps.
    watchdog = threading.Event()
    guard = threading.Timer(60.0, watchdog.set)
    # Python's own handler, as in a terminal: a runner started in the background of a shell
    # without job control inherits SIGINT ignored, and Python then installs no handler.
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer.start()
    guard.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            datamask.select(x, q, progress=events.append, cancel=watchdog, **LONG)
        stopped = time.monotonic()
    finally:
        timer.cancel()
        guard.cancel()
        signal.signal(signal.SIGINT, handler)
    assert sent and stopped - sent[0] < 1.0
    assert events and isinstance(events[0], datamask.ProgressEvent)
    assert [e.done for e in events] == list(range(1, len(events) + 1))
    assert events[0].total == 10**6 and events[0].blocks == 1 and events[0].unit == "step"


def test_a_cancel_event_stops_a_run_in_a_worker_thread():
    # Ctrl-C reaches only the main thread; a worker's run stops through its cancel event.
    x, q = data()
    cancel = threading.Event()
    outcome = []

    def work():
        try:
            outcome.append(datamask.select(x, q, cancel=cancel, **LONG))
        except datamask.Cancelled as e:
            outcome.append(e)

    worker = threading.Thread(target=work)
    worker.start()
    time.sleep(0.5)
    sent = time.monotonic()
    cancel.set()
    worker.join(timeout=30)
    assert not worker.is_alive() and time.monotonic() - sent < 1.0
    assert len(outcome) == 1 and isinstance(outcome[0], datamask.Cancelled)


def test_a_cancel_event_set_before_the_run_stops_every_optimizer():
    x, q = data(n=500)
    cancel = threading.Event()
    cancel.set()
    for optimizer in ("continuous", "pg", "lazy"):
        with pytest.raises(datamask.Cancelled):
            datamask.select(x, q, optimizer=optimizer, cancel=cancel)
    with pytest.raises(TypeError, match="cancel: expected a threading.Event"):
        datamask.select(x, q, cancel=True)


def test_a_cancel_object_is_read_by_its_truth_value():
    # Any object with is_set(): its result counts as `if` reads it (numpy's bool, 0, 1).
    x, q = data(n=500)

    class Flag:
        def __init__(self, value):
            self.value = value

        def is_set(self):
            return self.value

    assert len(datamask.select(x, q, optimizer="pg", cancel=Flag(np.bool_(False))).ids) == 50
    assert len(datamask.select(x, q, optimizer="pg", cancel=Flag(0)).ids) == 50
    for value in (np.bool_(True), 1):
        with pytest.raises(datamask.Cancelled):
            datamask.select(x, q, optimizer="pg", cancel=Flag(value))


def test_an_exception_in_the_progress_callable_stops_the_run():
    x, q = data()

    def fail(event):
        if event.step == 3:
            raise RuntimeError("stop here")

    start = time.monotonic()
    with pytest.raises(RuntimeError, match="stop here"):
        datamask.select(x, q, progress=fail, **LONG)
    assert time.monotonic() - start < 30


def test_progress_events_count_every_iteration():
    x, q = data(n=1000)
    events = []
    datamask.select(x, q, iterations=12, progress=events.append)
    assert [e.step for e in events] == list(range(1, 13))
    assert all(e.total == 12 and e.unit == "iteration" for e in events)


def test_progress_events_count_every_greedy_pick():
    x, q = data(n=1000)
    events = []
    datamask.select(x, q, count=15, optimizer="stochastic", objective="facility", progress=events.append)
    assert [e.step for e in events] == list(range(1, 16))
    assert all(e.total == 15 and math.isnan(e.value) and e.unit == "pick" for e in events)


def test_progress_true_shows_a_bar_or_a_line(capsys):
    x, q = data(n=1000)
    datamask.select(x, q, iterations=5, progress=True)
    assert "5/5" in capsys.readouterr().err


def test_the_plain_progress_line_names_what_it_counts(capsys, monkeypatch):
    # Without tqdm the line says picks for a greedy, as the program's progress line does.
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    x, q = data(n=1000)
    datamask.select(x, q, count=15, optimizer="lazy", objective="facility", progress=True)
    err = capsys.readouterr().err
    assert "15/15 picks (100%)" in err and "steps" not in err


def test_the_gil_is_released_while_selecting():
    x, q = data()
    done = threading.Event()
    result = []

    def work():
        result.append(datamask.select(x, q, optimizer="pg", steps=40, rollouts=32))
        done.set()

    t = threading.Thread(target=work)
    t.start()
    ticks = 0
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    t.join()
    assert result and ticks > 20  # the main thread ran while the selection did


# The exact kNN graph of 40,000 x 64 rows, K = 32: about 10 s on a 2-core machine.
GRAPH = dict(lam=0.0, objective="facility", neighbors=32, knn_build="exact", ratio=0.1)


def test_a_cancel_event_stops_a_graph_build():
    x, _ = data(n=40000, d=64)
    cancel = threading.Event()
    events = []

    def on_event(event):  # cancels at the build's first event, well before its end
        events.append(event)
        if event.unit == "row" and not cancel.is_set():
            events.append(time.monotonic())
            cancel.set()

    start = time.monotonic()
    with pytest.raises(datamask.Cancelled):
        datamask.select(x, progress=on_event, cancel=cancel, **GRAPH)
    stopped = time.monotonic()
    rows = [e for e in events if isinstance(e, datamask.ProgressEvent)]
    assert rows and all(e.unit == "row" and e.total == 40000 and e.done < 40000 for e in rows), rows
    sent = next(e for e in events if isinstance(e, float))
    assert stopped - sent < 5.0, (stopped - sent, stopped - start)


def test_progress_events_for_a_graph_build(capsys, monkeypatch):
    x, _ = data(n=16000, d=64)
    events = []
    datamask.select(x, optimizer="continuous", iterations=10, progress=events.append, **GRAPH)
    rows = [e for e in events if e.unit == "row"]
    assert len(rows) >= 2 and rows[-1].done == rows[-1].total == 16000, rows
    assert [e.done for e in rows] == sorted(e.done for e in rows)
    assert all(e.block == 0 and e.blocks == 1 and math.isnan(e.value) for e in rows)
    assert [e.unit for e in events[len(rows):]] == ["iteration"] * 10  # the graph first
    # Without tqdm the plain lines say the build's rows too.
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    datamask.select(x, optimizer="continuous", iterations=10, progress=True, **GRAPH)
    err = capsys.readouterr().err
    assert "kNN graph of block 1/1: 16000/16000 rows (100%)" in err and "10/10 iterations" in err, err


def spin_count(env_extra):
    """libgomp's GOMP_SPINCOUNT in a fresh interpreter that imports datamask and runs a selection,
    as its start-up display (OMP_DISPLAY_ENV) says it; None without libgomp."""
    import re
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")}
    env.update(env_extra, OMP_DISPLAY_ENV="VERBOSE")
    code = ("import os, numpy as np, datamask; x = np.ones((50, 4), np.float32); x[:, 0] = np.arange(50); "
            "datamask.select(x, np.arange(50.0), count=5); print(os.environ['OMP_WAIT_POLICY'])")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    counts = re.findall(r"GOMP_SPINCOUNT = '(\d+)'", p.stderr)
    return (int(counts[-1]) if counts else None), p.stdout.strip()


def test_import_makes_openmp_threads_wait_passively():
    """As datamask-select: passive unless the user chose a policy (issue 45, item 7: spinning
    threads made the module several times slower than the program on a busy machine)."""
    count, policy = spin_count({})
    if count is None:
        pytest.skip("the module does not run on libgomp")
    assert (count, policy) == (0, "PASSIVE")
    count, policy = spin_count({"OMP_WAIT_POLICY": "ACTIVE"})
    assert policy == "ACTIVE" and count > 0


def test_a_clustered_graph_of_low_recall_is_warned_of():
    """As datamask-select: the block's graph record keeps its estimated recall, and below
    _core.low_knn_recall the call warns with the hint (issue 45)."""
    x, q = data(2000, 16)
    with pytest.warns(UserWarning, match="finds .* nearest neighbours .* knn_probes"):
        sel = datamask.select(x, q, lam=0.0, objective="facility", neighbors=8, knn_build="clustered",
                              knn_clusters=40, knn_probes=1, ratio=0.1)
    assert sel.blocks[0]["graph"]["recall"] < datamask._core.low_knn_recall
