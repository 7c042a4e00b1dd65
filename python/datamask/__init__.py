# SPDX-License-Identifier: Apache-2.0
"""datamask: select LLM pre-training data by quality and set-level diversity (DATAMASK).

The same selection as the C++ library and the datamask-select program: for the same inputs,
options and seed, :func:`select` returns the ids the program writes, in the program's order.

>>> import numpy as np, datamask
>>> x = np.random.default_rng(0).standard_normal((5000, 32), dtype=np.float32)
>>> q = np.random.default_rng(1).random(5000)
>>> sel = datamask.select(x, q, ratio=0.1, seed=1)
>>> len(sel.ids)
500

Every option of datamask-select that sets the selection is a keyword of :func:`select` and
:func:`evaluate`, with the program's default; :func:`options` lists them (keyword, default, range,
help), read from the library's settings table.
"""

from __future__ import annotations

import difflib
import hashlib
import inspect
import json
import os
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence, Union

# OpenMP's waiting threads sleep unless the user chose how they wait, as in datamask-select
# (datamask/core/wait_policy.hpp): under the default policy a thread that finishes a parallel region
# spins for the next one, and on a machine whose cores other work also uses, each join waits for
# a descheduled spinner (python/benchmarks/overhead.py beside one busy core of two: a demo call
# took 0.56 s under libgomp's default spinning, 0.17 s passive). The OpenMP runtime reads the
# policy once, when it loads: with _core, below, unless a library imported before datamask loaded
# it already (then set OMP_WAIT_POLICY yourself).
if not any(v in os.environ for v in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")):
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

import numpy as np  # noqa: E402  (after the wait policy: numpy may load an OpenMP runtime)

from . import _core  # noqa: E402
from ._core import Cancelled, InvalidInput  # noqa: E402

__all__ = [
    "Cancelled",
    "Certificate",
    "InvalidInput",
    "Metric",
    "Objective",
    "Option",
    "ParquetCorpus",
    "ParquetShards",
    "Plan",
    "ProgressEvent",
    "Selection",
    "Shards",
    "Term",
    "backend",
    "demo_corpus",
    "evaluate",
    "filter_parquet",
    "options",
    "parquet_shards",
    "parquet_to_shards",
    "plan",
    "read_parquet",
    "select",
    "shards_in",
]

__version__: str = _core.version

#: Where :func:`select` and :func:`evaluate` run, fixed when the module was built: ``"eigen"``
#: (the CPU), ``"cuda"`` (the GPU; needs a CUDA device at run time) or ``"thrust-omp"`` (the
#: Thrust backend on CPU threads, a test build). Chosen by the CMake option
#: ``DATAMASK_PYTHON_BACKEND`` (docs/python.md).
backend: str = _core.backend


@dataclass(frozen=True)
class Option:
    """One keyword of :func:`select`: its default, valid range or choices, and help."""

    keyword: str
    option: str  #: the datamask-select option it mirrors, e.g. "--active-fraction"
    default: Any
    range: str
    choices: tuple
    help: str
    continuous_only: bool  #: read by the continuous learner only
    pg_only: bool  #: read by the policy-gradient learner only


_TABLE = {
    e["keyword"]: Option(
        keyword=e["keyword"],
        option=e["option"],
        default=e["default"],
        range=e["range"],
        choices=tuple(e["choices"]),
        help=e["help"],
        continuous_only=e["continuous_only"],
        pg_only=e["pg_only"],
    )
    for e in _core.settings_table()
}
# Keywords that select() names in its signature (the rest come through **options).
_EXPLICIT = ("ratio", "count", "lam", "seed")


def options() -> dict:
    """Every keyword option of :func:`select`, by keyword (from the library's settings table).

    The program's own options that are not settings of the library are keywords too:
    ``objective``, ``objective_weights``, ``quality_weights``, ``optimizer`` and ``block_size``.
    """
    return dict(_TABLE)


@dataclass(frozen=True)
class Term:
    """One term of f: ``weight * raw / scale`` is its share of the total."""

    name: str
    raw: float
    scale: float
    weight: float
    #: calibration found the term constant up to rounding, so its scale is 1, not that noise
    constant: bool = False


@dataclass(frozen=True)
class Objective:
    """f on a selection: its total and its terms (quality, then each diversity objective)."""

    total: float
    terms: tuple

    def __getitem__(self, name: str) -> Term:
        for t in self.terms:
            if t.name == name:
                return t
        raise KeyError(name)


@dataclass(frozen=True)
class Certificate:
    """How far a selection can be from the best one (``select(certify=True)``; the library's
    ``datamask/objectives/certify.hpp``): ``bound`` >= the best f of the selection's size, ``gap`` =
    bound - f, ``certified_share`` = (f - mean f of random subsets) / (bound - that mean),
    ``method`` ("frank-wolfe", "lagrangian-dual", "top-S", joined by "+" for a mix; "none": no
    certificate, ``reason`` says why, and bound, gap, certified_share and random_mean are None),
    ``seconds`` (of which ``random_seconds`` for the random mean: the exact mean over every set
    of the selection's size, a closed form for quality, pairwise similarity and facility location)."""

    method: str
    bound: Optional[float]
    gap: Optional[float]
    certified_share: Optional[float]
    random_mean: Optional[float]
    seconds: float
    random_seconds: float  #: of ``seconds``, computing ``random_mean``
    reason: str = ""

    @property
    def certified(self) -> bool:
        return self.method != "none"


@dataclass(frozen=True)
class Selection:
    """What :func:`select` returns.

    ``ids``: the selected ids (int64; uint64 when the ``ids`` given were unsigned), block by
    block, each block in selection order (the order of datamask-select's ``--out``);
    ``objective``: f in total and per term, as in the program's report; ``history``: one dict
    per step or iteration (block, step, lr, reward_mean, reward_max, term_means); ``seconds``:
    optimize, evaluate and total wall time; ``blocks``: the report's blocks as datamask-select
    writes them, one dict each (block, items, kept, selected, optimizer: the one that ran on the
    block, steps_run, zero_variance_steps, nonfinite_steps, from_checkpoint, seconds, objective
    {total, terms {name: {raw, scale, weight, constant}}}; graph {neighbors, source, seconds,
    bytes} for a block whose facility term ran on a kNN graph; with ``certify=True``
    certificate, :class:`Certificate`'s fields); ``optimizer``: the optimizers the
    blocks ran (``auto`` resolved for each block: naive greedy where it costs less than the
    continuous learner), each once, joined by commas; ``certificate``: with ``certify=True``, the
    :class:`Certificate` of the whole selection (the blocks' numbers weighted by their share of
    the selection, as ``objective`` is), else None.
    """

    ids: np.ndarray
    objective: Objective
    history: list
    seconds: dict
    blocks: list
    optimizer: str
    prune_threshold: Optional[float]
    certificate: Optional[Certificate] = None

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class ProgressEvent:
    """What a progress callable receives after each step (pg), iteration (continuous) or pick
    (the greedy baselines), and about every 0.1 s while a block's kNN graph is built (unit "row":
    ``step`` and ``done`` are the block's rows compared so far, ``total`` its rows; the last
    event of a build has ``done == total``; a build shorter than 0.1 s sends none)."""

    block: int  #: 0-based block number
    blocks: int  #: blocks in the run
    step: int  #: 1-based step (or pick) within the block
    done: int  #: steps done over the run
    total: int  #: steps planned over the run
    value: float  #: the mean reward (pg) or the relaxed f (continuous) before the step; NaN for a pick or row
    unit: str = "step"  #: what `step`, `done` and `total` count: "step", "iteration", "pick", "row" or "unit" (iterations and picks)


def _objective(d: Mapping) -> Objective:
    return Objective(
        total=d["objective"],
        terms=tuple(Term(t["name"], t["raw"], t["scale"], t["weight"], t["constant"]) for t in d["terms"]),
    )


def _shards(embeddings: Any) -> list:
    """The embedding arrays as the core reads them: float32 or float16, C order, used as
    given; bfloat16 as its bits (a uint16 view, which the core reads as bfloat16); any other
    dtype or layout converted once to float32 (C order)."""
    if isinstance(embeddings, (list, tuple)) and embeddings and all(
        _is_path(a) or np.ndim(a) == 2 for a in embeddings
    ):
        arrays = [_load(a) for a in embeddings]
    else:
        arrays = [_load(embeddings)]
    out = [_shard_array(a, "embeddings" if len(arrays) == 1 else f"embeddings[{i}]") for i, a in enumerate(arrays)]
    _refuse_shared_shards([np.asarray(a) for a in arrays])
    return out


def _is_bfloat16(a: np.ndarray) -> bool:
    """Whether ``a`` holds bfloat16 values: NumPy has no bfloat16, and ml_dtypes' bfloat16 (and a
    .npy file of it, '<V2') is a 2-byte void dtype."""
    return a.dtype.kind == "V" and a.dtype.itemsize == 2 and a.dtype.names is None


def _bfloat16_as_float32(a: np.ndarray) -> np.ndarray:
    """bfloat16 values as float32, exactly: their bits are the top half of a float32's."""
    bits = np.ascontiguousarray(a).view("<u2")
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _shard_array(a: Any, name: str) -> np.ndarray:
    """One shard's embeddings as the core reads them (see :func:`_shards`); bfloat16 as a uint16
    view of its bits (no copy when C-contiguous), as stored."""
    a = np.asarray(a)
    if a.ndim != 2:
        raise InvalidInput(
            f"{name}: embeddings must be a 2-D array (n x d), found {a.ndim} "
            f"dimension{'' if a.ndim == 1 else 's'}"
        )
    if _is_bfloat16(a):
        return np.ascontiguousarray(a).view("<u2")
    if a.dtype.kind not in "fiu":
        raise InvalidInput(
            f"{name}: unsupported dtype '{a.dtype}' for embeddings; expected float32, float16 "
            "or bfloat16 (other real types are converted to float32)"
        )
    native = a.dtype.byteorder in "=|" or (a.dtype.byteorder == "<") == (sys.byteorder == "little")
    if not (a.dtype in (np.float32, np.float16) and native and a.flags.c_contiguous):
        a = np.ascontiguousarray(a, dtype=np.float32)
    return a


@dataclass(frozen=True)
class Shards:
    """A corpus kept as shards, each with its own embeddings, scores and ids (as a pipeline's
    tasks write them): pass it as ``embeddings`` to :func:`select`, :func:`plan` or
    :func:`evaluate`, without ``quality`` and ``ids``. Shard i is ``embeddings[i]`` (an n_i x d
    array or .npy path, memory-mapped), ``quality[i]`` (n_i scores, or n_i x k for k columns)
    and ``ids[i]`` (n_i integer ids). The corpus is the shards in order, as if concatenated; the
    layout groups consecutive shards (``block_size``), so with ``worker=`` a worker opens the
    shards of its groups only and reads no other shard's scores or ids.
    :func:`parquet_shards` gives the same for Parquet files."""

    embeddings: Sequence
    quality: Optional[Sequence] = None
    ids: Optional[Sequence] = None

    def __post_init__(self):
        n = len(self.embeddings)
        if n == 0:
            raise InvalidInput("Shards.embeddings: no shard given")
        for field in ("quality", "ids"):
            v = getattr(self, field)
            if v is not None and len(v) != n:
                raise InvalidInput(f"Shards.{field}: {len(v)} entries for {n} embedding shards; give one per shard")

    def _name(self, i: int) -> str:
        e = self.embeddings[i]
        return f"shard {i} ({os.fspath(e)})" if _is_path(e) else f"shard {i}"

    def _rows(self, i: int) -> tuple:  # (rows, cols) without reading values (a .npy file: its header)
        return tuple(np.shape(_load(self.embeddings[i])))

    def _embeddings(self, i: int) -> Any:
        return _load(self.embeddings[i])

    def _quality(self, i: int) -> list:
        return [] if self.quality is None else _columns(self.quality[i])

    def _ids(self, i: int) -> Optional[np.ndarray]:
        return None if self.ids is None else np.asarray(_load(self.ids[i]))

    def _empty(self) -> tuple:  # the window of a worker with no block: k empty columns, empty ids
        # of the corpus's id type (from the first shard's headers)
        columns = [] if self.quality is None else _columns(self.quality[0], slice(0))
        return columns, None if self.ids is None else np.asarray(_load(self.ids[0]))[:0]

    def _key(self) -> list:  # what a plan is made for: each shard's embedding shape and dtype (no
        # worker reads another's scores and ids), whether scores and ids are given
        def shape(a):
            a = _load(a)
            return list(np.shape(a)), str(getattr(a, "dtype", type(a).__name__))
        return [[shape(x) for x in self.embeddings], self.quality is None, self.ids is None]


def _sharded(source: Any, quality: Any, ids: Any, ids_name: str, rows: Optional[Callable]) -> tuple:
    """The core's corpus arguments of a :class:`Shards` (or :func:`parquet_shards`): the shards
    the window holds loaded, each other one as its shape alone (never read); the window's scores
    and ids gathered from its shards."""
    for name, given in (("quality", quality), (ids_name, ids)):
        if given is not None:
            raise InvalidInput(f"{name}: give it in the shards (Shards({name.replace('corpus_', '')}=...)), "
                               "not beside them")
    shapes = [source._rows(i) for i in range(len(source.embeddings))]
    for i, sh in enumerate(shapes):
        if len(sh) != 2:
            raise InvalidInput(f"{source._name(i)}: embeddings must be a 2-D array (n x d), found {len(sh)} dimensions")
    counts = [int(r) for r, _ in shapes]
    window = rows(counts) if rows else slice(None)
    first, last = (0, sum(counts)) if window == slice(None) else (window.start, window.stop)
    starts = np.concatenate([[0], np.cumsum(counts)])
    held = [first <= starts[i] and starts[i + 1] <= last for i in range(len(counts))]
    shards, given, columns, id_parts = [], [], [], []
    for i, keep in enumerate(held):
        if not keep:
            shards.append((counts[i], int(shapes[i][1])))
            continue
        given.append(source._embeddings(i))
        shards.append(_shard_array(given[-1], source._name(i)))
        cols = source._quality(i)
        if columns and len(cols) != len(columns[0]):
            raise InvalidInput(f"{source._name(i)}: {len(cols)} quality columns, but the first shard held has "
                               f"{len(columns[0])}")
        for j, c in enumerate(cols):
            if len(c) != counts[i]:
                raise InvalidInput(f"{source._name(i)}: quality column {j} has {len(c)} scores for {counts[i]} rows")
        columns.append(cols)
        part = source._ids(i)
        if part is not None and (part.ndim != 1 or len(part) != counts[i]):
            raise InvalidInput(f"{source._name(i)}: ids of shape {part.shape} for {counts[i]} rows; expected ({counts[i]},)")
        id_parts.append(part)
    _refuse_shared_shards([np.asarray(a) for a in given])  # as given, before any conversion
    if not columns:  # a worker with no block: its window is empty, the corpus's columns are not
        empty_columns, empty_ids = source._empty()
        columns, id_parts = [empty_columns], [empty_ids]
    quality_out = [np.ascontiguousarray(np.concatenate([c[j] for c in columns]), np.float64)
                   for j in range(len(columns[0]))]
    ids_out = None if id_parts[0] is None else _ids(np.concatenate(id_parts), ids_name)
    return shards, quality_out, ids_out


def _in_sorted(wanted: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Which of ``ids`` are in ``wanted`` (sorted, unique, of the same dtype): a binary search per
    id, so a selection is sorted once and matched a batch of documents at a time."""
    if not wanted.size:
        return np.zeros(len(ids), bool)
    return wanted[np.minimum(np.searchsorted(wanted, ids), wanted.size - 1)] == ids


def _is_path(a: Any) -> bool:
    return isinstance(a, (str, os.PathLike))


def _load(a: Any) -> Any:
    """A .npy file's path as its array, memory-mapped (its pages are read when used); anything
    else as it is."""
    return np.load(a, mmap_mode="r") if _is_path(a) else a


def _byte_span(a: np.ndarray) -> tuple:
    """The first and one-past-last byte address an array's elements can occupy."""
    lo = hi = a.__array_interface__["data"][0]
    for n, stride in zip(a.shape, a.strides):
        lo, hi = (lo + (n - 1) * stride, hi) if stride < 0 else (lo, hi + (n - 1) * stride)
    return lo, hi + a.itemsize


def _refuse_shared_shards(arrays: list) -> None:
    """Refuses two shards that share rows (the same array given twice, or overlapping views of one):
    each of those rows would be two items of the corpus, as datamask-select refuses a file given
    twice. The arrays as given, before any copy; a sweep over their byte spans, so only shards
    whose spans overlap are compared (np.shares_memory), not every pair of thousands of batches."""
    spans = sorted((*_byte_span(a), i) for i, a in enumerate(arrays) if a.size > 0)
    open_spans = []  # (end, index) of the spans begun and not yet passed
    for lo, hi, i in spans:
        open_spans = [(end, j) for end, j in open_spans if end > lo]
        for _, j in open_spans:
            a, b = arrays[min(i, j)], arrays[max(i, j)]
            if a.shape[1:] == b.shape[1:] and np.shares_memory(a, b):  # of another d: the core refuses it so
                raise InvalidInput(f"embeddings[{max(i, j)}]: shares its rows with embeddings[{min(i, j)}]: a shard "
                                   "given twice makes each of its rows two items of the corpus; give each once")
        open_spans.append((hi, i))


def _columns(quality: Any, rows: slice = slice(None)) -> list:
    """Quality as float64 columns, their `rows` only: None, one 1-D array, an n x k array, or a
    sequence of 1-D arrays (each may be a .npy file's path)."""
    if quality is None:
        return []
    if isinstance(quality, (list, tuple)) and quality and all(_is_path(q) or np.ndim(q) == 1 for q in quality):
        cols = [np.asarray(_load(q))[rows] for q in quality]
    else:
        q = np.asarray(_load(quality))[rows]
        if q.ndim == 1:
            cols = [q]
        elif q.ndim == 2:
            cols = [q[:, j] for j in range(q.shape[1])]
        else:
            raise InvalidInput(f"quality: expected one score per row (1-D, or n x k), found {q.ndim} dimensions")
    out = []
    for j, c in enumerate(cols):
        if _is_bfloat16(c):
            c = _bfloat16_as_float32(c)
        if c.dtype.kind not in "fiub":
            name = "quality" if len(cols) == 1 else f"quality[{j}]"
            raise InvalidInput(f"{name}: unsupported dtype '{c.dtype}' for quality scores; expected numbers")
        out.append(np.ascontiguousarray(c, dtype=np.float64))
    return out


def _ids(ids: Any, name: str = "ids", rows: slice = slice(None)) -> Optional[np.ndarray]:
    if ids is None:
        return None
    a = np.asarray(_load(ids))
    if a.ndim == 1:
        a = a[rows]
    if a.ndim != 1:
        raise InvalidInput(f"{name}: must be a 1-D array (one id per row)")
    if a.size and a.dtype.kind not in "iu":
        raise InvalidInput(f"{name}: expected integer ids, found dtype '{a.dtype}'")
    # Unsigned ids stay unsigned (hash ids use all 64 bits): the selection returns them as uint64,
    # as datamask-select writes a uint64 ids file's ids.
    return np.ascontiguousarray(a, dtype=np.uint64 if a.dtype.kind == "u" else np.int64)


def _fits_int64(a: np.ndarray, name: str) -> np.ndarray:
    """``a``, refused when it holds unsigned values beyond int64 (a cast would wrap them)."""
    if a.dtype.kind == "u" and a.size and int(a.max()) > np.iinfo(np.int64).max:
        raise InvalidInput(f"{name}: ids must fit in int64")
    return a


def _graph(graph: Any) -> Optional[tuple]:
    """``graph=(ids, sims)``: int64 neighbour ids and float64 similarities, C-contiguous (the core
    checks shapes and values)."""
    if graph is None:
        return None
    if not isinstance(graph, (tuple, list)) or len(graph) != 2:
        raise InvalidInput(f"graph: expected a pair (ids, sims) of n x K arrays, found {type(graph).__name__}")
    try:
        ids, sims = (np.asarray(a) for a in graph)
    except ValueError as e:  # ragged nested lists
        raise InvalidInput(f"graph: not a pair of n x K arrays ({e})") from None
    if ids.dtype.kind not in "iu":
        raise InvalidInput(f"graph ids: expected integer neighbour ids, found dtype '{ids.dtype}'")
    _fits_int64(ids, "graph ids")
    if sims.dtype.kind not in "fiu":
        raise InvalidInput(f"graph sims: expected real similarities, found dtype '{sims.dtype}'")
    # np.require keeps a 0-d array 0-d (ascontiguousarray makes it 1-d), so the core names its shape.
    return np.require(ids, np.int64, "C"), np.require(sims, np.float64, "C")


@dataclass(frozen=True)
class Metric:
    """A diversity metric of your own: a term of f beside (or instead of) the built-in ones,
    given in ``objective`` (a plain callable is taken as ``Metric(score=callable)``).

    ``score(x, subsets)``: ``x`` is the block's embeddings (n x d float32, read-only, valid only
    during the call), ``subsets`` a G x k int64 array of rows of ``x``; returns G values (larger
    is more diverse; a subset scores the same in any order). Called once per batch of subsets:
    the policy gradient's rollouts, a greedy round's candidate sets, the calibration, the final
    evaluation (G = 1). Vectorise it (numpy, torch): the run waits for it.

    ``relax(x, p, size)``: optional, for the continuous learner: a smooth F of the n
    probabilities ``p`` (summing to ``size``), equal to ``score`` at every 0/1 ``p`` of that
    size; returns ``(F, grad)``, grad its n partial derivatives. Without it the continuous
    learner cannot run this f ("auto" then takes stochastic greedy).

    ``name``: the term's name in the results (default: ``score.__name__``).

    A value that is not finite, or of the wrong shape, stops the run with InvalidInput naming
    the metric; an exception the metric raises stops it and propagates.
    """

    score: Callable[[np.ndarray, np.ndarray], Any]
    relax: Optional[Callable[[np.ndarray, np.ndarray, float], Any]] = None
    name: Optional[str] = None


def _checked_metric(m: Metric) -> tuple:
    """The metric as the core calls it: (name, score, relax or None), each checking what it returns."""
    label = m.name or getattr(m.score, "__name__", "metric")
    if label in ("pairwise", "facility", "disf", "quality"):
        raise InvalidInput(f"objective: a metric may not be named {label!r} (a built-in term's name)")

    def finite(v: np.ndarray, what: str) -> np.ndarray:
        bad = np.flatnonzero(~np.isfinite(v))
        if bad.size:
            raise InvalidInput(f"objective: {label} returned {v[bad[0]]} for {what} {bad[0]}; values must be finite")
        return v

    def score_checked(x: np.ndarray, subsets: np.ndarray) -> np.ndarray:
        v = np.asarray(m.score(x, subsets), dtype=np.float64)
        if v.shape != (len(subsets),):
            raise InvalidInput(f"objective: {label} returned shape {v.shape} for {len(subsets)} subsets; expected "
                               f"({len(subsets)},)")
        return np.ascontiguousarray(finite(v, "subset"))

    def relax_checked(x: np.ndarray, p: np.ndarray, size: float) -> tuple:
        out = m.relax(x, p, size)
        try:
            value, grad = out
        except (TypeError, ValueError):
            raise InvalidInput(f"objective: {label}'s relax returned {type(out).__name__}; expected (value, grad)") from None
        g = np.asarray(grad, dtype=np.float64)
        if g.shape != (len(p),):
            raise InvalidInput(f"objective: {label}'s relax returned a gradient of shape {g.shape}; expected ({len(p)},)")
        value = float(finite(np.asarray([value], dtype=np.float64), "value")[0])
        return value, np.ascontiguousarray(finite(g, "row"))

    return label, score_checked, relax_checked if m.relax is not None else None


def _objectives(objective: Any, weights: Optional[Sequence[float]]) -> tuple:
    """(the objective list, its weights) from ``objective`` and ``objective_weights``: each entry a
    built-in's name, or a metric as the core calls it (``_checked_metric``: a term of f of its
    own). The core parses the list with the weights, as datamask-select's ``--objective`` list."""
    one = isinstance(objective, str) or callable(objective) or isinstance(objective, Metric)
    if not one and not isinstance(objective, (list, tuple)):
        raise TypeError(f"objective: expected a name (pairwise, facility, disf), a callable, a datamask.Metric "
                        f"or a list of them, found {type(objective).__name__} {objective!r}")
    entries = []
    for e in [objective] if one else list(objective):
        if isinstance(e, str):
            entries.append(e)
            continue
        if not isinstance(e, Metric):
            if not callable(e):
                raise InvalidInput(f"objective: expected a name (pairwise, facility, disf), a callable or a "
                                   f"datamask.Metric, found {e!r}")
            e = Metric(score=e)
        entries.append(_checked_metric(e))
    return entries, ([] if weights is None else [float(w) for w in weights])


def _call(embeddings, quality, quality_weights, ids, ids_name, given, objective, objective_weights, optimizer,
          neighbors, graph, rows=None) -> tuple:
    """The core's arguments of a call, each checked and converted once: the corpus (shards,
    quality columns, their weights, ids, the shards' names in messages) and the request (options, objectives, their
    weights, optimizer, neighbors, graph). `rows`: a callable giving, from the shards, the rows
    (a slice) whose scores and ids are read (None: every row)."""
    opts = _options(given)
    weights = [float(w) for w in quality_weights] if quality_weights is not None else []
    if hasattr(embeddings, "_rows"):  # Shards, parquet_shards
        shards, columns, id_array = _sharded(embeddings, quality, ids, ids_name, rows)
        names = [embeddings._name(i) for i in range(len(shards))]
        corpus = (shards, columns, weights, id_array, names)
    else:
        shards = _shards(embeddings)
        window = rows([a.shape[0] for a in shards]) if rows else slice(None)
        corpus = (shards, _columns(quality, window), weights, _ids(ids, ids_name, window), [])
    return corpus, (opts, *_objectives(objective, objective_weights), optimizer or "auto", int(neighbors), _graph(graph))


@dataclass(frozen=True)
class Plan:
    """What every worker of a spread selection must agree on and cannot compute from its own rows
    (:func:`plan` computes it once; ``select(worker=(rank, world), plan=p)`` reads it): the prune
    threshold (a quantile of every row's combined score) and f's calibration (a sample drawn from
    every row), as ``datamask-select plan`` writes them for the program's shards. ``key`` names
    the inputs' shapes and the options it was made for: a worker of other inputs or options
    refuses it. :meth:`save` and :meth:`load` keep it in a JSON file (exact doubles)."""

    prune_threshold: Optional[float]
    calibration: tuple  #: (name, weight, scale, raw, constant) of each term; empty: each block calibrates itself
    key: str

    def save(self, path: Union[str, os.PathLike]) -> None:
        hexed = lambda v: None if v is None else float(v).hex()  # noqa: E731
        doc = {"format": "datamask plan", "version": __version__, "key": self.key,
               "prune_threshold": hexed(self.prune_threshold),
               "calibration": [[n, hexed(w), hexed(sc), hexed(r), c] for n, w, sc, r, c in self.calibration]}
        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, path)

    @staticmethod
    def load(path: Union[str, os.PathLike]) -> "Plan":
        with open(path) as f:
            doc = json.load(f)
        if not isinstance(doc, dict) or doc.get("format") != "datamask plan":
            raise InvalidInput(f"plan: {path} is not a plan saved by datamask.Plan.save")
        unhexed = lambda v: None if v is None else float.fromhex(v)  # noqa: E731
        return Plan(unhexed(doc["prune_threshold"]),
                    tuple((n, unhexed(w), unhexed(sc), unhexed(r), bool(c)) for n, w, sc, r, c in doc["calibration"]),
                    doc["key"])


# Keywords that do not change the selection: a plan serves calls that differ in them.
_NOT_SELECTION = ("threads", "facility_cache")


def _plan_key(embeddings, quality, ids, quality_weights, request, block_size) -> str:
    """The inputs' shapes and dtypes and everything that sets the selection (keywords, objectives
    (built-in names, metrics' names) and their weights, quality weights, optimizer, neighbors, block size),
    hashed: what a plan was made for. Read from the arrays as given (no conversion)."""
    def shape(a):
        a = _load(a)
        return list(np.shape(a)), str(np.asarray(a).dtype) if hasattr(a, "dtype") else type(a).__name__
    if hasattr(embeddings, "_key"):  # Shards, parquet_shards: each shard's
        arrays, q, ids = embeddings._key(), [], None
    else:
        arrays = embeddings if isinstance(embeddings, (list, tuple)) and embeddings and all(
            _is_path(a) or np.ndim(a) == 2 for a in embeddings) else [embeddings]
        arrays = [shape(a) for a in arrays]
        q = quality if isinstance(quality, (list, tuple)) else ([] if quality is None else [quality])
    opts, entries, weights, optimizer, neighbors, _ = request
    # f's terms: the built-ins in their order, then the metrics in theirs (wherever the list
    # puts them), so a list that differs only in where its metrics stand keys the same.
    given = list(weights) or [1.0] * len(entries)
    builtins = [(e, float(w)) for e, w in zip(entries, given) if isinstance(e, str)]
    metrics = [[e[0], float(w)] for e, w in zip(entries, given) if not isinstance(e, str)]
    plain = lambda v: float(v) if isinstance(v, (float, np.floating)) else int(v) if isinstance(  # noqa: E731
        v, (bool, int, np.integer)) else repr(v)
    text = json.dumps([__version__, arrays, [shape(c) for c in q],
                       None if ids is None else shape(ids),
                       sorted((k, plain(v)) for k, v in opts.items() if k not in _NOT_SELECTION),
                       [b for b, _ in builtins], [w for _, w in builtins] if weights else [], metrics or None,
                       None if quality_weights is None else [float(w) for w in quality_weights], optimizer,
                       int(neighbors), int(block_size)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _needs_plan(given: Mapping, lam: float, n: int, block_size: int, neighbors: int, graph: Any) -> bool:
    """Whether a spread selection needs values of the whole corpus (datamask-select's rule): a
    prune threshold, or f calibrated once over several blocks."""
    calibrated = given.get("scaling") in (None, "calibrated") and given.get("scales") is None
    return (given.get("prune") or 0) > 0 or (n > block_size and calibrated and lam < 1 and not neighbors and graph is None)


def _options(given: Mapping) -> dict:
    """The keywords given, checked against the table (the core checks them together)."""
    out = {}
    for k, v in given.items():
        if k not in _TABLE:
            near = difflib.get_close_matches(k, list(_TABLE) + ["objective", "objective_weights", "quality_weights", "optimizer", "block_size", "neighbors", "graph", "certify"])
            hint = f"; did you mean {near[0]!r}?" if near else "; datamask.options() lists them"
            raise TypeError(f"datamask: unknown option {k!r}{hint}")
        if v is None:
            continue
        if k == "scales":
            v = [float(x) for x in np.atleast_1d(v)]
        out[k] = v
    return out


class _Progress:
    """Turns the core's step events into a tqdm bar, a plain line, or calls of a callable."""

    def __init__(self, progress: Union[bool, Callable[[ProgressEvent], Any]]):
        self.callback = progress if callable(progress) else None
        self.bar = None
        self.plain = False
        self.next = 0.1
        self.t0 = time.monotonic()
        self.graph_t0: Optional[float] = None  # a kNN graph's build under way since
        self.graph_next = 0.1
        self.graph_bar = None
        if progress is True:
            try:
                from tqdm.auto import tqdm  # optional

                self.tqdm = tqdm
            except ImportError:
                self.tqdm = None
                self.plain = True
        else:
            self.tqdm = None

    def __call__(self, block: int, blocks: int, step: int, done: int, total: int, value: float, unit: str) -> None:
        if self.callback is not None:
            self.callback(ProgressEvent(block, blocks, step, done, total, value, unit))
            return
        if unit == "row":
            self.graph(block, blocks, done, total)
            return
        if self.tqdm is not None:
            if self.bar is None:
                self.bar = self.tqdm(total=total, unit=unit, desc="datamask")
            self.bar.set_postfix_str(f"block {block + 1}/{blocks}", refresh=False)
            self.bar.update(1)
            return
        if self.plain and total > 0:
            frac = done / total
            if frac >= self.next or done == total:
                while self.next <= frac:
                    self.next += 0.1
                rate = done / max(time.monotonic() - self.t0, 1e-9)  # graph builds left out
                print(
                    f"datamask: {done}/{total} {unit}s ({100 * frac:.0f}%), block {block + 1}/{blocks}, "
                    f"{rate:.1f} {unit}s/s",
                    file=sys.stderr,
                    flush=True,
                )

    def graph(self, block: int, blocks: int, done: int, total: int) -> None:
        """A block's kNN graph: its own bar or lines; its time stays out of the steps' rate."""
        now = time.monotonic()
        if self.graph_t0 is None:
            self.graph_t0, self.graph_next = now, 0.1
        if self.tqdm is not None:
            if self.graph_bar is None:
                self.graph_bar = self.tqdm(total=total, unit="row", desc=f"kNN graph, block {block + 1}/{blocks}")
            self.graph_bar.update(done - self.graph_bar.n)
        elif self.plain and done / total >= self.graph_next:
            while self.graph_next <= done / total:
                self.graph_next += 0.1
            print(f"datamask: kNN graph of block {block + 1}/{blocks}: {done}/{total} rows ({100 * done / total:.0f}%)",
                  file=sys.stderr, flush=True)
        if done == total:
            self.t0 += now - self.graph_t0
            self.graph_t0 = None
            if self.graph_bar is not None:
                self.graph_bar.close()
                self.graph_bar = None

    def close(self) -> None:
        for bar in (self.bar, self.graph_bar):
            if bar is not None:
                bar.close()


def select(
    embeddings: Any,
    quality: Any = None,
    *,
    ratio: Optional[float] = None,
    count: Optional[int] = None,
    objective: Any = "pairwise",
    lam: float = _TABLE["lam"].default,
    optimizer: Optional[str] = None,
    seed: Optional[int] = None,
    ids: Any = None,
    progress: Union[bool, Callable[[ProgressEvent], Any]] = False,
    objective_weights: Optional[Sequence[float]] = None,
    quality_weights: Optional[Sequence[float]] = None,
    block_size: int = _core.default_block_size,
    neighbors: int = 0,
    graph: Any = None,
    cancel: Any = None,
    certify: bool = False,
    worker: Optional[tuple] = None,
    plan: Optional[Plan] = None,
    **options: Any,
) -> Selection:
    """Selects round(ratio * n) (or ``count``) items maximising quality + set-level diversity.

    Args:
        embeddings: an n x d array, or a sequence of 2-D arrays read as shards of one corpus (in
            order). float32 and float16 C-contiguous arrays are read without a copy; any other
            real dtype or layout is converted once to float32.
        quality: quality scores: a 1-D array of n, an n x k array, or a sequence of 1-D arrays
            (k columns, each weighted by ``quality_weights``); converted to float64. Required
            unless ``lam`` is 0.
        ratio: fraction of items to select (default 0.1); ``count`` selects exactly that many.
        objective: "pairwise", "facility", "disf", or a sequence of them (each a separately
            scaled term, weighted by ``objective_weights``); entries may be diversity metrics
            of your own (:class:`Metric`, or a callable scoring a batch of subsets), each a
            term of its own.
        lam: weight of quality against diversity (1: top by quality, 0: diversity only).
        optimizer: "auto" (default: "lazy" when facility location is the only objective, else
            "continuous" when every objective has a relaxation, except on a block where naive
            greedy costs no more operations than the continuous learner, two ascents ("greedy"
            there: the same rule as datamask-select's, see its --help), else "stochastic":
            dense facility location in a mix), "continuous", "pg", or the greedy baselines
            "greedy", "lazy", "stochastic".
        seed: random seed (None: the default, 0); the same seed gives the same selection on any
            thread count. Refused, as datamask-select's --seed, where the run draws nothing (a
            greedy baseline on raw or fixed scales).
        ids: one unique integer id per row (default: the row numbers); blocks are assigned by a
            hash of the id, and ``Selection.ids`` reports these ids: uint64 for unsigned ids
            (values up to 2^64 - 1), else int64.
        progress: True for a tqdm bar (a plain line on stderr without tqdm), or a callable that
            receives a :class:`ProgressEvent` after each step, iteration or greedy pick, and
            while a kNN graph is built (unit "row"); an exception it raises stops the run and
            propagates.
        block_size: items per block: consecutive shards of ``embeddings`` are grouped to at
            least this many rows, each group split into blocks by a hash of the id (the layout
            of datamask-select; one array: the corpus split by id hash).
        neighbors: K > 0: facility location on each block's K-nearest-neighbour graph under
            ``kernel`` (memory n K; it has a relaxation, so "auto" takes the continuous learner)
            instead of dense facility location; 0 (default): dense. The graph is exact, or
            clustered (approximate) for blocks above 50,000 items: ``knn_build``,
            ``knn_clusters`` and ``knn_probes`` choose.
        graph: ``(ids, sims)``, facility location on a kNN graph the caller built (with faiss,
            say) instead of one built here: two n x K arrays, integer neighbour ids (rows of
            the corpus, 0 to n - 1, not ``ids``) and real similarities, each row's K neighbours
            in any order (rows are sorted here; list the item itself, whose similarity is 1
            under cosine kernels). Needs the corpus in one block (``block_size`` >= n) and a
            facility term; not with ``neighbors``. Bad graphs (ids out of range or repeated in
            a row, non-finite similarities, other shapes) raise InvalidInput naming the array
            and the entry.
        cancel: a :class:`threading.Event` (any object with ``is_set()``); setting it, from any
            thread, stops the run within about a second and raises :class:`Cancelled`. Ctrl-C
            stops only a call on the main thread; a call on another thread stops through this.
        certify: after each block's selection, prove an upper bound on the best f of its size
            in the block and report it (``Selection.certificate``, and per block), as
            datamask-select's ``--certify``. Off by default: on real data it took 1% to 19% of
            the optimising time for pairwise similarity, 10% to 257% for facility location on a
            kNN graph, 31% to 594% dense (benchmarks/RESULTS.md, "The certificate's cost on real
            data"). DiSF has no bound: method "none". Its budget: the options ``certify_steps`` and ``certify_memory`` (the
            program's ``--certify-steps`` and ``--certify-memory``), refused without it.
        worker: ``(rank, world_size)``: run only the blocks worker ``rank`` of ``world_size`` runs
            (a DataTrove or NeMo Curator task, a Slurm array task), as datamask-select's
            ``--shard rank/world_size``: consecutive blocks of the layout of ``embeddings``'
            shards (consecutive shards grouped to at least ``block_size`` rows, each group's
            blocks drawn by id hash), so the worker reads its shards and its rows of ``quality``
            and ``ids`` only. Give them as .npy paths (memory-mapped) or memory-mapped arrays to
            read no more. The workers' ``Selection.ids``, concatenated in rank order, are the
            one-process selection's, in order.
        plan: with ``worker``: the :class:`Plan` of the corpus (:func:`plan`, once, with the same
            inputs and options), whose prune threshold and calibration every worker takes.
            Without it a worker reads every row's scores and ids to compute them (warned).
        **options: every other option of datamask-select with its default; see :func:`options`.

    Returns:
        the :class:`Selection` (with ``worker``: of the worker's blocks).

    Raises:
        InvalidInput: (a ValueError) for bad input or options, naming the argument.
        KeyboardInterrupt: on Ctrl-C (when the main thread runs the call), within about a
            second; nothing is returned.
        Cancelled: when ``cancel`` was set, within about a second; nothing is returned.
    """
    if cancel is not None and not callable(getattr(cancel, "is_set", None)):
        raise TypeError(f"cancel: expected a threading.Event (an object with is_set()), found {cancel!r}")
    if not (isinstance(progress, bool) or callable(progress)):
        raise TypeError(f"progress: expected True, False or a callable taking a datamask.ProgressEvent, found "
                        f"{type(progress).__name__} {progress!r}")
    given = dict(options, ratio=ratio, count=count, lam=lam, seed=seed)
    rank, world = _worker(worker)
    if plan is not None and not isinstance(plan, Plan):
        raise TypeError(f"plan: expected a datamask.Plan (datamask.plan(...) or Plan.load), found {type(plan).__name__}")
    share = [rank, world, 0, -1]

    def rows(counts):  # the worker's groups' rows: from the layout of the shards (their row counts)
        if world == 1:
            return slice(None)
        if plan is None and _needs_plan(given, lam, sum(counts), int(block_size), neighbors, graph):
            warnings.warn(f"worker={worker}: without plan= this worker reads every row's scores and ids for the "
                          "corpus-wide values (prune threshold, calibration); make datamask.plan(...) once and pass "
                          "it to every worker to read its own rows only", stacklevel=3)
            return slice(None)
        share[2:] = _core.worker_rows(counts, int(block_size), rank, world)
        return slice(*share[2:])

    corpus, request = _call(embeddings, quality, quality_weights, ids, "ids", given, objective, objective_weights,
                            optimizer, neighbors, graph, rows)
    if plan is not None and plan.key != _plan_key(embeddings, quality, ids, quality_weights, request, block_size):
        raise InvalidInput("plan: made for other inputs or options than this call's (their shapes, dtypes, "
                           "keywords or block_size differ); make it with the same ones")
    given_plan = None if plan is None else (plan.prune_threshold, list(plan.calibration))
    sink = _Progress(progress) if progress else None
    try:
        out = _core.select(corpus, request, int(block_size), bool(certify), sink, cancel, tuple(share), given_plan)
    finally:
        if sink is not None:
            sink.close()
    objective = _objective(out)
    for b in out["blocks"]:  # as datamask-select warns of a clustered graph that misses many neighbours
        recall = (b.get("graph") or {}).get("recall")
        if recall is not None and recall < _core.low_knn_recall:
            warnings.warn(
                f"the clustered kNN graph of block {b['block']} finds {100 * recall:.0f}% of each item's "
                f"{b['graph']['neighbors']} nearest neighbours (estimated); facility location on it misses the "
                "rest. Raise knn_probes (clusters compared per cluster) or give knn_build=\"exact\" (slower)",
                stacklevel=2,
            )
    choice = any(0 < b["selected"] < b["items"] for b in out["blocks"])  # every item selected: none
    for t in objective.terms:
        if t.constant and choice:  # as datamask-select warns
            warnings.warn(
                f"the {t.name} term is constant on the calibration subsets (its std is 0 or rounding "
                "noise); its scale is 1, so it weighs nothing in the choice",
                stacklevel=2,
            )
    return Selection(
        ids=out["ids"],
        objective=objective,
        history=out["history"],
        seconds=out["seconds"],
        blocks=out["blocks"],
        optimizer=out["optimizer"],
        prune_threshold=out["prune_threshold"],
        certificate=Certificate(**out["certificate"]) if out["certificate"] is not None else None,
    )


def _worker(worker: Any) -> tuple:
    """(rank, world size) of ``worker=`` (None: (0, 1))."""
    if worker is None:
        return 0, 1
    if not (isinstance(worker, (tuple, list)) and len(worker) == 2 and all(isinstance(v, (int, np.integer)) for v in worker)):
        raise TypeError(f"worker: expected (rank, world_size), two integers, found {worker!r}")
    rank, world = int(worker[0]), int(worker[1])
    if not (world >= 1 and 0 <= rank < world):
        raise InvalidInput(f"worker: ({rank}, {world}): needs world_size >= 1 and 0 <= rank < world_size")
    return rank, world


def plan(embeddings: Any, quality: Any = None, **keywords: Any) -> Plan:
    """The :class:`Plan` of a spread selection: the corpus-wide values (prune threshold,
    calibration of f) that ``select(worker=..., plan=...)`` takes, computed once from every row's
    scores and ids and the calibration sample's rows (as ``datamask-select plan``). ``keywords``:
    those the workers' :func:`select` calls give (the same meanings and defaults), less the ones
    of a call's own running (progress, cancel, certify, worker, plan)."""
    for k in ("progress", "cancel", "certify", "worker", "plan"):
        if k in keywords:
            raise TypeError(f"datamask.plan: takes no {k!r} (a select() call's own, not the plan's)")
    bound = inspect.signature(select).bind(embeddings, quality, **keywords)
    bound.apply_defaults()  # select's defaults: one home
    v = bound.arguments
    given = dict(v["options"], ratio=v["ratio"], count=v["count"], lam=v["lam"], seed=v["seed"])
    corpus, request = _call(embeddings, quality, v["quality_weights"], v["ids"], "ids", given, v["objective"],
                            v["objective_weights"], v["optimizer"], v["neighbors"], v["graph"])
    out = _core.plan(corpus, request, int(v["block_size"]))
    calibration = tuple((t["name"], t["weight"], t["scale"], t["raw"], t["constant"]) for t in out["calibration"])
    return Plan(out["prune_threshold"], calibration,
                _plan_key(embeddings, quality, v["ids"], v["quality_weights"], request, v["block_size"]))


def evaluate(
    embeddings: Any,
    quality: Any,
    ids: Any,
    *,
    corpus_ids: Any = None,
    objective: Any = "pairwise",
    lam: float = _TABLE["lam"].default,
    optimizer: Optional[str] = None,
    seed: Optional[int] = None,
    objective_weights: Optional[Sequence[float]] = None,
    quality_weights: Optional[Sequence[float]] = None,
    neighbors: int = 0,
    graph: Any = None,
    **options: Any,
) -> Objective:
    """f and its terms on any subset of the corpus (the whole corpus as one block).

    ``ids`` names the subset by id (``corpus_ids``, or the row numbers when it is None). The
    scales are those a selection of that size would use: with the options of a one-block
    :func:`select` call and its ids, the result is that selection's objective. A selection of
    several blocks (n > ``block_size``) is scored block by block, each block's f on its own
    items (``Selection.objective`` weighs the blocks' terms by their share of the selection);
    evaluating its ids here scores them as one block of the whole corpus, which gives another f.
    ``neighbors`` builds the kNN graph of facility location again on every call; ``graph``
    (as in :func:`select`) scores on a graph the caller keeps.
    """
    for k, why in _NOT_EVALUATE.items():
        if k in options:
            raise TypeError(f"datamask.evaluate: takes no {k!r}: {why}")
    corpus, request = _call(embeddings, quality, quality_weights, corpus_ids, "corpus_ids", dict(options, lam=lam, seed=seed),
                            objective, objective_weights, optimizer, neighbors, graph)
    return _objective(_core.evaluate(corpus, request, _ids(ids, "ids")))


# select()'s arguments that evaluate() does not take, and why (a close match of a name it does not
# take would otherwise be suggested for the name itself).
_NOT_EVALUATE = {
    "block_size": "it scores the subset as one block of the whole corpus (a block's f is of its own items); "
                  "a selection of several blocks has its f in Selection.objective",
    "certify": "a certificate bounds the best subset of a size, which select(certify=True) reports",
    "progress": "it optimises nothing; it evaluates f once",
    "cancel": "it optimises nothing; it evaluates f once",
}


def demo_corpus(seed: int = 0) -> tuple:
    """The corpus of ``datamask-select --demo``: (embeddings float32 20000 x 32, quality)."""
    return _core.demo_corpus(seed)


# Parquet in and out (needs pyarrow): datamask/_parquet.py.
from ._parquet import ParquetCorpus, ParquetShards, filter_parquet, parquet_shards, parquet_to_shards, read_parquet  # noqa: E402
# A corpus on disk as .npy shards with their scores and ids: datamask/_shard_files.py.
from ._shard_files import shards_in  # noqa: E402
