"""What every benchmark shares: where the checkout and the cache are, the machine a result
was measured on, the command line's common options (``--es-url``, ``--out``) and how a result
is kept (``result.json``) and judged (the exit code says whether its target was met).

The parts of a run live beside it: ``service`` (the service under uvicorn, its CPU and
memory), ``measure`` (driving requests and the latency figures), ``tree`` (a process tree's
peak memory), ``fake_provider`` (a web-search provider that answers after a delay).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "bench"


def machine() -> str:
    """The machine a result was measured on, as each result records it."""
    cpus = os.cpu_count()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{platform.machine()}, {cpus} cores, {mem:.0f} GiB, Python {platform.python_version()}"


def parser(doc: str | None, prog: str | None = None) -> argparse.ArgumentParser:
    """A benchmark's command line with the options all of them take: ``--es-url`` (the
    Elasticsearch it measures, ``RSVC_ES_URL`` by default) and ``--out`` (where its result
    is kept)."""
    p = argparse.ArgumentParser(
        prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--es-url", default=os.environ.get("RSVC_ES_URL", "http://127.0.0.1:9200"))
    p.add_argument("--out", type=Path, default=None)
    return p


def print_result(result: dict[str, Any], out: Path | None) -> None:
    """Print ``result`` as JSON, and keep it as ``out/result.json`` when ``out`` is given."""
    text = json.dumps(result, indent=2, ensure_ascii=False)
    print(text)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "result.json").write_text(text + "\n", "utf-8")


def finish(result: dict[str, Any], out: Path | None) -> int:
    """Keep and print ``result``; the exit code: 0 when its target was met (or it has
    none), 1 when not."""
    print_result(result, out)
    return 0 if result.get("met", True) else 1
