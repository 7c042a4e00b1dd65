# SPDX-License-Identifier: Apache-2.0
"""Pairwise similarity written in numpy as a datamask.Metric (score and relaxation), with the
maths of the built-in objective: used by test_metric.py and python/benchmarks/metric_overhead.py."""

import numpy as np


def unit(x):
    n = np.linalg.norm(x.astype(np.float64), axis=1, keepdims=True)
    return np.divide(x, n, out=np.zeros(x.shape), where=n > 0)


def pws(x, subsets):  # minus the mean cosine over ordered pairs, as the built-in
    s, k = unit(x[subsets.ravel()]).reshape(*subsets.shape, -1).sum(axis=1), subsets.shape[1]
    return -((s * s).sum(axis=1) - k) / (k * (k - 1)) if k > 1 else np.zeros(len(subsets))


def pws_relax(x, p, size):  # its relaxation (docs/method.md section 6) and gradient
    u = unit(x)
    s, c = u.T @ p, size * (size - 1)
    return -(s @ s - p @ p) / c, -(2 * (u @ s) - 2 * p) / c
