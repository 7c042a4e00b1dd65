#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Wall time of datamask-select with 1 and 2 threads, on an idle machine and beside a competing
# CPU load (busy-loop processes started here), under three wait policies: the program's default
# (no variable set: it re-executes itself with OMP_WAIT_POLICY=PASSIVE), spinning (libgomp's own
# default, GOMP_SPINCOUNT=300000, which the program leaves alone as an explicit setting) and
# OMP_WAIT_POLICY=PASSIVE. Why: issue 9 found the default threads 5x slower than one thread on a
# busy 2-core machine; this shows when to set --threads and the wait policy.
#
# Usage: benchmarks/threads.sh PATH/TO/datamask-select [LOAD_PROCESSES=2] [TIMEOUT_S=60]
# Each case: `--demo --optimizer greedy` and a short policy-gradient `--demo --optimizer pg --steps 100`.
set -u
prog=${1:?usage: threads.sh PATH/TO/datamask-select [load processes] [timeout s]}
load=${2:-2}
limit=${3:-60}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() {  # run LABEL ARGS...: prints wall seconds (or >limit)
  local label=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  if timeout "$limit" "$prog" "$@" --quiet --out "$out/sel.npy" >/dev/null 2>&1; then
    t1=$(date +%s.%N)
    printf '%-44s %8.2f s\n' "$label" "$(echo "$t1 - $t0" | bc)"
  else
    printf '%-44s %8s\n' "$label" ">${limit} s"
  fi
}

busy=()
start_load() { for _ in $(seq "$load"); do (while :; do :; done) & busy+=($!); done; }
stop_load() { for p in "${busy[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; busy=(); }
trap 'stop_load; rm -rf "$out"' EXIT

echo "machine: $(nproc) cores; load: $load busy-loop processes; limit ${limit} s per run"
for state in idle loaded; do
  [ "$state" = loaded ] && start_load
  for policy in default spin PASSIVE; do
    for t in 1 2; do
      unset OMP_WAIT_POLICY GOMP_SPINCOUNT
      [ "$policy" = spin ] && export GOMP_SPINCOUNT=300000
      [ "$policy" = PASSIVE ] && export OMP_WAIT_POLICY=PASSIVE
      run "$state wait=$policy threads=$t greedy" --demo --optimizer greedy --threads "$t"
      run "$state wait=$policy threads=$t pg 100 steps" --demo --optimizer pg --steps 100 --threads "$t"
    done
  done
  [ "$state" = loaded ] && stop_load
done
