# SPDX-License-Identifier: Apache-2.0
"""The selection as DataTrove stages (datamask.datatrove), run by examples/datatrove/man_pages.py on
man pages: 4 tasks select what 1 task selects, the documents out are exactly the selected ones,
datamask-select selects the same from the same shards, and a rerun skips the completed tasks."""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("datatrove", reason="datatrove is not installed (pip install datamask[datatrove])")

import datamask  # noqa: E402
from datatrove.data import Document  # noqa: E402
from datamask.datatrove import document_id, merge_parts, shards_in  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = os.environ.get("DATAMASK_SELECT")
OPTIONS = dict(ratio=0.2, block_size=150, seed=4)  # 600 pages in 6 files of 100: groups of two files, several blocks


def example():
    spec = importlib.util.spec_from_file_location("man_pages", ROOT / "examples" / "datatrove" / "man_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """600 man pages in 6 JSONL files and the embedding model fitted on them."""
    m = example()
    work = tmp_path_factory.mktemp("man")
    m.fit_embedding_model(m.build_corpus(str(work / "corpus"), 600, 6), str(work / "model.npz"), dim=32)
    return m, work


def run(corpus, tmp_path, name, tasks):
    m, built = corpus
    work = tmp_path / name
    shutil.copytree(built, work)
    m.pipeline(str(work), tasks, tasks, 1, **OPTIONS)
    return work


def selected_documents(work):
    docs = [json.loads(line) for f in sorted((work / "selected").glob("*.jsonl")) for line in open(f)]
    return docs


def stamps(work, folders=("shards", "parts", "selected")):
    return {p: p.stat().st_mtime_ns for f in folders for p in (work / f).iterdir()}


def test_four_tasks_select_what_one_task_selects(corpus, tmp_path):
    one, four = run(corpus, tmp_path, "one", 1), run(corpus, tmp_path, "four", 4)
    want = np.load(one / "selection.npy")
    got = np.load(four / "selection.npy")
    assert len(want) == 120
    np.testing.assert_array_equal(got, want)
    summary = json.load(open(four / "selection.json"))
    assert summary["world_size"] == 4 and sum(len(p["blocks"]) for p in summary["parts"]) > 4  # several blocks
    # The documents out are the selected ids' documents, each once.
    for work in (one, four):
        docs = selected_documents(work)
        ids = [document_id(Document(text="", id=d["id"])) for d in docs]
        assert sorted(ids) == sorted(want.tolist())
    # The shards hold every page once; the one-process selection of them is the merged one.
    shards = shards_in(four / "shards")
    assert sum(np.load(e, mmap_mode="r").shape[0] for e in shards.embeddings) == 600
    np.testing.assert_array_equal(datamask.select(shards, **OPTIONS).ids, want)


@pytest.mark.skipif(not (PROGRAM and os.access(PROGRAM, os.X_OK)),
                    reason="datamask-select not built: set DATAMASK_SELECT to its path (scripts/python-test does)")
def test_the_program_selects_what_the_stages_select(corpus, tmp_path):
    work = run(corpus, tmp_path, "four", 4)
    shards = shards_in(work / "shards")
    emb = tmp_path / "emb"
    emb.mkdir()
    for e in shards.embeddings:
        os.symlink(e, emb / os.path.basename(e))
    for kind in ("quality", "ids"):
        np.save(tmp_path / f"{kind}.npy", np.concatenate([np.load(p) for p in getattr(shards, kind)]))
    subprocess.run([PROGRAM, "--embeddings", str(emb), "--quality", str(tmp_path / "quality.npy"),
                    "--ids", str(tmp_path / "ids.npy"), "--ratio", "0.2", "--block-size", "150", "--seed", "4",
                    "--quiet", "--out", str(tmp_path / "program.npy")], check=True)
    np.testing.assert_array_equal(np.load(tmp_path / "program.npy"), np.load(work / "selection.npy"))


def test_a_rerun_skips_completed_tasks(corpus, tmp_path):
    m, _ = corpus
    work = run(corpus, tmp_path, "four", 4)
    before = stamps(work)
    m.pipeline(str(work), 4, 4, 1, **OPTIONS)
    assert stamps(work) == before  # every task completed: nothing run again
    # A task whose marker is gone runs again, alone, and writes the same part.
    part = np.load(work / "parts" / "00002.ids.npy")
    for f in ("00002.ids.npy", "00002.json"):
        (work / "parts" / f).unlink()
    (work / "logs" / "select" / "completions" / "00002").unlink()
    m.pipeline(str(work), 4, 4, 1, **OPTIONS)
    after = stamps(work)
    assert {p for p in after if after[p] != before.get(p)} == {work / "parts" / "00002.ids.npy", work / "parts" / "00002.json"}
    np.testing.assert_array_equal(np.load(work / "parts" / "00002.ids.npy"), part)


def test_merge_refuses_missing_and_mixed_parts(corpus, tmp_path):
    work = run(corpus, tmp_path, "four", 4)
    parts = work / "parts"
    (parts / "00001.json").unlink()
    with pytest.raises(datamask.InvalidInput, match=r"3 parts of 4 .*missing ranks \[1\]"):
        merge_parts(parts, tmp_path / "out.npy")
    s = json.load(open(parts / "00000.json"))
    s["rank"], s["world_size"] = 1, 5
    json.dump(s, open(parts / "00001.json", "w"))
    with pytest.raises(datamask.InvalidInput, match="world_size 5"):
        merge_parts(parts, tmp_path / "out.npy")
    assert not (tmp_path / "out.npy").exists()


def test_the_example_runs(tmp_path):
    """The script as a user runs it: two tasks at a time (DataTrove's process pool)."""
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "datatrove" / "man_pages.py"), "--work",
                          str(tmp_path / "work"), "--pages", "2000", "--workers", "2"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "400 of 2000 pages selected by 4 tasks; 400 written" in out.stderr


def test_the_writer_refuses_what_would_corrupt_a_shard(tmp_path):
    """Rows of another width, an input file's documents in two runs, an id that is no uint64: a
    clear error, and no shard file under its name."""
    from datamask.datatrove import WriteSelectionInputs

    def docs(sources, width):
        return [Document(text="x", id=f"{s}/{i}", metadata={"file_path": s, "v": [0.5] * width(i), "q": 1.0})
                for i, s in enumerate(sources)]

    def write(folder, documents, **kw):
        step = WriteSelectionInputs(tmp_path / folder, "v", "q", batch_size=2, **kw)
        return list(step.run(iter(documents)))

    with pytest.raises(datamask.InvalidInput, match="every batch needs the same width"):
        write("width", docs(["a"] * 4, lambda i: 3 if i < 2 else 4))
    with pytest.raises(datamask.InvalidInput, match=r"id_of: -1 for document 'a/0'"):
        write("id", docs(["a"] * 2, lambda i: 3), id_of=lambda doc: -1)
    for folder in ("width", "id"):  # the failed shard's files under temporary names only
        assert not list((tmp_path / folder).glob("*.npy"))
    with pytest.raises(datamask.InvalidInput, match="came in two runs"):
        write("runs", docs(["a", "a", "b", "b", "a", "a"], lambda i: 3))
    assert len(write("fine", docs(["a", "a", "b"], lambda i: 3))) == 3
    shards = shards_in(tmp_path / "fine")
    assert [np.load(e).shape for e in shards.embeddings] == [(2, 3), (1, 3)]
