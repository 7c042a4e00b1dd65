# SPDX-License-Identifier: Apache-2.0
"""Type stub of datamask._core, the native half of the package (use the datamask module)."""

from typing import Any, Callable, Optional, Sequence

import numpy as np
import numpy.typing as npt

version: str
backend: str  # "eigen", "cuda" or "thrust-omp": the blocks' backend this module was built with
default_block_size: int
low_knn_recall: float

class InvalidInput(ValueError):
    """Bad input or options: the message names the argument, what was expected and found."""

class Cancelled(Exception):
    """The selection stopped because its cancel event was set."""

def settings_table() -> list[dict[str, Any]]: ...
def select(
    shards: Sequence[npt.NDArray[Any]],
    quality: Sequence[npt.NDArray[np.float64]],
    quality_weights: Sequence[float],
    ids: Optional[npt.NDArray[np.int64] | npt.NDArray[np.uint64]],
    options: dict[str, Any],
    objectives: Sequence[str],
    objective_weights: Sequence[float],
    optimizer: str,
    block_size: int,
    neighbors: int,
    graph: Optional[tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]],
    certify: bool,
    on_event: Optional[Callable[[int, int, int, int, int, float, str], Any]],
    cancel: Optional[Any],
) -> dict[str, Any]: ...
def evaluate(
    shards: Sequence[npt.NDArray[Any]],
    quality: Sequence[npt.NDArray[np.float64]],
    quality_weights: Sequence[float],
    corpus_ids: Optional[npt.NDArray[np.int64] | npt.NDArray[np.uint64]],
    ids: npt.NDArray[np.int64] | npt.NDArray[np.uint64],
    options: dict[str, Any],
    objectives: Sequence[str],
    objective_weights: Sequence[float],
    optimizer: str,
    neighbors: int,
    graph: Optional[tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]],
) -> dict[str, Any]: ...
def demo_corpus(seed: int = 0) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float64]]: ...
def corpus_view_address(shards: Sequence[npt.NDArray[Any]]) -> int: ...
def buffer_address(array: npt.NDArray[Any]) -> int: ...
