"""OCR at the engine's speed (issue #48 §4): a folder of one-page scans and phone photos read
by the indexer through the CLI, against the engine alone on the same pages in one process.

    python -m bench.formats --ocr-speed 300 [--out DIR]

The pages are CMRC 2018 passages drawn one to a page (``bench.formats.render``: PNG scans at 150 dpi
and JPEG photos with uneven light). *Engine alone*: one process loads RapidOCR with the
indexer's own parameters (one thread) and reads every page in a loop — decoding the file and
the indexer's own ``read_pixels`` (orientation check included). *Indexer*: ``retrieval-indexer
index`` on the folder with one worker (one thread: the same threads), Elasticsearch writing,
no embedding. Target: the indexer ≤ 1.3× the engine alone.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.formats import renderers
from bench.harness.tree import run_measured
from retrieval_svc.words import say

TARGET_RATIO = 1.3
CLI = [sys.executable, "-c", "from indexer.cli import app; app()"]


def write_pages(folder: Path, passages: list[dict[str, Any]], count: int) -> list[Path]:
    """``count`` one-page scans and ``count`` photos, a passage each (passages reused)."""
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for kind in ("png", "photo"):
        suffix, renderer = renderers.RENDERERS[kind]
        for i in range(count):
            passage = passages[i % len(passages)]
            path = folder / f"{kind}-{i:04d}{suffix}"
            path.write_bytes(renderer([(passage["title"], passage["text"])]))
            files.append(path)
    return files


def engine_alone(files: list[Path]) -> dict[str, Any]:
    """Every page read in this process by the indexer's OCR, the engine loaded once."""
    import numpy as np
    from PIL import Image

    from indexer.formats import ocr

    started = time.perf_counter()
    ocr.preload()
    loaded = time.perf_counter() - started
    chars = 0
    for path in files:
        with Image.open(io.BytesIO(path.read_bytes())) as image:
            picture = image.convert("RGB")
        chars += len(ocr.read_pixels(np.asarray(picture)).text)
    return {
        "s": round(time.perf_counter() - started, 1),
        "load_s": round(loaded, 1),
        "chars": chars,
    }


def through_cli(folder: Path, es_url: str, alias: str) -> dict[str, Any]:
    env = {**os.environ, "RSVC_ES_URL": es_url, "RSVC_INDEX_ALIAS": alias, "RSVC_EMBEDDER": "none"}
    argv = [*CLI, "index", str(folder), "--knowledge-id", "ocr-speed", "--json", "--force"]
    argv += ["--workers", "1", "--prune"]
    started = time.perf_counter()
    run = run_measured(argv, env=env, timeout_s=7200)
    seconds = time.perf_counter() - started
    report = json.loads(run.stdout)
    return {
        "s": round(seconds, 1),
        "indexed": report["documents_indexed"],
        "failed": report["documents_failed"],
        "parser_workers_started": report.get("parser_workers_started"),
        "peak_rss_mb": round(run.peak_bytes / 2**20),
    }


def measure(passages: list[dict[str, Any]], count: int, es_url: str, alias: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        files = write_pages(Path(tmp) / "pages", passages, count)
        alone = engine_alone(files)
        print(say("bench_engine_alone", result=alone), file=sys.stderr, flush=True)
        cli = through_cli(Path(tmp) / "pages", es_url, alias)
        print(say("bench_through_indexer", result=cli), file=sys.stderr, flush=True)
    ratio = cli["s"] / alone["s"]
    return {
        "pages": len(files),
        "engine_alone": alone,
        "indexer": cli,
        "ratio": round(ratio, 3),
        "target": f"indexer <= {TARGET_RATIO}x the engine alone, one thread each",
        "met": ratio <= TARGET_RATIO and cli["failed"] == 0,
    }
