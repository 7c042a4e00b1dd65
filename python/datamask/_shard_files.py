# SPDX-License-Identifier: Apache-2.0
"""A corpus on disk as shards of three .npy files each (NAME.embeddings.npy, NAME.quality.npy,
NAME.ids.npy), as pipeline tasks write it (datamask.datatrove's WriteSelectionInputs,
datamask.parquet_to_shards) and the selection reads it (:func:`shards_in`): each file written a
batch of rows at a time, appearing under its name only when whole."""

from __future__ import annotations

import hashlib
import os
import urllib.parse
from typing import Optional, Union

import numpy as np

from . import InvalidInput, Shards

KINDS = ("embeddings", "quality", "ids")


def shards_in(folder: Union[str, os.PathLike]) -> Shards:
    """The corpus of the shards in ``folder``, in the order of their embedding files' names (the
    order datamask-select reads a folder of them in)."""
    folder = os.fspath(folder)
    names = [f[: -len(".embeddings.npy")] for f in sorted(os.listdir(folder)) if f.endswith(".embeddings.npy")]
    if not names:
        raise InvalidInput(f"folder: no shard (NAME.embeddings.npy) in {folder}")
    paths = [[os.path.join(folder, f"{n}.{kind}.npy") for n in names] for kind in KINDS]
    for path in (p for kind in paths for p in kind):
        if not os.path.exists(path):
            raise InvalidInput(f"folder: {path} is missing (a shard's three files are written together)")
    return Shards(*paths)


def shard_name(source: str) -> str:
    """The name of an input file's shard: its path, quoted, cut to fit a file name, and a hash of
    it. The shards' order is their names', whatever the tasks that wrote them; two paths never
    share a name."""
    digest = hashlib.blake2b(source.encode(), digest_size=8).hexdigest()
    return f"{urllib.parse.quote(source, safe='')[:160]}-{digest}"


class _NpyStream:
    """An .npy file written a batch of rows at a time: a fixed-size header, rewritten with the row
    count at the end; the file appears under its name only then."""

    HEADER = 128  # bytes: magic, version, length, and a header dict padded with spaces

    def __init__(self, path: str, dtype: np.dtype, cols: Optional[int]):
        self.path, self.dtype, self.cols, self.rows = path, np.dtype(dtype), cols, 0
        self.file = open(path + ".tmp", "wb")
        self.file.write(b"\0" * self.HEADER)

    def append(self, rows: np.ndarray) -> None:
        if rows.shape[1:] != (() if self.cols is None else (self.cols,)):
            raise InvalidInput(f"{os.path.basename(self.path)}: rows of shape {rows.shape[1:]} after rows of "
                               f"{(self.cols,) if self.cols is not None else ()}; every batch needs the same width")
        self.file.write(np.ascontiguousarray(rows, dtype=self.dtype).tobytes())
        self.rows += len(rows)

    def close(self) -> None:
        shape = (self.rows,) if self.cols is None else (self.rows, self.cols)
        text = f"{{'descr': '{self.dtype.str}', 'fortran_order': False, 'shape': {shape!r}, }}"
        header = b"\x93NUMPY\x01\x00" + (self.HEADER - 10).to_bytes(2, "little") + text.ljust(self.HEADER - 11).encode() + b"\n"
        self.file.seek(0)
        self.file.write(header)
        self.file.close()
        os.replace(self.path + ".tmp", self.path)


class ShardWriter:
    """The shard of the input file ``source`` in ``folder`` (:func:`shard_name`), written a batch
    of rows at a time: embeddings (float32 or float16 as the first batch's, unless ``dtype``),
    scores (float64: 1-D, or n x k), ids (the first batch's integer type)."""

    def __init__(self, folder: str, source: str, dtype: Optional[str] = None):
        self.base, self.dtype, self.files = os.path.join(folder, shard_name(source)), dtype, None

    def append(self, x: np.ndarray, quality: np.ndarray, ids: np.ndarray) -> None:
        if self.files is None:
            kind = self.dtype or (np.float16 if x.dtype == np.float16 else np.float32)
            self.files = [_NpyStream(f"{self.base}.embeddings.npy", kind, x.shape[1]),
                          _NpyStream(f"{self.base}.quality.npy", np.float64, None if quality.ndim == 1 else quality.shape[1]),
                          _NpyStream(f"{self.base}.ids.npy", ids.dtype, None)]
        for stream, values in zip(self.files, (x, quality, ids)):
            stream.append(values)

    def close(self) -> int:
        """Writes the headers and gives the files their names; returns the rows written."""
        for stream in self.files or ():
            stream.close()
        return self.files[0].rows if self.files else 0
