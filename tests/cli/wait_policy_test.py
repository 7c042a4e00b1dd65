#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The programs the README runs wait passively between OpenMP regions (datamask/core/wait_policy.hpp),
and scripts/demo builds datamask-select, which the README uses next.

    wait_policy_test.py programs PROGRAM...   each, started with no wait policy of the user's,
                                              runs with libgomp's spin count 0 (passive)
    wait_policy_test.py demo SCRIPT           the script's build names datamask-select

libgomp prints its settings at start-up under OMP_DISPLAY_ENV=VERBOSE, GOMP_SPINCOUNT among them:
300000 under the default policy, 0 under OMP_WAIT_POLICY=PASSIVE. A program that re-executes
itself prints them twice, the last time with the settings it runs with. Each program is stopped
once its settings are known: only its start-up is tested. Exit 77 (skipped) without libgomp.
"""
import os
import queue
import re
import subprocess
import sys
import threading

SKIPPED = 77
# The variables by which a user chooses a policy: none may be set for the program to choose.
CHOICES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")
END = "OPENMP DISPLAY ENVIRONMENT END"


def spin_counts(program):
    """The GOMP_SPINCOUNT of each display the program's start-up printed (a second display comes
    at once after the first, or never)."""
    env = {k: v for k, v in os.environ.items() if k not in CHOICES}
    env["OMP_DISPLAY_ENV"] = "VERBOSE"
    proc = subprocess.Popen([program], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env)
    lines = queue.Queue()

    def read():  # on a thread, so that a program that prints one display is waited for 5 s only
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    counts, ends = [], 0
    try:
        while ends < 2:
            try:
                line = lines.get(timeout=60 if ends == 0 else 5)
            except queue.Empty:
                break
            if line is None:
                break
            m = re.match(r"\s*GOMP_SPINCOUNT = '(\d+)'", line)
            if m:
                counts.append(int(m.group(1)))
            ends += line.startswith(END)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    return counts


def test_programs(programs):
    seen = {p: spin_counts(p) for p in programs}
    if not any(seen.values()):
        print("skipped: no libgomp display (another OpenMP runtime, or none)")
        sys.exit(SKIPPED)
    spinning = {os.path.basename(p): c for p, c in seen.items() if not c or c[-1] != 0}
    assert not spinning, "these programs run with libgomp spinning (spin counts per display): %s" % spinning


def test_demo(script):
    with open(script) as f:
        builds = [l for l in f if l.lstrip().startswith("cmake --build")]
    assert builds, "no cmake --build line in " + script
    targets = " ".join(builds).split("--target", 1)[-1].split()
    assert "quickstart" in targets and "datamask-select" in targets, builds


def main():
    name, args = sys.argv[1], sys.argv[2:]
    if name == "programs":
        test_programs(args)
    else:
        test_demo(args[0])
    print("ok:", name)


if __name__ == "__main__":
    main()
