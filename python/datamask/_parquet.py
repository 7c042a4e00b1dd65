# SPDX-License-Identifier: Apache-2.0
"""Parquet in and out, through pyarrow (``pip install datamask[parquet]``): a corpus read from
Parquet files (:func:`read_parquet`, or :func:`parquet_shards`, each file a shard read only by
the worker that runs it), and the selected documents written back (:func:`filter_parquet`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union

import numpy as np

from . import InvalidInput, Selection, _columns, _ids, _in_sorted, _is_path


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


def _embedding_names(embedding_column: Union[str, Sequence[str]]) -> list:
    """The embedding's columns: one list column, or one float column per dimension."""
    return [embedding_column] if isinstance(embedding_column, str) else list(embedding_column)


def _embedding_rows(table: Any, columns: list, name: str) -> np.ndarray:
    """n x d embeddings of a table or record batch: a list column's rows (each chunk viewed
    without a copy where Arrow allows, then joined), or one float column per dimension stacked."""
    if len(columns) == 1:
        col = table.column(columns[0])
        parts = [_embedding_chunk(c, f"{name}: {columns[0]}") for c in getattr(col, "chunks", [col]) if len(c)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)
    stacked = []
    for c in columns:
        v = table.column(c)
        if v.null_count:
            raise InvalidInput(f"{name}: column {c!r} has {v.null_count} null rows")
        a = np.asarray(v.to_numpy())
        if a.dtype.kind != "f":
            raise InvalidInput(f"{name}: column {c!r} holds {a.dtype}; an embedding column holds floats")
        stacked.append(a)
    return np.column_stack(stacked)


def _score_columns(table: Any, columns: Sequence[str]) -> list:
    """The quality columns of a table or record batch, float64."""
    return _columns([table.column(c).to_numpy() for c in columns]) if columns else []


def read_parquet(
    path: str,
    embedding_column: Union[str, Sequence[str]] = "feature_arr",
    quality_columns: Union[str, Sequence[str], None] = ("quality_score",),
    id_column: Optional[str] = "chunk_id",
) -> ParquetCorpus:
    """Reads a Parquet file (the DATAMASK script's layout by default) through pyarrow.

    List and fixed-size-list float columns become one n_i x d array per record batch, viewing
    Arrow's buffers without a copy when Arrow allows (float values, no nulls); a list of column
    names is one float column per dimension, stacked into one array. float64 values are
    converted once by :func:`select`. Needs pyarrow (``pip install datamask[parquet]``).
    """
    _, pq = _pyarrow("read_parquet")
    if isinstance(quality_columns, str):
        quality_columns = [quality_columns]
    quality_columns = list(quality_columns or [])
    embedding = _embedding_names(embedding_column)
    _check_columns(pq.ParquetDataset(path).schema.names, path, embedding, quality_columns, id_column)
    table = pq.read_table(path, columns=[*embedding, *quality_columns, *([id_column] if id_column else [])])
    if len(embedding) == 1:  # one array per record batch: each a view of Arrow's buffers where it can be
        emb = [_embedding_chunk(c, embedding[0]) for c in table.column(embedding[0]).chunks if len(c)]
    else:
        emb = [_embedding_rows(table, embedding, path)]
    quality = _score_columns(table, quality_columns)
    ids = _ids(table.column(id_column).to_numpy(), id_column) if id_column else None
    return ParquetCorpus(embeddings=emb, quality=quality, ids=ids)


def _check_columns(have: list, where: str, embedding: list, quality_columns: Sequence[str],
                   id_column: Optional[str]) -> None:
    """Refuses a column the call names that ``where`` does not have, naming the keyword."""
    named = [("embedding_column", c) for c in embedding] + [("quality_columns", c) for c in quality_columns]
    for keyword, column in named + ([("id_column", id_column)] if id_column else []):
        if column not in have:
            raise InvalidInput(f"{keyword}: no column {column!r} in {where}; its columns: {', '.join(have)}")


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
    embedding_column: Union[str, tuple]  #: a list column, or one float column per dimension
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
        _check_columns(f.schema_arrow.names, self.files[i], _embedding_names(self.embedding_column),
                       self.quality_columns, self.id_column)
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
            columns = _embedding_names(self.embedding_column)
            kind = f.schema_arrow.field(columns[0]).type
            if len(columns) > 1:
                d = len(columns)
            elif pa.types.is_fixed_size_list(kind):
                d = kind.list_size
            elif i > 0:
                d = self._rows(0)[1]
            else:
                first = next(f.iter_batches(batch_size=1, columns=columns))
                d = _embedding_chunk(first.column(0), f"{self.files[i]}: {columns[0]}").shape[1]
            self._shapes[i] = (f.metadata.num_rows, d)
        return self._shapes[i]

    def _embeddings(self, i: int) -> np.ndarray:
        columns = _embedding_names(self.embedding_column)
        return _embedding_rows(self._file(i).read(columns=columns), columns, self.files[i])

    def _quality(self, i: int) -> list:
        return _score_columns(self._file(i).read(columns=list(self.quality_columns)), self.quality_columns)

    def _ids(self, i: int) -> Optional[np.ndarray]:
        return None if not self.id_column else self._file(i).read(columns=[self.id_column]).column(0).to_numpy()

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
                [_embedding_names(self.embedding_column), list(self.quality_columns), self.id_column]]


def parquet_shards(
    inputs: Any,
    embedding_column: Union[str, Sequence[str]] = "feature_arr",
    quality_columns: Union[str, Sequence[str], None] = ("quality_score",),
    id_column: Optional[str] = "chunk_id",
) -> ParquetShards:
    """A corpus of Parquet files (a file, a folder's ``*.parquet`` in name order, or a list of
    either), each file one shard, for :func:`datamask.select` (``embeddings=``, with no ``quality``
    or ``ids``), :func:`datamask.plan` and :func:`datamask.evaluate`. Nothing is read here. A call
    with ``worker=(rank, world)`` and a plan reads every file's footer (row counts) and the files
    of its own groups; a call over the whole corpus (one process, :func:`datamask.plan`) reads
    every file's columns into memory. Embeddings: a list or fixed-size list of floats per row,
    or (a list of names) one float column per dimension; each quality column one score per row; ids integers (the DATAMASK script's column names by
    default). Needs pyarrow."""
    _pyarrow("parquet_shards")
    if isinstance(quality_columns, str):
        quality_columns = [quality_columns]
    embedding = embedding_column if isinstance(embedding_column, str) else tuple(embedding_column)
    return ParquetShards(tuple(_parquet_files(inputs)), embedding, tuple(quality_columns or ()), id_column)


def parquet_to_shards(
    inputs: Any,
    folder: Union[str, os.PathLike],
    embedding_column: Union[str, Sequence[str]] = "feature_arr",
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
    _pyarrow("parquet_to_shards")
    from ._shard_files import ShardWriter, shard_name

    rank, world = (0, 1) if worker is None else worker
    source = parquet_shards(inputs, embedding_column, quality_columns, id_column)
    embedding = _embedding_names(embedding_column)
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    names = []
    for i in range(rank, len(source.files), world):
        f = source._file(i)
        path = os.path.abspath(source.files[i])
        writer = ShardWriter(folder, path)
        for batch in f.iter_batches(batch_size=batch_rows, columns=[*embedding, *source.quality_columns, id_column]):
            x = _embedding_rows(batch, embedding, path)
            cols = _score_columns(batch, source.quality_columns)
            q = cols[0] if len(cols) == 1 else np.column_stack(cols) if cols else np.zeros((len(x), 0))
            writer.append(x, q, _ids(batch.column(id_column).to_numpy(), f"{path}: {id_column}"))
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
                    mask = _in_sorted(wanted, ids) & valid
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
