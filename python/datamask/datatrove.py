# SPDX-License-Identifier: Apache-2.0
"""DataTrove pipeline steps (``pip install datamask[datatrove]``): a selection as a global step of a
DataTrove pipeline, in the way its global steps pass files between stages.

1. :class:`WriteSelectionInputs` (N tasks, in the pipeline that reads and embeds documents): for
   each input file a task reads, that file's rows as three .npy files in ``folder`` (embeddings,
   quality scores, 64-bit ids): a shard of the corpus (:class:`datamask.Shards`).
2. :class:`PlanSelection` (1 task): the corpus-wide values every worker takes (:func:`datamask.plan`).
3. :class:`SelectShare` (M tasks): task ``rank`` of ``world_size`` runs its worker's share
   (``datamask.select(worker=(rank, world_size))``), reading the shards of its own groups, and
   writes its part.
4. :class:`MergeSelection` (1 task): the parts in rank order, checked, as one ids file.
5. :class:`SelectedFilter` (N tasks, a ``BaseFilter``): keeps the documents whose id was selected.

Each executor depends on the one before it. Every file a step writes appears whole or not at all
(written under a temporary name, then renamed), so a task that is run again after a failure starts
clean, and DataTrove's completion markers skip the tasks that finished (``skip_completed``). The
folders are local paths (a file system every task sees, as on a Slurm cluster). The shards are
named by their input files, so the corpus, and so the selection, does not depend on how many
tasks wrote it. See docs/datatrove.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.filters.base_filter import BaseFilter

import datamask
from datamask import _in_sorted
from datamask._shard_files import ShardWriter, shard_name, shards_in

__all__ = ["MergeSelection", "PlanSelection", "SelectShare", "SelectedFilter", "WriteSelectionInputs", "document_id",
           "shard_name", "shards_in"]

def document_id(doc: Document) -> int:
    """A document's id as the selection knows it: the first 8 bytes of BLAKE2b of ``doc.id``, an
    unsigned 64-bit integer (ids must be unique: over 10^9 documents, give ``id_of`` an integer
    id of your own; the selection refuses two equal ids, naming them)."""
    return int.from_bytes(hashlib.blake2b(doc.id.encode(), digest_size=8).digest(), "little")


def _values(docs: list, source: Union[str, Sequence[str], Callable], what: str) -> np.ndarray:
    """A batch's embeddings or scores: the callable's result, or each document's metadata values."""
    if callable(source):
        return np.asarray(source(docs))
    keys = [source] if isinstance(source, str) else list(source)
    try:
        values = [[doc.metadata[k] for k in keys] for doc in docs]
    except KeyError as e:
        raise datamask.InvalidInput(f"{what}: a document has no metadata {e} (document {docs[0].id!r}'s batch)") from None
    out = np.asarray(values, dtype=np.float64)
    return out[:, 0] if isinstance(source, str) else out  # one key: a vector (embeddings) or a score


class WriteSelectionInputs(PipelineStep):
    """Writes each document's (embedding, quality, id) row, per input file, as the selection reads
    them; passes the documents on unchanged.

    Args:
        folder: where the shards go (``NAME.embeddings.npy``, ``NAME.quality.npy``, ``NAME.ids.npy``,
            NAME from the input file's path: :func:`shard_name`).
        embed: a callable taking a list of documents and returning their embeddings (a b x d
            array: the embedding model), or a metadata key holding each document's vector.
        quality: a callable taking a list of documents and returning their scores (b, or b x k for
            k columns), or a metadata key, or a list of keys (one column each).
        id_of: a document's integer id (default :func:`document_id`); :class:`SelectedFilter` must
            use the same.
        batch_size: documents per call of ``embed`` and ``quality``.
        dtype: the embeddings' type on disk: "float32" or "float16" (half the bytes; the
            selection reads either).
    """

    name = "datamask inputs"
    type = "📐 - SELECTION"

    def __init__(self, folder: Union[str, os.PathLike], embed: Union[str, Callable], quality: Union[str, Sequence[str], Callable],
                 id_of: Callable[[Document], int] = document_id, batch_size: int = 256, dtype: str = "float32"):
        super().__init__()
        if np.dtype(dtype) not in (np.float32, np.float16):
            raise datamask.InvalidInput(f"dtype: expected float32 or float16, found {dtype!r}")
        self.folder, self.embed, self.quality, self.id_of = os.fspath(folder), embed, quality, id_of
        self.batch_size, self.dtype = int(batch_size), dtype

    def _write(self, batch: list, open_shard: dict, rank: int) -> None:
        """Appends a batch's rows to their input files' shards. A reader gives a task's files one
        after another, so a shard is finished when the next file's documents begin (a task
        holds one shard's three files open at a time)."""
        x = _values(batch, self.embed, "embed").astype(self.dtype)  # not finite after the cast: refused too
        q = _values(batch, self.quality, "quality").astype(np.float64)
        if x.ndim != 2 or len(x) != len(batch) or q.ndim not in (1, 2) or len(q) != len(batch):
            raise datamask.InvalidInput(f"embed/quality: {x.shape} embeddings and {q.shape} scores for {len(batch)} documents")
        if not (np.isfinite(x).all() and np.isfinite(q).all()):
            raise datamask.InvalidInput(f"embed/quality: a value that is not finite (in {self.dtype}) in the batch of "
                                        f"document {batch[0].id!r}")
        ids = [self.id_of(doc) for doc in batch]
        bad = next((i for i, v in enumerate(ids) if not (isinstance(v, (int, np.integer)) and 0 <= v < 2**64)), None)
        if bad is not None:
            raise datamask.InvalidInput(f"id_of: {ids[bad]!r} for document {batch[bad].id!r}; ids are integers in "
                                        "[0, 2^64)")
        ids = np.array(ids, dtype=np.uint64)
        sources = [doc.metadata.get("file_path", f"task-{rank:05d}") for doc in batch]
        for source in dict.fromkeys(sources):  # each input file's rows, in order
            rows = np.array([s == source for s in sources])
            if open_shard.get("source") != source:
                self._finish(open_shard)
                if source in open_shard["done"]:
                    raise datamask.InvalidInput(f"{source}: its documents came in two runs, apart; a shard is an input "
                                                "file's documents, given one after another (as DataTrove's readers do)")
                open_shard.update(source=source, writer=ShardWriter(self.folder, str(source)))
            open_shard["writer"].append(x[rows], q[rows], ids[rows])

    def _finish(self, open_shard: dict) -> None:
        if open_shard.get("source") is None:
            return
        self.stat_update("rows", value=open_shard["writer"].close())
        self.stat_update("shards")
        open_shard["done"].add(open_shard["source"])
        open_shard.update(source=None, writer=None)

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        os.makedirs(self.folder, exist_ok=True)
        open_shard: dict = {"source": None, "writer": None, "done": set()}
        batch = []
        for doc in data or ():
            batch.append(doc)
            if len(batch) == self.batch_size:
                with self.track_time("batch"):
                    self._write(batch, open_shard, rank)
                yield from batch
                batch = []
        if batch:
            self._write(batch, open_shard, rank)
            yield from batch
        self._finish(open_shard)


class PlanSelection(PipelineStep):
    """One task: the plan of the selection (:func:`datamask.plan`) of the corpus in ``folder``,
    saved as ``plan`` (a JSON file) for :class:`SelectShare`'s tasks. ``options``: those of
    :func:`datamask.select` (the same as SelectShare's)."""

    name = "datamask plan"
    type = "📐 - SELECTION"

    def __init__(self, folder: Union[str, os.PathLike], plan: Union[str, os.PathLike], **options: Any):
        super().__init__()
        self.folder, self.plan, self.options = os.fspath(folder), os.fspath(plan), options

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        if rank == 0:
            os.makedirs(os.path.dirname(os.path.abspath(self.plan)), exist_ok=True)
            datamask.plan(shards_in(self.folder), **self.options).save(self.plan)
        yield from data or ()


class SelectShare(PipelineStep):
    """Task ``rank`` of ``world_size``: the blocks worker ``rank`` runs of the selection of the
    corpus in ``folder`` (``datamask.select(worker=(rank, world_size), plan=...)``), reading the
    shards of its groups only. Writes ``parts/RANK.ids.npy`` (its selected ids, in block order) and
    ``parts/RANK.json`` (its count, world size, the plan's key, f of its blocks, seconds).

    Args:
        folder: the shards :class:`WriteSelectionInputs` wrote.
        parts: the folder of the parts.
        plan: the :class:`PlanSelection` file (needed with several tasks when the run prunes or
            calibrates over blocks; without it each task reads every score and id, warned).
        options: those of :func:`datamask.select` (ratio or count, objective, lam, block_size, ...).
    """

    name = "datamask select"
    type = "📐 - SELECTION"

    def __init__(self, folder: Union[str, os.PathLike], parts: Union[str, os.PathLike],
                 plan: Union[str, os.PathLike, None] = None, **options: Any):
        super().__init__()
        self.folder, self.parts = os.fspath(folder), os.fspath(parts)
        self.plan, self.options = None if plan is None else os.fspath(plan), options

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        plan = None if self.plan is None else datamask.Plan.load(self.plan)
        shards = shards_in(self.folder)
        with self.track_time("task"):
            sel = datamask.select(shards, worker=(rank, world_size), plan=plan, **self.options)
        os.makedirs(self.parts, exist_ok=True)
        base = os.path.join(self.parts, f"{rank:05d}")
        np.save(base + ".ids.tmp.npy", sel.ids)
        os.replace(base + ".ids.tmp.npy", base + ".ids.npy")
        summary = {"format": "datamask part", "version": datamask.__version__, "rank": rank, "world_size": world_size,
                   "plan": None if plan is None else plan.key, "shards": len(shards.embeddings), "count": len(sel),
                   "blocks": [b["block"] for b in sel.blocks], "objective": sel.objective.total,
                   "seconds": sel.seconds["total"]}
        with open(base + ".json.tmp", "w") as f:
            json.dump(summary, f)
        os.replace(base + ".json.tmp", base + ".json")
        self.stat_update("selected", value=len(sel))
        yield from data or ()


class MergeSelection(PipelineStep):
    """One task: the parts :class:`SelectShare` wrote, in rank order, as one ids file (``out``,
    .npy) and its summary (``out`` with .json). Refuses a missing part, parts of two world sizes
    or plans, and an id selected twice, writing nothing."""

    name = "datamask merge"
    type = "📐 - SELECTION"

    def __init__(self, parts: Union[str, os.PathLike], out: Union[str, os.PathLike]):
        super().__init__()
        self.parts, self.out = os.fspath(parts), os.fspath(out)

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        if rank == 0:
            merge_parts(self.parts, self.out)
        yield from data or ()


def merge_parts(parts: Union[str, os.PathLike], out: Union[str, os.PathLike]) -> np.ndarray:
    """:class:`MergeSelection`'s work, callable without DataTrove: returns the merged ids."""
    parts, out = os.fspath(parts), os.fspath(out)
    found = sorted(f for f in os.listdir(parts) if re.fullmatch(r"\d{5,}\.json", f)) if os.path.isdir(parts) else []
    if not found:
        raise datamask.InvalidInput(f"parts: no part (RANK.json) in {parts}; run SelectShare first")
    summaries = []
    for f in found:
        with open(os.path.join(parts, f)) as h:
            summaries.append(json.load(h))
    world = summaries[0]["world_size"]
    for s in summaries:
        for key in ("world_size", "plan", "shards"):
            if s[key] != summaries[0][key]:
                raise datamask.InvalidInput(f"parts: part {s['rank']} has {key} {s[key]!r}, part {summaries[0]['rank']} "
                                            f"{summaries[0][key]!r}: parts of two runs in {parts}")
    ranks = [s["rank"] for s in summaries]
    if ranks != list(range(world)):
        missing = sorted(set(range(world)) - set(ranks))
        raise datamask.InvalidInput(f"parts: {len(ranks)} parts of {world} in {parts}; missing ranks {missing[:10]}")
    ids = [np.load(os.path.join(parts, f"{r:05d}.ids.npy")) for r in range(world)]
    for r, (a, s) in enumerate(zip(ids, summaries)):
        if len(a) != s["count"]:
            raise datamask.InvalidInput(f"parts: part {r} holds {len(a)} ids, its summary says {s['count']}")
    kinds = {a.dtype for a in ids if len(a)}  # a part of no block may carry another integer type
    if len(kinds) > 1:
        raise datamask.InvalidInput(f"parts: ids of types {sorted(map(str, kinds))} in {parts}: parts of two runs")
    kind = kinds.pop() if kinds else ids[0].dtype
    merged = np.concatenate([a.astype(kind) for a in ids])
    if len(np.unique(merged)) != len(merged):
        raise datamask.InvalidInput(f"parts: an id is selected by two parts in {parts}")
    stem = out[:-4] if out.endswith(".npy") else out
    np.save(stem + ".tmp.npy", merged)
    with open(stem + ".json.tmp", "w") as h:
        json.dump({"format": "datamask selection", "version": datamask.__version__, "count": len(merged),
                   "world_size": world, "plan": summaries[0]["plan"], "parts": summaries}, h)
    os.replace(stem + ".json.tmp", stem + ".json")
    os.replace(stem + ".tmp.npy", stem + ".npy")
    return merged


class SelectedFilter(BaseFilter):
    """Keeps the documents whose id (``id_of``, as :class:`WriteSelectionInputs` computed it) is in
    the selection (:class:`MergeSelection`'s .npy file, read once per task: 8 bytes a selected id).
    Documents are matched in batches of ``batch_size``."""

    name = "datamask selected"

    def __init__(self, selection: Union[str, os.PathLike], id_of: Callable[[Document], int] = document_id,
                 exclusion_writer: Any = None, batch_size: int = 1024):
        super().__init__(exclusion_writer, batch_size)
        self.selection, self.id_of = os.fspath(selection), id_of
        self._wanted: Optional[np.ndarray] = None

    def _ids(self) -> np.ndarray:
        if self._wanted is None:
            self._wanted = np.sort(np.load(self.selection).astype(np.uint64))
        return self._wanted

    def filter_batch(self, batch: list) -> list:
        wanted = self._ids()
        ids = np.array([self.id_of(doc) for doc in batch], dtype=np.uint64)  # as the writer made them
        return _in_sorted(wanted, ids).tolist()

    def filter(self, doc: Document) -> bool:
        return self.filter_batch([doc])[0]
