#!/usr/bin/env bash
# One device call: the CUDA programs of bfd65b3 (new) and c2b8e51 (base), built on the 2-core
# machine (nvcc 13.0, sm_90, no MPI), side by side on one generated 10^6 x 768 block (the
# generator of scripts/gpu-check), then the passes at the same size.
set -u
cd "$(dirname "$0")"
ldd ./dms-new | grep -q "not found" && export LD_LIBRARY_PATH=$PWD/lib && echo "using the carried libgomp"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
t=/tmp/timing && mkdir -p $t
python3 - $t 1000000 <<'PY'
import sys, numpy as np
folder, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
centres = rng.standard_normal((64, 768)).astype(np.float32)
x = centres[rng.integers(0, 64, n)]
x += 0.5 * rng.standard_normal((n, 768), dtype=np.float32)
np.save(f"{folder}/e.npy", x)
np.save(f"{folder}/q.npy", rng.standard_normal(n).astype(np.float32))
PY
echo "data made at $SECONDS s"
for run in "new" "base" "new --no-polish" "base --no-polish" "new --track-every 0 --no-polish"; do
  set -- $run
  prog=$1; shift
  [[ -x ./dms-$prog ]] || { echo "no dms-$prog"; continue; }
  timeout 60 ./dms-$prog --embeddings $t/e.npy --quality $t/q.npy --ratio 0.1 --quiet --optimizer continuous "$@" \
    --out $t/o.npy --report $t/r.json > $t/log 2>&1 || { echo "$run: failed"; tail -3 $t/log; continue; }
  python3 -c "import json, sys; r = json.load(open(sys.argv[1]))['total']; s = r['seconds']; print('%-34s optimize %7.3f s, evaluate %.3f s, f %.15g' % (sys.argv[2], s['optimize'], s['evaluate'], r['objective']['total']))" $t/r.json "$run"
done
echo "programs done at $SECONDS s"
timeout 60 ./passes 1000000 768 10 no-disf
echo "done at $SECONDS s"
