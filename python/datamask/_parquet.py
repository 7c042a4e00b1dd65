# SPDX-License-Identifier: Apache-2.0
"""Parquet in and out, through pyarrow (``pip install datamask[parquet]``): a corpus read from
Parquet files (:func:`read_parquet`, or :func:`parquet_shards`, each file a shard read only by
the worker that runs it), and the selected documents written back (:func:`filter_parquet`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union

import numpy as np

from . import InvalidInput, Selection, _columns, _ids, _is_path


@dataclass(frozen=True)
class ParquetCorpus:
    """What :func:`read_parquet` returns: arguments for :func:`select` (``ids=corpus.ids``)."""

    embeddings: list  #: one 2-D array per record batch (shards), zero-copy where Arrow allows
    quality: list  #: one float64 array per quality column
    ids: Optional[np.ndarray]


def _embedding_chunk(chunk: Any, column: str) -> np.ndarray:
    import pyarrow as pa

    if chunk.null_count:
        raise InvalidInput(f"{column}: {chunk.null_count} rows are null")
    n = len(chunk)
    if pa.types.is_fixed_size_list(chunk.type):
        d = chunk.type.list_size
    elif pa.types.is_list(chunk.type) or pa.types.is_large_list(chunk.type):
        lengths = np.diff(np.asarray(chunk.offsets))
        if n and (lengths != lengths[0]).any():
            raise InvalidInput(f"{column}: rows have different lengths ({lengths.min()} to {lengths.max()})")
        d = int(lengths[0]) if n else 0
    else:
        raise InvalidInput(f"{column}: expected a list or fixed-size list of floats, found {chunk.type}")
    values = chunk.flatten()
    try:
        flat = values.to_numpy(zero_copy_only=True)
    except (pa.ArrowInvalid, NotImplementedError):
        flat = values.to_numpy(zero_copy_only=False)
    return flat.reshape(n, d)


def read_parquet(
    path: str,
    embedding_column: str = "feature_arr",
    quality_columns: Union[str, Sequence[str], None] = ("quality_score",),
    id_column: Optional[str] = "chunk_id",
) -> ParquetCorpus:
    """Reads a Parquet file (the DATAMASK script's layout by default) through pyarrow.

    List and fixed-size-list float columns become one n_i x d array per record batch, viewing
    Arrow's buffers without a copy when Arrow allows (float values, no nulls); float64 values
    are converted once by :func:`select`. Needs pyarrow (``pip install datamask[parquet]``).
    """
    _, pq = _pyarrow("read_parquet")
    if isinstance(quality_columns, str):
        quality_columns = [quality_columns]
    quality_columns = list(quality_columns or [])
    named = [("embedding_column", embedding_column)] + [("quality_columns", c) for c in quality_columns]
    named += [("id_column", id_column)] if id_column else []
    have = pq.ParquetDataset(path).schema.names  # a file or a folder of files, as read_table takes
    for keyword, column in named:
        if column not in have:
            raise InvalidInput(f"{keyword}: no column {column!r} in {path}; its columns: {', '.join(have)}")
    table = pq.read_table(path, columns=[column for _, column in named])
    emb = [_embedding_chunk(c, embedding_column) for c in table.column(embedding_column).chunks if len(c)]
    quality = [np.asarray(table.column(c).to_numpy(), dtype=np.float64) for c in quality_columns]
    ids = _ids(table.column(id_column).to_numpy(), id_column) if id_column else None
    return ParquetCorpus(embeddings=emb, quality=quality, ids=ids)


def _pyarrow(what: str):
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:
        raise ImportError(f"datamask.{what} needs pyarrow: pip install pyarrow") from e
    return pa, pq


@dataclass(frozen=True)
class ParquetShards:
    """What :func:`parquet_shards` returns: a corpus of Parquet files, each file a shard (as
    :class:`datamask.Shards`), its values read only when a call needs them."""

    files: tuple
    embedding_column: str
    quality_columns: tuple
    id_column: Optional[str]
    _shapes: dict = field(default_factory=dict, compare=False, repr=False)  # (rows, d) of the files read

    @property
    def embeddings(self) -> tuple:  # one entry per shard, as Shards has
        return self.files

    def _name(self, i: int) -> str:
        return self.files[i]

    def _file(self, i: int):
        _, pq = _pyarrow("parquet_shards")
        f = pq.ParquetFile(self.files[i])
        have = f.schema_arrow.names
        for keyword, column in ([("embedding_column", self.embedding_column)] +
                                [("quality_columns", c) for c in self.quality_columns] +
                                ([("id_column", self.id_column)] if self.id_column else [])):
            if column not in have:
                raise InvalidInput(f"{keyword}: no column {column!r} in {self.files[i]}; its columns: {', '.join(have)}")
        return f

    def _rows(self, i: int) -> tuple:
        """(rows, d) of file i from its footer; d of a list column (no size in the schema) is the
        first file's first row's, taken for every file (a file of another d is refused by the
        worker that reads it)."""
        if i not in self._shapes:
            pa, _ = _pyarrow("parquet_shards")
            f = self._file(i)
            if f.metadata.num_rows == 0:
                raise InvalidInput(f"{self.files[i]}: no rows; leave empty files out of the inputs")
            kind = f.schema_arrow.field(self.embedding_column).type
            if pa.types.is_fixed_size_list(kind):
                d = kind.list_size
            elif i > 0:
                d = self._rows(0)[1]
            else:
                first = next(f.iter_batches(batch_size=1, columns=[self.embedding_column]))
                d = _embedding_chunk(first.column(0), f"{self.files[i]}: {self.embedding_column}").shape[1]
            self._shapes[i] = (f.metadata.num_rows, d)
        return self._shapes[i]

    def _column(self, i: int, column: str):
        return self._file(i).read(columns=[column]).column(column)

    def _embeddings(self, i: int) -> np.ndarray:
        name = f"{self.files[i]}: {self.embedding_column}"
        parts = [_embedding_chunk(c, name) for c in self._column(i, self.embedding_column).chunks if len(c)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _quality(self, i: int) -> list:
        return _columns([self._column(i, c).to_numpy() for c in self.quality_columns]) if self.quality_columns else []

    def _ids(self, i: int) -> Optional[np.ndarray]:
        return None if not self.id_column else self._column(i, self.id_column).to_numpy()

    @property
    def ids(self) -> Optional[str]:  # whether ids are given, as Shards.ids says
        return self.id_column

    def _empty(self) -> tuple:  # as Shards._empty: the id type from the first file's schema
        ids = None
        if self.id_column:
            ids = self._file(0).schema_arrow.field(self.id_column).type.to_pandas_dtype()
            ids = np.zeros(0, ids)
        return [np.zeros(0)] * len(self.quality_columns), ids

    def _key(self) -> list:  # what a plan is made for: each file's shape, and the columns read
        return [[list(self._rows(i)) for i in range(len(self.files))],
                [self.embedding_column, list(self.quality_columns), self.id_column]]


def parquet_shards(
    inputs: Any,
    embedding_column: str = "feature_arr",
    quality_columns: Union[str, Sequence[str], None] = ("quality_score",),
    id_column: Optional[str] = "chunk_id",
) -> ParquetShards:
    """A corpus of Parquet files (a file, a folder's ``*.parquet`` in name order, or a list of
    either), each file one shard, for :func:`datamask.select` (``embeddings=``, with no ``quality``
    or ``ids``), :func:`datamask.plan` and :func:`datamask.evaluate`. Nothing is read here. A call
    with ``worker=(rank, world)`` and a plan reads every file's footer (row counts) and the files
    of its own groups; a call over the whole corpus (one process, :func:`datamask.plan`) reads
    every file's columns into memory. Embeddings: a list or fixed-size list of floats per row;
    each quality column one score per row; ids integers (the DATAMASK script's column names by
    default). Needs pyarrow."""
    _pyarrow("parquet_shards")
    if isinstance(quality_columns, str):
        quality_columns = [quality_columns]
    return ParquetShards(tuple(_parquet_files(inputs)), embedding_column, tuple(quality_columns or ()), id_column)


def parquet_to_shards(
    inputs: Any,
    folder: Union[str, os.PathLike],
    embedding_column: str = "feature_arr",
    quality_columns: Union[str, Sequence[str], None] = ("quality_score",),
    id_column: str = "chunk_id",
    worker: Optional[tuple] = None,
    batch_rows: int = 65536,
) -> list:
    """Writes each Parquet file of ``inputs`` as a shard of .npy files in ``folder`` (the form
    :class:`datamask.datatrove.WriteSelectionInputs` writes: :func:`datamask.shards_in` reads it,
    memory-mapped, and datamask-select reads its embedding files), one record batch at a time, so
    memory is a batch. ``worker=(rank, world)``: the files ``rank::world`` only, for a task array
    to convert a corpus together. Embeddings keep float16 (else become float32), scores float64
    (one column per quality column), ids their integer type. Returns the shards' names."""
    pa, pq = _pyarrow("parquet_to_shards")
    from ._shard_files import ShardWriter, shard_name

    rank, world = (0, 1) if worker is None else worker
    if isinstance(quality_columns, str):
        quality_columns = [quality_columns]
    source = ParquetShards(tuple(_parquet_files(inputs)), embedding_column, tuple(quality_columns or ()), id_column)
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    names = []
    for i in range(rank, len(source.files), world):
        f = source._file(i)
        path = os.path.abspath(source.files[i])
        writer = ShardWriter(folder, path)
        for batch in f.iter_batches(batch_size=batch_rows, columns=[embedding_column, *source.quality_columns, id_column]):
            x = _embedding_chunk(batch.column(0), f"{path}: {embedding_column}")
            k = len(source.quality_columns)
            cols = _columns([batch.column(1 + j).to_numpy() for j in range(k)]) if k else []
            q = cols[0] if k == 1 else np.column_stack(cols) if k else np.zeros((len(x), 0))
            writer.append(x, q, _ids(batch.column(1 + k).to_numpy(), f"{path}: {id_column}"))
        if writer.close() == 0:
            raise InvalidInput(f"{path}: no rows; leave empty files out of the inputs")
        names.append(shard_name(path))
    return names


def _parquet_files(inputs: Any) -> list:
    """Each input as given; a folder contributes its *.parquet files in name order."""
    paths = [inputs] if _is_path(inputs) else list(inputs)
    files = []
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".parquet") and not f.startswith("."))
        else:
            files.append(p)
    if not files:
        raise InvalidInput(f"inputs: no Parquet file in {inputs!r}")
    return files


def _same_kind(ids: np.ndarray, dtype: np.dtype) -> tuple:
    """``ids`` as ``dtype`` (int64 or uint64) without numpy's float comparison of mixed kinds, and
    which of them that type can hold (a negative id is no uint64 id, and so on)."""
    if ids.dtype.kind == np.dtype(dtype).kind:
        return ids.astype(dtype, copy=False), np.ones(len(ids), bool)
    valid = ids >= 0 if np.dtype(dtype).kind == "u" else ids <= np.iinfo(np.int64).max
    return np.where(valid, ids, 0).astype(dtype), valid


def filter_parquet(inputs: Any, selection: Any, out_dir: Union[str, os.PathLike], id_column: str = "chunk_id",
                   batch_rows: int = 65536) -> list:
    """Writes the selected documents: for each input Parquet file (or each ``*.parquet`` of a
    folder), its rows whose ``id_column`` is among the selection's ids, to a file of the same name
    in ``out_dir``, every column kept, in the input's order. One record batch at a time, so memory
    is the selection's ids (8 bytes each) and a batch, not the corpus. Each output is written under
    a temporary name and renamed; when the selection's ids are not each found exactly once across
    the inputs (an id in no input, or in two rows), nothing is left in ``out_dir`` and InvalidInput
    says how many. Needs pyarrow. Returns the paths written.

    Args:
        inputs: a Parquet file, a folder of them, or a list of either.
        selection: a :class:`Selection`, or an array of the selected ids.
        out_dir: the folder to write into (created); it may not hold an input.
        id_column: the column holding the ids the selection was made with.
    """
    pa, pq = _pyarrow("filter_parquet")
    files = _parquet_files(inputs)
    wanted = np.unique(np.asarray(selection.ids if isinstance(selection, Selection) else selection))
    if wanted.size and wanted.dtype.kind not in "iu":
        raise InvalidInput(f"selection: expected integer ids, found dtype '{wanted.dtype}'")
    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    outs = [os.path.join(out_dir, os.path.basename(f)) for f in files]
    if len(set(outs)) != len(outs):
        raise InvalidInput("inputs: two input files have one name; out_dir would hold one output for both")
    for f, o in zip(files, outs):
        if os.path.exists(o) and os.path.samefile(f, o):
            raise InvalidInput(f"out_dir: {o} is an input; writing it would replace the data this call reads")
    written, kept = [], 0
    try:
        for f, o in zip(files, outs):
            source = pq.ParquetFile(f)
            if id_column not in source.schema_arrow.names:
                raise InvalidInput(f"id_column: no column {id_column!r} in {f}; its columns: "
                                   f"{', '.join(source.schema_arrow.names)}")
            tmp = o + ".tmp"
            with pq.ParquetWriter(tmp, source.schema_arrow) as sink:
                for batch in source.iter_batches(batch_size=batch_rows):
                    ids = batch.column(id_column).to_numpy(zero_copy_only=False)
                    if ids.dtype.kind not in "iu":
                        raise InvalidInput(f"{f}: column {id_column!r} holds {ids.dtype}, not integer ids")
                    ids, valid = _same_kind(ids, wanted.dtype)
                    at = np.minimum(np.searchsorted(wanted, ids), max(wanted.size - 1, 0))
                    mask = (wanted[at] == ids) & valid if wanted.size else np.zeros(len(ids), bool)
                    kept += int(mask.sum())
                    sink.write_table(pa.Table.from_batches([batch]).filter(pa.array(mask)))
            os.replace(tmp, o)
            written.append(o)
        if kept != wanted.size:
            raise InvalidInput(f"selection: {wanted.size} ids selected, but {kept} rows of the inputs hold them: an id "
                               "is in no input or in two rows (other inputs than the selection's?)")
    except BaseException:
        for path in written + [o + ".tmp" for o in outs]:
            if os.path.exists(path):
                os.remove(path)
        raise
    return written
