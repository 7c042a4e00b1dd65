# SPDX-License-Identifier: Apache-2.0
"""The GPU timings' block: n x 768 float32 rows around 64 centres, and a quality score per row.

    python3 benchmarks/gpu/make_block.py FOLDER N    (writes FOLDER/e.npy, FOLDER/e16.npy and FOLDER/q.npy)

e16.npy holds the same rows rounded to float16 (the program keeps such a file's blocks as stored).

Used by scripts/gpu-check and scripts/gpu-prebuild's run script, so that every timing in
benchmarks/GPU.md since 2026-11-26 is of the same block (seed 0).
"""
import sys

import numpy as np


def main() -> None:
    folder, n = sys.argv[1], int(sys.argv[2])
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((64, 768)).astype(np.float32)
    x = centres[rng.integers(0, 64, n)]
    x += 0.5 * rng.standard_normal((n, 768), dtype=np.float32)  # in place: 3 GB, not 9, at 10^6 rows
    np.save(f"{folder}/e.npy", x)
    np.save(f"{folder}/e16.npy", x.astype(np.float16))
    np.save(f"{folder}/q.npy", rng.standard_normal(n).astype(np.float32))


if __name__ == "__main__":
    main()
