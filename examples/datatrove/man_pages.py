# SPDX-License-Identifier: Apache-2.0
"""A DATAMASK selection as a stage of a DataTrove pipeline, on a real text corpus built here: the
machine's man pages.

    python examples/datatrove/man_pages.py --work /tmp/man [--pages 4000] [--tasks 4] [--ratio 0.2]

1. The corpus: man pages (their roff source, markup stripped) as JSONL files, ``--files`` of them.
2. The embedding model: TF-IDF over the corpus's frequent words, then a truncated SVD to
   ``--dim`` dimensions, fitted once (numpy) and saved; the pipeline's tasks load it.
3. The pipeline, each stage a ``LocalPipelineExecutor`` that depends on the one before:
   read JSONL -> WriteSelectionInputs (embeddings, a quality heuristic, ids; ``--tasks`` tasks),
   PlanSelection (1 task), SelectShare (``--tasks`` tasks), MergeSelection (1 task),
   read JSONL -> SelectedFilter -> JsonlWriter (``--tasks`` tasks): the selected pages out.

Run it again and DataTrove skips every task that completed. docs/datatrove.md shows the same
pipeline on Slurm.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import re
import sys

import numpy as np

WORD = re.compile(r"[a-z][a-z0-9_]{2,}")


def man_page_text(path: str) -> str:
    """A man page's text: its roff source without requests, comments and font escapes."""
    with gzip.open(path, "rt", errors="replace") as f:
        lines = f.read().splitlines()
    kept = []
    for line in lines:
        if line.startswith(('.\\"', "'\\\"")):
            continue
        if line.startswith("."):  # a request: keep its arguments (section titles, tagged words)
            parts = line.split(None, 1)
            line = parts[1] if len(parts) > 1 else ""
        kept.append(re.sub(r"\\f[BIRP]|\\f\(..|\\[-&e(]|\\\*\(..|\"", " ", line))
    return re.sub(r"[ \t]+", " ", "\n".join(kept)).strip()


def build_corpus(out: str, pages: int, files: int) -> list:
    """The first ``pages`` English man pages (sections 1 to 8, in name order) as ``files`` JSONL
    files in ``out``, ids their paths under /usr/share/man."""
    paths = sorted(glob.glob("/usr/share/man/man[1-8]/*.gz"))
    if len(paths) < pages:
        raise SystemExit(f"man_pages: {len(paths)} man pages in /usr/share/man, {pages} wanted (apt-get install manpages "
                         "manpages-dev, or give --pages)")
    step = len(paths) / pages  # spread over the sections
    chosen = [paths[int(i * step)] for i in range(pages)]
    os.makedirs(out, exist_ok=True)
    written = []
    for f in range(files):
        name = os.path.join(out, f"pages-{f:03d}.jsonl")
        with open(name + ".tmp", "w") as h:
            for path in chosen[f * pages // files:(f + 1) * pages // files]:
                text = man_page_text(path)
                h.write(json.dumps({"id": os.path.relpath(path, "/usr/share/man"), "text": text}) + "\n")
        os.replace(name + ".tmp", name)
        written.append(name)
    return written


def fit_embedding_model(jsonl: list, out: str, vocabulary: int = 4096, dim: int = 64, seed: int = 0) -> None:
    """TF-IDF (the ``vocabulary`` words found in most documents, sublinear term counts, idf
    weights) and a truncated SVD of the TF-IDF matrix to ``dim`` components, saved to ``out``."""
    docs = [json.loads(line)["text"] for f in jsonl for line in open(f)]
    df: dict = {}
    for text in docs:
        for w in set(WORD.findall(text.lower())):
            df[w] = df.get(w, 0) + 1
    words = sorted(df, key=lambda w: (-df[w], w))[:vocabulary]
    idf = np.array([np.log((1 + len(docs)) / (1 + df[w])) + 1 for w in words])
    model = TfidfSvd(words, idf, np.eye(len(words), dim))
    x = model.tfidf(docs)
    # Truncated SVD by a randomized range finder (two power iterations): the top `dim` right
    # singular vectors of the TF-IDF matrix.
    rng = np.random.default_rng(seed)
    y = x @ rng.standard_normal((x.shape[1], dim + 16))
    for _ in range(2):
        y = x @ (x.T @ np.linalg.qr(y)[0])
    q = np.linalg.qr(y)[0]
    _, _, vt = np.linalg.svd(q.T @ x, full_matrices=False)
    np.savez(out, words=np.array(words), idf=idf, components=vt[:dim].T)


class TfidfSvd:
    """The embedding model: TF-IDF, then the SVD's components, rows scaled to unit length."""

    def __init__(self, words: list, idf: np.ndarray, components: np.ndarray):
        self.index = {w: i for i, w in enumerate(words)}
        self.idf, self.components = idf, components

    def tfidf(self, texts: list) -> np.ndarray:
        x = np.zeros((len(texts), len(self.index)))
        for r, text in enumerate(texts):
            for w in WORD.findall(text.lower()):
                c = self.index.get(w)
                if c is not None:
                    x[r, c] += 1
        x = np.log1p(x) * self.idf
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)

    def __call__(self, texts: list) -> np.ndarray:
        e = self.tfidf(texts) @ self.components
        return (e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)).astype(np.float32)


class Embedder:
    """WriteSelectionInputs' ``embed``: the saved model, loaded once per task process."""

    def __init__(self, path: str):
        self.path, self.model = path, None

    def __call__(self, docs: list) -> np.ndarray:
        if self.model is None:
            m = np.load(self.path)
            self.model = TfidfSvd(list(m["words"]), m["idf"], m["components"])
        return self.model([d.text for d in docs])


def quality(docs: list) -> np.ndarray:
    """A quality heuristic: long enough pages of prose score higher (log length, capped, times
    the share of letters among the characters)."""
    out = []
    for d in docs:
        n = max(len(d.text), 1)
        letters = sum(ch.isalpha() for ch in d.text) / n
        out.append(min(np.log10(n) / 4.0, 1.0) * letters)
    return np.array(out)


def pipeline(work: str, tasks: int, select_tasks: int, workers: int, **options) -> dict:
    """The five stages of the selection over ``work``/corpus, run with LocalPipelineExecutor;
    returns the folders it wrote."""
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    from datamask.datatrove import MergeSelection, PlanSelection, SelectedFilter, SelectShare, WriteSelectionInputs

    f = {k: os.path.join(work, k) for k in ("corpus", "shards", "parts", "selected", "logs")}
    f["model"] = os.path.join(work, "model.npz")
    f["plan"] = os.path.join(work, "plan.json")
    f["selection"] = os.path.join(work, "selection.npy")
    run = dict(workers=workers, start_method="fork" if workers == 1 else "forkserver")
    stage = lambda name, steps, n, after=None: LocalPipelineExecutor(  # noqa: E731
        steps, tasks=n, logging_dir=os.path.join(f["logs"], name), depends=after, **run)
    inputs = stage("inputs", [JsonlReader(f["corpus"]), WriteSelectionInputs(f["shards"], Embedder(f["model"]), quality)],
                   tasks)
    plan = stage("plan", [PlanSelection(f["shards"], f["plan"], **options)], 1, inputs)
    select = stage("select", [SelectShare(f["shards"], f["parts"], f["plan"], **options)], select_tasks, plan)
    merge = stage("merge", [MergeSelection(f["parts"], f["selection"])], 1, select)
    keep = stage("filter", [JsonlReader(f["corpus"]), SelectedFilter(f["selection"]),
                            JsonlWriter(f["selected"], compression=None)], tasks, merge)
    keep.run()
    return f


def main(argv=None) -> None:
    a = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a.add_argument("--work", required=True, help="the folder of the corpus, the model, the stages' outputs and logs")
    a.add_argument("--pages", type=int, default=4000, help="man pages in the corpus (default 4000)")
    a.add_argument("--files", type=int, default=8, help="JSONL files of the corpus (default 8)")
    a.add_argument("--dim", type=int, default=64, help="embedding dimensions (default 64)")
    a.add_argument("--tasks", type=int, default=4, help="tasks of the reading stages (default 4)")
    a.add_argument("--select-tasks", type=int, default=4, help="tasks of the selection (default 4)")
    a.add_argument("--workers", type=int, default=1, help="tasks run at once (default 1)")
    a.add_argument("--ratio", type=float, default=0.2, help="the share of pages selected (default 0.2)")
    a.add_argument("--block-size", type=int, default=1000, help="items per block (default 1000)")
    args = a.parse_args(argv)
    corpus = os.path.join(args.work, "corpus")
    if not os.path.isdir(corpus):
        fit_embedding_model(build_corpus(corpus, args.pages, args.files), os.path.join(args.work, "model.npz"),
                            dim=args.dim)
    f = pipeline(args.work, args.tasks, args.select_tasks, args.workers, ratio=args.ratio, block_size=args.block_size)
    summary = json.load(open(os.path.join(args.work, "selection.json")))
    kept = sum(1 for name in glob.glob(os.path.join(f["selected"], "*.jsonl")) for _ in open(name))
    print(f"man_pages: {summary['count']} of {args.pages} pages selected by {summary['world_size']} tasks; "
          f"{kept} written to {f['selected']}", file=sys.stderr)


if __name__ == "__main__":
    main()
