# SPDX-License-Identifier: Apache-2.0
"""Upper bounds on the optimum of f over sets of size S in one block, each with a certificate that
can be re-checked (docs/method.md section 7). Reference implementation in numpy and scipy: the oracle of
the tests and the specification of the library's certificates.

f(U) = cq * mean_{i in U} q_i + cd * F_d(U), with cq = lambda * w_q / s_q and
cd = (1 - lambda) * w_d / s_d (docs/method.md 1.1; the scales s_q, s_d are inputs, see `Weights`), and
F_d one of
- pairwise similarity on unit rows (`PairwiseQuality`),
- facility location with the cosine kernel, dense or on a kNN graph with similarities clamped at 0
  as the library's sparse facility location does (`FacilityQuality`),
- DiSF on the raw rows (`DisfQuality`).

Bounds:
- pairwise + quality: the concave relaxation g of docs/method.md 7.1, maximised by Frank-Wolfe with
  exact line search; the bound at any point p is g(p) + the linear maximisation gap, valid for every
  p in R^n (g is concave on all of R^n), so `check_pairwise` needs no feasibility tolerance;
- facility location + quality: the Lagrangian dual L(lambda) of docs/method.md 7.2, valid for every
  lambda >= 0, started at the selection's assignment and tightened by one of the dual methods
  below (`DUAL_METHODS`); `facility_lp` solves the LP itself with HiGHS (the best any lambda gives);
- DiSF + quality: F_disf <= 0, so top-S quality is a bound (`disf_bound`); docs/method.md 7.3 and
  STUDY.md say why nothing tighter is known.

Every iterative method reports its history as `Step` rows (evaluations, passes over the block,
seconds, bound), so a study can read the bound any budget buys.
"""
from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, sparse
from scipy.special import expit

# --------------------------------------------------------------------------------------------
# f and its terms (docs/method.md section 1)


@dataclass(frozen=True)
class Weights:
    """lambda, the calibrated scales and the terms' weights: f = cq * F_q + cd * F_d."""

    lam: float
    scale_q: float = 1.0
    scale_d: float = 1.0
    weight_q: float = 1.0
    weight_d: float = 1.0

    @property
    def cq(self) -> float:
        return self.lam * self.weight_q / self.scale_q

    @property
    def cd(self) -> float:
        return (1.0 - self.lam) * self.weight_d / self.scale_d


def unit_rows(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


def top_sum(v: np.ndarray, s: int) -> float:
    """Sum of the s largest entries (the linear maximum over {0 <= p <= 1, sum p = s})."""
    return float(np.partition(v, v.size - s)[v.size - s:].sum()) if s > 0 else 0.0


def top_set(v: np.ndarray, s: int) -> np.ndarray:
    """Indices of the s largest entries, ties to the smaller index (the library's rule: the set
    feeds the facility dual's subgradient, so a tie at the cut changes the path), ascending."""
    return np.sort(np.argsort(-v, kind="stable")[:s])


def pairwise_term(xu: np.ndarray, u) -> float:
    u = np.asarray(u)
    k = u.size
    if k < 2:
        return 0.0
    s = xu[u].sum(axis=0)
    return -(float(s @ s) - k) / (k * (k - 1))


def disf_term(x: np.ndarray, u) -> float:
    u = np.asarray(u)
    k = u.size
    if k < 2:
        return 0.0
    xs = x[u]
    z = (xs - xs.mean(axis=0)) / np.sqrt(xs.var(axis=0, ddof=1) + 1e-8)
    c = z.T @ z / (k - 1)
    return -(float((c * c).sum()) - float((np.diag(c) ** 2).sum())) / 1e4


class DenseCosine:
    """Facility location's cosine kernel on the whole block: sim = Xu Xu^T (kept, n x n)."""

    def __init__(self, xu: np.ndarray):
        self.xu = xu
        self.n = xu.shape[0]
        self.sim = xu @ xu.T

    def term(self, u) -> float:
        return float(self.sim[:, np.asarray(u)].max(axis=1).mean())


class KnnCosine:
    """The kNN graph (n x K ids and sims, each row sorted by similarity descending, the item
    itself included, as objectives/knn/graph.hpp builds it); F = mean_v max(0, max_{j in U and N(v)} sim)."""

    def __init__(self, ids: np.ndarray, sims: np.ndarray):
        self.ids = np.asarray(ids, dtype=np.int64)
        self.sims = np.asarray(sims, dtype=np.float64)
        self.n, self.k = self.ids.shape
        self.clamped = np.maximum(self.sims, 0.0)

    def term(self, u) -> float:
        inside = np.zeros(self.n, dtype=bool)
        inside[np.asarray(u)] = True
        return float(np.where(inside[self.ids], self.clamped, 0.0).max(axis=1).mean())


def knn_graph(xu: np.ndarray, k: int, tile: int = 1024) -> KnnCosine:
    """Exact cosine kNN graph (the item itself included), ties to the smaller id."""
    n = xu.shape[0]
    ids = np.empty((n, k), dtype=np.int64)
    sims = np.empty((n, k))
    for lo in range(0, n, tile):
        block = xu[lo:lo + tile] @ xu.T
        part = np.argpartition(-block, k - 1, axis=1)[:, :k]
        vals = np.take_along_axis(block, part, axis=1)
        order = np.lexsort((part, -vals), axis=1)  # similarity descending, then id ascending
        ids[lo:lo + tile] = np.take_along_axis(part, order, axis=1)
        sims[lo:lo + tile] = np.take_along_axis(vals, order, axis=1)
    return KnnCosine(ids, sims)


class Objective:
    """f = cq * mean q + cd * F_d on a block; subclasses define F_d (`diversity`)."""

    def __init__(self, q: np.ndarray, size: int, w: Weights):
        self.q = np.asarray(q, dtype=np.float64)
        self.n = self.q.size
        self.size = int(size)
        self.w = w
        if not 1 <= self.size <= self.n:
            raise ValueError("S must be in [1, n]")

    def diversity(self, u) -> float:
        raise NotImplementedError

    def terms(self, u) -> tuple[float, float]:
        return float(self.q[np.asarray(u)].mean()), self.diversity(u)

    def value(self, u) -> float:
        fq, fd = self.terms(u)
        return self.w.cq * fq + self.w.cd * fd

    def with_weights(self, w: Weights) -> "Objective":
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other.w = w
        return other


class PairwiseQuality(Objective):
    def __init__(self, x, q, size, w):
        super().__init__(q, size, w)
        self.xu = unit_rows(x)

    def diversity(self, u):
        return pairwise_term(self.xu, u)


class FacilityQuality(Objective):
    def __init__(self, kernel, q, size, w):
        super().__init__(q, size, w)
        self.kernel = kernel

    def diversity(self, u):
        return self.kernel.term(u)


class DisfQuality(Objective):
    def __init__(self, x, q, size, w):
        super().__init__(q, size, w)
        self.x = np.asarray(x, dtype=np.float64)

    def diversity(self, u):
        return disf_term(self.x, u)


# --------------------------------------------------------------------------------------------
# Calibration and random subsets (docs/method.md 1.1; for the study the subsets are size-S subsets of
# the whole block)


def random_subsets(n: int, size: int, count: int = 256, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.choice(n, size, replace=False) for _ in range(count)]


def calibrate(obj: Objective, lam: float, subsets) -> tuple[Weights, float]:
    """Scales = the terms' standard deviations over the subsets (1 where a std is 0), and the
    mean f over the same subsets under those scales."""
    terms = np.array([obj.terms(u) for u in subsets])
    std = terms.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    w = Weights(lam, scale_q=float(std[0]), scale_d=float(std[1]))
    mean_f = float((w.cq * terms[:, 0] + w.cd * terms[:, 1]).mean())
    return w, mean_f


# --------------------------------------------------------------------------------------------
# Naive greedy (ties to the smaller id), with incremental gains as the library's greedy state;
# for facility location lazy greedy, which picks the same items.


def greedy_pairwise(obj: PairwiseQuality) -> np.ndarray:
    xu, q, cq, cd = obj.xu, obj.q, obj.w.cq, obj.w.cd
    taken = np.zeros(obj.n, dtype=bool)
    s = np.zeros(xu.shape[1])
    picks = []
    for k in range(obj.size):
        # f(U + i) up to terms common to every candidate
        score = cq * q / (k + 1)
        if k >= 1:
            score = score - cd * 2.0 * (xu @ s) / ((k + 1) * k)
        score[taken] = -np.inf
        i = int(np.argmax(score))
        taken[i] = True
        s += xu[i]
        picks.append(i)
    return np.array(picks)


def greedy_disf(obj: DisfQuality) -> np.ndarray:
    """Naive greedy on DiSF + quality; the candidates' correlation after a rank-one update of the
    selection's scatter matrix, all candidates at once (O(n d^2) per pick)."""
    x, q, cq, cd = obj.x, obj.q, obj.w.cq, obj.w.cd
    n, d = x.shape
    taken = np.zeros(n, dtype=bool)
    picks: list[int] = []
    mean = np.zeros(d)
    scatter = np.zeros((d, d))
    for k in range(obj.size):
        score = cq * q / (k + 1)
        if k >= 1:
            # U + i has k + 1 items: scatter' = scatter + (k / (k + 1)) y y^T, y = x_i - mean,
            # covariance' = scatter' / k; F = -(sum_ab corr_ab^2 - sum_a corr_aa^2) / 1e4
            y = x - mean
            c = k / (k + 1)
            var = (np.diag(scatter)[None, :] + c * y * y) / k + 1e-8
            wv = 1.0 / var
            wy = wv * y
            total = (wv @ (scatter * scatter) * wv).sum(axis=1)
            total += 2 * c * ((wy @ scatter) * wy).sum(axis=1)
            total += c * c * (wy * y).sum(axis=1) ** 2
            total /= k * k
            diag = ((np.diag(scatter)[None, :] + c * y * y) / k * wv) ** 2
            score = score + cd * (-(total - diag.sum(axis=1)) / 1e4)
        score[taken] = -np.inf
        i = int(np.argmax(score))
        taken[i] = True
        picks.append(i)
        delta = x[i] - mean
        mean = mean + delta / (k + 1)
        scatter = scatter + np.outer(delta, x[i] - mean)
    return np.array(picks)


def greedy_facility(obj: FacilityQuality) -> np.ndarray:
    """Lazy greedy on facility location + mean quality: the candidate-dependent gain is
    cq (q_i - min q) / (k + 1) + cd / n * sum_v max(0, sim(v, i) - cur_v), never growing with k."""
    kern, q, cq, cd, n = obj.kernel, obj.q, obj.w.cq, obj.w.cd, obj.n
    qmin = float(q.min())
    if isinstance(kern, DenseCosine):
        first = cq * q + cd * kern.sim.mean(axis=0)
        cur = None

        def column(i):
            return kern.sim[:, i]
    else:
        csc = sparse.csr_matrix((kern.clamped.ravel(), kern.ids.ravel(),
                                 np.arange(0, n * kern.k + 1, kern.k)), shape=(n, n)).tocsc()
        colsum = np.asarray(csc.sum(axis=0)).ravel()
        first = cq * q + cd * colsum / n

        def column(i):
            lo, hi = csc.indptr[i], csc.indptr[i + 1]
            return csc.indices[lo:hi], csc.data[lo:hi]

    i0 = int(np.argmax(first))
    picks = [i0]
    if isinstance(kern, DenseCosine):
        cur = kern.sim[:, i0].copy()

        def gain(i, k):
            return cq * (q[i] - qmin) / (k + 1) + cd / n * float(np.maximum(column(i) - cur, 0).sum())

        def add(i):
            np.maximum(cur, column(i), out=cur)
    else:
        cur = np.zeros(n)
        rows, vals = column(i0)
        cur[rows] = np.maximum(cur[rows], vals)

        def gain(i, k):
            rows, vals = column(i)
            return cq * (q[i] - qmin) / (k + 1) + cd / n * float(np.maximum(vals - cur[rows], 0).sum())

        def add(i):
            rows, vals = column(i)
            cur[rows] = np.maximum(cur[rows], vals)

    heap = [(-gain(i, 1), i) for i in range(n) if i != i0]
    heapq.heapify(heap)
    for k in range(1, obj.size):
        while True:
            _, i = heapq.heappop(heap)
            key = (-gain(i, k), i)
            if not heap or key <= heap[0]:
                break
            heapq.heappush(heap, key)
        add(i)
        picks.append(i)
    return np.array(picks)


def greedy(obj: Objective) -> np.ndarray:
    if isinstance(obj, PairwiseQuality):
        return greedy_pairwise(obj)
    if isinstance(obj, FacilityQuality):
        return greedy_facility(obj)
    return greedy_disf(obj)


# --------------------------------------------------------------------------------------------
# Histories


@dataclass
class Step:
    evals: int      # evaluations of the bound (iterations)
    passes: float   # passes over the block (X for pairwise, the kernel or graph for FL)
    seconds: float
    bound: float    # best (smallest) valid bound so far


@dataclass
class Run:
    bound: float
    certificate: np.ndarray  # p (pairwise) or lambda (facility location)
    history: list[Step] = field(default_factory=list)
    lower: float = -np.inf   # best value of the relaxation seen (pairwise: max g(p_t))


# --------------------------------------------------------------------------------------------
# Pairwise similarity + quality: concave relaxation (docs/method.md 7.1)


def pairwise_coefficients(obj: PairwiseQuality) -> tuple[np.ndarray, float]:
    """f(U) = a . 1_U - b (||sum_{i in U} x_i||^2 - S)."""
    s = obj.size
    a = obj.w.cq * obj.q / s
    b = obj.w.cd / (s * (s - 1)) if s >= 2 else 0.0
    return a, b


def check_pairwise(x: np.ndarray, q: np.ndarray, size: int, w: Weights, p: np.ndarray) -> float:
    """The bound certified by p, recomputed from the data alone: g(p) + max_{v in P} grad.(v - p).
    Valid for every p in R^n because g is concave on R^n (b >= 0); no feasibility check needed."""
    if w.cd < 0:
        raise ValueError("the relaxation is concave only for a non-negative pairwise weight")
    xu = unit_rows(x)
    p = np.asarray(p, dtype=np.float64)
    a = w.cq * np.asarray(q, dtype=np.float64) / size
    b = w.cd / (size * (size - 1)) if size >= 2 else 0.0
    s = xu.T @ p
    g = float(a @ p) - b * (float(s @ s) - size)
    grad = a - 2.0 * b * (xu @ s)
    return g + top_sum(grad, size) - float(grad @ p)


def pairwise_frank_wolfe(obj: PairwiseQuality, p0: np.ndarray, iterations: int) -> Run:
    """Frank-Wolfe with exact line search on g from p0: direction v - p with v the top-S indicator
    of the gradient, step min(1, gap / (2 b ||X^T (v - p)||^2)). Per iteration: X s (one pass
    over X) and the sum of S rows for the vertex (S / n of a pass); s = X^T p is updated, not
    recomputed, and the final bound is recomputed by `check_pairwise`."""
    xu = obj.xu
    n, size = obj.n, obj.size
    a, b = pairwise_coefficients(obj)
    p = np.asarray(p0, dtype=np.float64).copy()
    s = xu.T @ p
    best, best_p, lower = np.inf, p.copy(), -np.inf
    history = []
    start = time.perf_counter()
    passes = 1.0
    for t in range(iterations + 1):
        grad = a - 2.0 * b * (xu @ s)
        passes += 1.0
        g = float(a @ p) - b * (float(s @ s) - size)
        v = top_set(grad, size)
        gp = float(grad @ p)
        gap = float(grad[v].sum()) - gp
        lower = max(lower, g)
        if g + gap < best:
            best, best_p = g + gap, p.copy()
        history.append(Step(t + 1, passes, time.perf_counter() - start, best))
        if t == iterations or gap <= 0:
            break
        direction_s = xu[v].sum(axis=0) - s
        passes += size / n
        direction = -p
        direction[v] += 1.0
        curvature = 2.0 * b * float(direction_s @ direction_s)
        gamma = 1.0 if curvature <= 0 else min(1.0, gap / curvature)
        p += gamma * direction
        s += gamma * direction_s
    bound = check_pairwise(obj.xu, obj.q, size, obj.w, best_p)
    return Run(bound, best_p, history, lower)


def pairwise_accelerated(obj: PairwiseQuality, p0: np.ndarray, iterations: int) -> Run:
    """Accelerated projected gradient (FISTA) on g over P with step 2 / Lip, Lip = 2 b ||X||_2^2,
    the bound read at every iterate: two passes for the step at the extrapolated point, two for
    the bound at the iterate. Measured against Frank-Wolfe; not the recommendation."""
    xu = obj.xu
    size = obj.size
    a, b = pairwise_coefficients(obj)
    lip = 2.0 * b * float(np.linalg.norm(xu, 2)) ** 2
    step = 2.0 / lip if lip > 0 else 1.0
    p = np.asarray(p0, dtype=np.float64).copy()
    y, momentum = p.copy(), 1.0
    best, best_p, lower = np.inf, p.copy(), -np.inf
    history: list[Step] = []
    start = time.perf_counter()
    for t in range(iterations):
        s = xu.T @ p
        grad = a - 2.0 * b * (xu @ s)
        g = float(a @ p) - b * (float(s @ s) - size)
        lower = max(lower, g)
        bound = g + top_sum(grad, size) - float(grad @ p)
        if bound < best:
            best, best_p = bound, p.copy()
        history.append(Step(t + 1, 4.0 * t + 2.0, time.perf_counter() - start, best))
        grad_y = a - 2.0 * b * (xu @ (xu.T @ y))
        nxt = project_capped_simplex(y + step * grad_y, size)
        following = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * momentum * momentum))
        y = nxt + (momentum - 1.0) / following * (nxt - p)
        p, momentum = nxt, following
    return Run(check_pairwise(obj.xu, obj.q, size, obj.w, best_p), best_p, history, lower)


def polish_pairwise(obj: PairwiseQuality, selection, rounds: int = 1000) -> np.ndarray:
    """Best-improvement 1-swaps from a selection until none improves f (or `rounds`): a better
    set where greedy is not optimal, so that a study can tell greedy's distance from the optimum
    from the relaxation's. Swapping i out and j in changes f by
    (a_j - 2b s.x_j) - (a_i - 2b s.x_i) - b (2 - 2 x_i.x_j)."""
    xu = obj.xu
    a, b = pairwise_coefficients(obj)
    inside = np.zeros(obj.n, dtype=bool)
    inside[np.asarray(selection)] = True
    for _ in range(rounds):
        u, out = np.flatnonzero(inside), np.flatnonzero(~inside)
        s = xu[u].sum(axis=0)
        lin = a - 2.0 * b * (xu @ s)
        delta = lin[out][None, :] - lin[u][:, None] - b * (2.0 - 2.0 * (xu[u] @ xu[out].T))
        i, j = np.unravel_index(np.argmax(delta), delta.shape)
        if delta[i, j] <= 1e-12 * max(1.0, abs(obj.value(u))):
            break
        inside[u[i]], inside[out[j]] = False, True
    return np.flatnonzero(inside)


def project_capped_simplex(y: np.ndarray, size: int) -> np.ndarray:
    """Euclidean projection on {0 <= p <= 1, sum p = S}: clip(y - t, 0, 1), t by bisection."""
    lo, hi = float(y.min()) - 1.0, float(y.max())
    for _ in range(100):
        t = 0.5 * (lo + hi)
        if np.clip(y - t, 0.0, 1.0).sum() > size:
            lo = t
        else:
            hi = t
    return np.clip(y - 0.5 * (lo + hi), 0.0, 1.0)


def continuous_pairwise(obj: PairwiseQuality, iterations: int = 100, lr: float = 0.5,
                        final_fraction: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """A numpy replica of the continuous learner's defaults (docs/method.md 6; settings.hpp:
    projected, normalised step, lr 0.5 falling linearly to 5%), on section 6's relaxation
    E[F] = a.p - b (||X^T p||^2 - sum p^2). Returns (final p, the best read-out seen)."""
    xu = obj.xu
    a, b = pairwise_coefficients(obj)
    size = obj.size
    p = np.full(obj.n, size / obj.n)
    best_u, best_f = None, -np.inf
    for t in range(iterations):
        s = xu.T @ p
        grad = a - 2.0 * b * (xu @ s - p)
        frac = t / max(iterations - 1, 1)
        step = lr * (1.0 - (1.0 - final_fraction) * frac)
        p = project_capped_simplex(p + step * grad / np.abs(grad).max(), size)
        u = np.sort(np.lexsort((np.arange(obj.n), -p))[:size])
        fu = obj.value(u)
        if fu > best_f:
            best_u, best_f = u, fu
    return p, best_u


# --------------------------------------------------------------------------------------------
# Facility location + quality: the Lagrangian dual (docs/method.md 7.2)


class DensePairs:
    """w_vs for every pair (n x n), rows v = reference items, columns s = candidates."""

    def __init__(self, w: np.ndarray, tile: int = 2048):
        self.w = w
        self.n = w.shape[0]
        self.tile = tile

    def colsum_relu(self, lam):
        out = np.zeros(self.n)
        for lo in range(0, self.n, self.tile):
            out += np.maximum(self.w[lo:lo + self.tile] - lam[lo:lo + self.tile, None], 0).sum(axis=0)
        return out

    def covered(self, lam, chosen):
        return (self.w[:, chosen] > lam[:, None]).sum(axis=1)

    def row_max(self, chosen):
        return np.maximum(self.w[:, chosen].max(axis=1), 0.0)

    def top_two(self, chosen):
        sub = np.maximum(self.w[:, chosen], 0.0)
        part = -np.partition(-sub, 1, axis=1)[:, :2] if sub.shape[1] >= 2 else np.c_[sub, np.zeros(self.n)]
        return part[:, 0], part[:, 1]

    def smooth(self, lam, tau, dual_weights=None):
        """sum_v tau softplus((w_vs - lambda_v) / tau) per s; with dual_weights (p over s),
        also sum_s p_s sigmoid((w_vs - lambda_v) / tau) per v."""
        col = np.zeros(self.n)
        row = np.zeros(self.n) if dual_weights is not None else None
        for lo in range(0, self.n, self.tile):
            z = (self.w[lo:lo + self.tile] - lam[lo:lo + self.tile, None]) / tau
            col += tau * np.logaddexp(0.0, z).sum(axis=0)
            if row is not None:
                row[lo:lo + self.tile] = expit(z) @ dual_weights
        return col, row

    def positive_pairs(self):
        v, s = np.nonzero(self.w > 0)
        return v, s, self.w[v, s]


class SparsePairs:
    """w_vs on a kNN graph: n x K entries (row v: v's neighbours), clamped at 0."""

    def __init__(self, ids: np.ndarray, w: np.ndarray):
        self.n, self.k = ids.shape
        self.rows = np.repeat(np.arange(self.n), self.k)
        self.cols = ids.ravel()
        self.vals = w.ravel()

    def colsum_relu(self, lam):
        return np.bincount(self.cols, weights=np.maximum(self.vals - lam[self.rows], 0), minlength=self.n)

    def covered(self, lam, chosen):
        inside = np.zeros(self.n, dtype=bool)
        inside[chosen] = True
        hit = inside[self.cols] & (self.vals > lam[self.rows])
        return np.bincount(self.rows[hit], minlength=self.n)

    def row_max(self, chosen):
        inside = np.zeros(self.n, dtype=bool)
        inside[chosen] = True
        return np.where(inside[self.cols], self.vals, 0.0).reshape(self.n, self.k).max(axis=1)

    def top_two(self, chosen):
        inside = np.zeros(self.n, dtype=bool)
        inside[chosen] = True
        m = np.where(inside[self.cols], self.vals, 0.0).reshape(self.n, self.k)
        part = -np.partition(-m, 1, axis=1)[:, :2]
        return part[:, 0], part[:, 1]

    def smooth(self, lam, tau, dual_weights=None):
        z = (self.vals - lam[self.rows]) / tau
        col = np.bincount(self.cols, weights=tau * np.logaddexp(0.0, z), minlength=self.n)
        row = None
        if dual_weights is not None:
            row = np.bincount(self.rows, weights=expit(z) * dual_weights[self.cols], minlength=self.n)
        return col, row

    def positive_pairs(self):
        keep = self.vals > 0
        return self.rows[keep], self.cols[keep], self.vals[keep]


@dataclass
class FacilityDual:
    """L(lambda) = sum lambda + (sum of the S largest b_s), b_s = a_s + sum_v max(0, w_vs - lambda_v),
    with w_vs = cd * sim(v, s) / n and a_s = cq * q_s / S."""

    pairs: DensePairs | SparsePairs
    a: np.ndarray
    size: int
    # a pass over the pairs for L, and for the subgradient's count: the dense count reads only the
    # S columns of the top set
    count_cost: float = 1.0

    @classmethod
    def of(cls, obj: FacilityQuality) -> "FacilityDual":
        c = obj.w.cd / obj.n
        a = obj.w.cq * obj.q / obj.size
        if isinstance(obj.kernel, DenseCosine):
            return cls(DensePairs(c * obj.kernel.sim), a, obj.size, obj.size / obj.n)
        return cls(SparsePairs(obj.kernel.ids, c * obj.kernel.clamped), a, obj.size, 1.0)

    def value(self, lam):
        b = self.a + self.pairs.colsum_relu(lam)
        chosen = top_set(b, self.size)
        return float(lam.sum() + b[chosen].sum()), chosen

    def subgradient(self, lam, chosen):
        """dL/dlambda_v = 1 - #{s in the top set: w_vs > lambda_v}, projected on lambda >= 0."""
        g = 1.0 - self.pairs.covered(lam, chosen)
        g[(lam <= 0) & (g > 0)] = 0.0
        return g

    def start(self, selection) -> np.ndarray:
        """lambda_v = what v gets from the selection: L is then f(U) + the S largest gains."""
        return self.pairs.row_max(np.asarray(selection))


def check_facility(obj: FacilityQuality, lam: np.ndarray) -> float:
    """The bound certified by lambda, recomputed from the data alone (valid for every lambda >= 0;
    negative entries are refused). Independent of `FacilityDual`: similarities recomputed from the
    kernel, b_s summed column by column."""
    lam = np.asarray(lam, dtype=np.float64)
    if lam.shape != (obj.n,) or not np.all(lam >= 0) or not np.all(np.isfinite(lam)):
        raise ValueError("a certificate is a finite lambda >= 0 per reference item")
    c = obj.w.cd / obj.n
    b = obj.w.cq * obj.q / obj.size
    if isinstance(obj.kernel, DenseCosine):
        xu = obj.kernel.xu
        for s in range(obj.n):
            b[s] += np.maximum(c * (xu @ xu[s]) - lam, 0.0).sum()
    else:
        kern = obj.kernel
        for v in range(obj.n):
            np.add.at(b, kern.ids[v], np.maximum(c * kern.clamped[v] - lam[v], 0.0))
    return float(lam.sum()) + top_sum(b, obj.size)


def _record(history, evals, passes, start, best):
    history.append(Step(evals, passes, time.perf_counter() - start, best))


def dual_polyak(dual: FacilityDual, lam0, target: float, iterations: int,
                adaptive: bool = False, patience: int = 5, deflection: float = 0.0) -> Run:
    """Projected subgradient with Polyak steps (L - level) / ||d||^2 along d. The level is f(U)
    (plain), or with `adaptive` max(f(U), best - delta): delta starts at best - f(U) and halves,
    with a restart at the best lambda, after `patience` evaluations without a new best (a
    variable-target Polyak rule). `deflection` beta: d = g + beta d_prev (a deflected subgradient,
    which damps the zigzag between the facets of L); 0: d = g."""
    lam = np.maximum(np.asarray(lam0, dtype=np.float64), 0.0)
    best, best_lam = np.inf, lam.copy()
    history: list[Step] = []
    start = time.perf_counter()
    passes = 0.0
    delta, stall, previous = None, 0, None
    for t in range(iterations):
        value, chosen = dual.value(lam)
        passes += 1.0
        if value < best:
            best, best_lam, stall = value, lam.copy(), 0
        else:
            stall += 1
        _record(history, t + 1, passes, start, best)
        level = target
        if adaptive:
            if delta is None:
                delta = best - target
            if stall >= patience:
                delta, stall, previous = delta / 2.0, 0, None
                lam = best_lam.copy()
                continue
            level = max(target, best - delta)
        g = dual.subgradient(lam, chosen)
        passes += dual.count_cost
        direction = g if previous is None or deflection == 0.0 else g + deflection * previous
        previous = direction
        norm2 = float(direction @ direction)
        if norm2 == 0.0 or value <= level:
            break  # lambda is optimal (0 is a subgradient), or the level is reached
        lam = np.maximum(lam - (value - level) / norm2 * direction, 0.0)
    return Run(best, best_lam, history)


def dual_block_coordinate(dual: FacilityDual, lam0, iterations: int, damping: float = 0.5) -> Run:
    """For the current top set T, every lambda_v moved towards the nearest minimiser of
    h_T(lambda) = sum lambda + sum_{s in T} b_s(lambda) (separable in v: any lambda_v between the
    second and the first largest w_vs over s in T), damped; L(lambda) = max_T h_T(lambda)."""
    lam = np.maximum(np.asarray(lam0, dtype=np.float64), 0.0)
    best, best_lam = np.inf, lam.copy()
    history: list[Step] = []
    start = time.perf_counter()
    passes = 0.0
    for t in range(iterations):
        value, chosen = dual.value(lam)
        passes += 1.0
        if value < best:
            best, best_lam = value, lam.copy()
        _record(history, t + 1, passes, start, best)
        first, second = dual.pairs.top_two(chosen)
        passes += dual.count_cost
        lam = lam + damping * (np.clip(lam, second, first) - lam)
    return Run(best, best_lam, history)


def smoothed_top_sum(b: np.ndarray, size: int, tau: float):
    """max_{p in P} b.p + tau H(p) = min_theta S theta + tau sum softplus((b - theta) / tau):
    (value, p). theta by bisection then Newton on sum sigmoid((b - theta) / tau) = S."""
    lo, hi = float(b.min()) - 50 * tau, float(b.max()) + 50 * tau
    for _ in range(60):
        theta = 0.5 * (lo + hi)
        if expit((b - theta) / tau).sum() > size:
            lo = theta
        else:
            hi = theta
    theta = 0.5 * (lo + hi)
    for _ in range(3):
        p = expit((b - theta) / tau)
        slope = (p * (1 - p)).sum() / tau
        if slope <= 0:
            break
        theta += (p.sum() - size) / slope
    p = expit((b - theta) / tau)
    value = size * theta + tau * np.logaddexp(0.0, (b - theta) / tau).sum()
    return float(value), p


def dual_smoothed(dual: FacilityDual, lam0, evaluations: int, tau0: float,
                  shrink: float = 0.1, stage_evals: int = 40) -> Run:
    """Entropy smoothing of both maxima (softplus for max(0, w - lambda), the entropy-regularised
    top-S sum), minimised by L-BFGS-B on lambda >= 0 with tau shrinking by `shrink` per stage;
    the exact L is evaluated at every point L-BFGS-B visits and the best is kept. L_tau >= L, so
    the smoothed value is itself valid, but only exact values are reported. Per evaluation: one
    pass for the smoothed value and one for its gradient, plus one for the exact L."""
    lam = np.maximum(np.asarray(lam0, dtype=np.float64), 0.0)
    state = {"best": np.inf, "lam": lam.copy(), "evals": 0, "passes": 0.0}
    history: list[Step] = []
    start = time.perf_counter()

    def fun(x, tau):
        value, _ = dual.value(x)
        state["evals"] += 1
        if value < state["best"]:
            state["best"], state["lam"] = value, x.copy()
        col, _ = dual.pairs.smooth(x, tau)
        top, p = smoothed_top_sum(dual.a + col, dual.size, tau)
        _, row = dual.pairs.smooth(x, tau, p)
        state["passes"] += 3.0
        _record(history, state["evals"], state["passes"], start, state["best"])
        return float(x.sum()) + top, 1.0 - row

    tau = tau0
    bounds = [(0.0, None)] * lam.size
    while state["evals"] < evaluations:
        budget = min(stage_evals, evaluations - state["evals"])
        res = optimize.minimize(fun, lam, args=(tau,), jac=True, method="L-BFGS-B", bounds=bounds,
                                options={"maxfun": budget, "maxiter": budget, "ftol": 0.0, "gtol": 0.0})
        lam = np.maximum(res.x, 0.0)
        tau *= shrink
    return Run(state["best"], state["lam"], history)


DUAL_METHODS = ("polyak", "polyak-level", "polyak-level-deflected", "block-coordinate", "smoothed")


def facility_bound(obj: FacilityQuality, selection, method: str, evaluations: int,
                   dual: FacilityDual | None = None, **options) -> Run:
    """The dual's bound from the selection's assignment by one of `DUAL_METHODS` within
    `evaluations` evaluations of L; `check_facility(obj, run.certificate)` recomputes it."""
    dual = dual or FacilityDual.of(obj)
    lam0 = dual.start(selection)
    target = obj.value(selection)
    if method == "polyak":
        run = dual_polyak(dual, lam0, target, evaluations)
    elif method == "polyak-level":
        run = dual_polyak(dual, lam0, target, evaluations, adaptive=True, **options)
    elif method == "polyak-level-deflected":
        # chosen on synth-2000-32 and digits (kNN, K = 32) among patience 2, 3, 5, 8 and
        # deflection 0, 0.3, 0.5, 0.7, 0.9 for the distance to the LP after 50 and 100 evaluations
        options.setdefault("deflection", 0.5)
        options.setdefault("patience", 3)
        run = dual_polyak(dual, lam0, target, evaluations, adaptive=True, **options)
    elif method == "block-coordinate":
        run = dual_block_coordinate(dual, lam0, evaluations, **options)
    elif method == "smoothed":
        gap = dual.value(lam0)[0] - target
        if gap <= 0:  # the start already proves U optimal
            return dual_polyak(dual, lam0, target, 1)
        # smoothing error about tau per active pair and per candidate near the threshold: start
        # at the starting gap spread over the items
        options.setdefault("tau0", gap / obj.n)
        run = dual_smoothed(dual, lam0, evaluations, **options)
    else:
        raise ValueError(f"unknown dual method {method!r}")
    return run


def facility_lp(obj: FacilityQuality, pairs=None) -> tuple[float, np.ndarray]:
    """The LP of docs/method.md 7.2 solved by HiGHS: max sum w_vs x_vs + sum a_s y_s subject to
    sum_s x_vs <= 1, x_vs <= y_s, 0 <= x, y <= 1, sum y = S, over the pairs with w_vs > 0 (the
    others may take x = 0 at no loss). `pairs` = (v, s, w) restricts the LP to those pairs (then
    a lower bound on the full LP). Returns (optimum, lambda = the duals of the cover rows)."""
    dual = FacilityDual.of(obj)
    v, s, w = pairs if pairs is not None else dual.pairs.positive_pairs()
    n, m = obj.n, w.size
    e = np.arange(m)
    cover = sparse.csr_matrix((np.ones(m), (v, e)), shape=(n, m + n))
    link = sparse.csr_matrix((np.r_[np.ones(m), -np.ones(m)], (np.r_[e, e], np.r_[e, m + s])),
                             shape=(m, m + n))
    a_ub = sparse.vstack([cover, link]).tocsc()
    b_ub = np.r_[np.ones(n), np.zeros(m)]
    a_eq = sparse.csr_matrix((np.ones(n), (np.zeros(n, dtype=int), m + np.arange(n))), shape=(1, m + n))
    res = optimize.linprog(-np.r_[w, dual.a], A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=[obj.size],
                           bounds=(0.0, 1.0), method="highs")
    if res.status != 0:
        raise RuntimeError(f"HiGHS: {res.message}")
    return -float(res.fun), np.maximum(-res.ineqlin.marginals[:n], 0.0)


def dense_lp_by_columns(obj: FacilityQuality, k0: int = 16, add: int = 16, rounds: int = 20,
                        tol: float = 1e-9) -> tuple[float, float, np.ndarray, int]:
    """The dense LP by column generation: the LP on a subset of pairs is a lower bound on the
    dense LP (fewer variables), and L_dense at its cover duals an upper bound; pairs with
    w_vs > lambda_v are added (at most `add` per row, the largest excess first) until the two meet.
    Returns (lower, upper, lambda, rounds used)."""
    assert isinstance(obj.kernel, DenseCosine)
    dual = FacilityDual.of(obj)
    w = dual.pairs.w
    n = obj.n
    order = np.argsort(-w, axis=1)[:, :k0]
    chosen = np.zeros((n, n), dtype=bool)
    np.put_along_axis(chosen, order, True, axis=1)
    chosen &= w > 0
    lower = upper = np.nan
    lam = np.zeros(n)
    for r in range(rounds):
        v, s = np.nonzero(chosen)
        lower, lam = facility_lp(obj, (v, s, w[v, s]))
        upper = dual.value(lam)[0]
        if upper - lower <= tol * max(1.0, abs(upper)):
            return lower, upper, lam, r + 1
        excess = np.where(chosen, -np.inf, w - lam[:, None])
        top = np.argsort(-excess, axis=1)[:, :add]
        new = np.take_along_axis(excess, top, axis=1) > 0
        rows = np.repeat(np.arange(n)[:, None], add, axis=1)
        chosen[rows[new], top[new]] = True
    return lower, upper, lam, rounds


# --------------------------------------------------------------------------------------------
# DiSF + quality (docs/method.md 7.3)


def disf_bound(obj: DisfQuality) -> float:
    """F_disf <= 0 for every set, so max f <= cq * (mean of the S best q) + cd * 0 (cd >= 0)."""
    if obj.w.cd < 0:
        raise ValueError("the bound needs a non-negative DiSF weight")
    return obj.w.cq * top_sum(obj.q, obj.size) / obj.size


# --------------------------------------------------------------------------------------------
# Exhaustive optimum (tests)


def exhaustive_optimum(obj: Objective) -> float:
    from itertools import combinations

    return max(obj.value(np.array(u)) for u in combinations(range(obj.n), obj.size))
