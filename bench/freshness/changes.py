"""The freshness benchmark's source and its changes: a folder or a bucket written and changed
as a company changes it, each change with what must hold once it is in force, and the prober
that notes when it first does."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elasticsearch import Elasticsearch

from retrieval_svc.acl.rule import acl_query

RULES = """unmatched: refuse
rules:
{extra}  - match: 公共/**
    access_roles: []
  - match: 法务/**
    access_roles: [法务]
  - match: 人事/**
    access_roles: [人事]
"""
NARROWING = ("move", "delete", "sidecar", "rules")
WIDENING = ("edit", "new")
PROBE_S = 0.1


def text(i: int, word: str = "") -> str:
    return f"# 文档 {i}\n\n第{i}号记录：配电房巡检、电梯维保与消防演练的安排。{word}\n"


@dataclass(slots=True)
class Change:
    """One change at the source and what must hold once it is in force."""

    kind: str
    at: float  # time.time() when the source changed
    holds: Callable[[Elasticsearch], bool]
    done_at: float | None = None
    # Whether someone who keeps access (the change leaves them able to read it) sees it all:
    # while not, they find nothing (a hold) — ``dark_s`` adds up how long.
    kept: Callable[[Elasticsearch], bool] | None = None
    dark_s: float = 0.0
    dark_from: float | None = None

    def keeping(self, sees: bool, now: float) -> None:
        """Note what the keeper saw at ``now``."""
        if not sees and self.dark_from is None:
            self.dark_from = now
        elif sees and self.dark_from is not None:
            self.dark_s += now - self.dark_from
            self.dark_from = None

    @property
    def window(self) -> float | None:
        return None if self.done_at is None else self.done_at - self.at


def count(es: Elasticsearch, index: str, kb: str, roles: list[str], *clauses: Any) -> int:
    """Chunks of ``kb`` the holder of ``roles`` sees that match ``clauses`` (the service's
    own ACL clause)."""
    query = {"bool": {"filter": [{"term": {"knowledge_id": kb}}, acl_query(roles), *clauses]}}
    return int(es.count(index=index, query=query)["count"])


def every(es: Elasticsearch, index: str, kb: str, roles: list[str], *clauses: Any) -> bool:
    """Whether the holder of ``roles`` sees every chunk of ``kb`` matching ``clauses`` (and
    there are some)."""
    query = {"bool": {"filter": [{"term": {"knowledge_id": kb}}, *clauses]}}
    stored = int(es.count(index=index, query=query)["count"])
    return stored > 0 and count(es, index, kb, roles, *clauses) == stored


class Source:
    """A folder or a bucket of the benchmark, written and changed as a company would."""

    def __init__(self, kind: str, root: Path, s3: Any = None, bucket: str = "") -> None:
        self.kind, self.root, self.s3, self.bucket = kind, root, s3, bucket
        # (a bucket whose server sends no notifications: called as S3 would send them)
        self.notify: Callable[[str, str], None] | None = None

    def _notified(self, event: str, key: str) -> None:
        if self.notify is not None:
            self.notify(event, f"share/{key}")

    @property
    def spec(self) -> str:
        return str(self.root / "share") if self.kind == "folder" else f"s3://{self.bucket}/share"

    def put(self, key: str, body: str) -> None:
        if self.kind == "folder":
            path = self.root / "share" / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body, encoding="utf-8")
        else:
            self.s3.put_object(Bucket=self.bucket, Key=f"share/{key}", Body=body.encode())
            self._notified("ObjectCreated:Put", key)

    def delete(self, key: str) -> None:
        if self.kind == "folder":
            (self.root / "share" / key).unlink()
        else:
            self.s3.delete_object(Bucket=self.bucket, Key=f"share/{key}")
            self._notified("ObjectRemoved:Delete", key)

    def move(self, key: str, to: str) -> None:
        if self.kind == "folder":
            target = self.root / "share" / to
            target.parent.mkdir(parents=True, exist_ok=True)
            (self.root / "share" / key).rename(target)
        else:
            self.s3.copy_object(
                Bucket=self.bucket,
                Key=f"share/{to}",
                CopySource={"Bucket": self.bucket, "Key": f"share/{key}"},
            )
            self._notified("ObjectCreated:Copy", to)
            self.s3.delete_object(Bucket=self.bucket, Key=f"share/{key}")
            self._notified("ObjectRemoved:Delete", key)


def key_of(i: int) -> str:
    return f"公共/d{i // 1000:03d}/doc{i:06d}.md"


def write_source(source: Source, objects: int) -> None:
    if source.kind == "folder":
        for i in range(objects):
            source.put(key_of(i), text(i))
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: source.put(key_of(i), text(i)), range(objects)))


def changes(
    source: Source,
    index: str,
    kb: str,
    objects: int,
    per_kind: int,
    seed: int,
    rules: Path,
    turn: int = 0,
    turns: int = 1,
) -> list[tuple[str, Callable[[], Change]]]:
    """The changes to make, interleaved by kind: each a callable that makes it and says
    what must hold afterwards. Turn ``turn`` of ``turns`` over one source changes documents,
    folders and words no other turn does."""
    rng = random.Random(seed)
    folders = sorted({i // 1000 for i in range(objects)})
    restricted = min(per_kind, (len(folders) - 1) // turns)  # (the first: a rules edit each)
    everyone = rng.sample(range(restricted * turns * 1000, objects), per_kind * 4 * turns)
    picked = everyone[turn * per_kind * 4 : (turn + 1) * per_kind * 4]  # (this turn's)
    folders = folders[turn * restricted : (turn + 1) * restricted]
    tag = "甲乙丙丁戊己"[turn % 6]
    made: dict[str, list[Callable[[], Change]]] = {k: [] for k in (*NARROWING, *WIDENING)}

    def gone(key: str) -> Callable[[Elasticsearch], bool]:
        """Whether the public reader no longer finds ``key``."""
        return lambda es: count(es, index, kb, [], {"term": {"document_name": key}}) == 0

    for n in range(per_kind):
        a, b, c, d = picked[4 * n : 4 * n + 4]

        def move(i: int = a) -> Change:
            source.move(key_of(i), key_of(i).replace("公共/", "法务/", 1))
            return Change("move", time.time(), gone(key_of(i)))

        def delete(i: int = b) -> Change:
            source.delete(key_of(i))
            return Change(
                "delete",
                time.time(),
                gone(key_of(i)),
            )

        def sidecar(i: int = c) -> Change:
            source.put(key_of(i) + ".meta.json", json.dumps({"access_roles": ["董事会"]}))
            name = {"term": {"document_name": key_of(i)}}
            return Change(
                "sidecar",
                time.time(),
                gone(key_of(i)),
                kept=lambda es: every(es, index, kb, ["董事会"], name),
            )

        def edit(i: int = d, n: int = n) -> Change:
            word = f"新版标记{n:04d}{tag}甲"
            source.put(key_of(i), text(i, word))
            match = {"match_phrase": {"content": word}}
            name = {"term": {"document_name": key_of(i)}}
            return Change(
                "edit",
                time.time(),
                lambda es: count(es, index, kb, [], match) > 0,
                kept=lambda es: every(es, index, kb, [], name),
            )

        def new(n: int = n) -> Change:
            word = f"新建标记{n:04d}{tag}乙"
            source.put(f"公共/new/t{turn}n{n:04d}.md", text(objects + n, word))
            match = {"match_phrase": {"content": word}}
            return Change("new", time.time(), lambda es: count(es, index, kb, [], match) > 0)

        def restrict(n: int = n) -> Change:
            folder = f"公共/d{folders[n]:03d}/"
            current = rules.read_text(encoding="utf-8")
            extra = current.split("rules:\n", 1)[1].split("  - match: 公共/**", 1)[0]
            extra += f"  - match: {folder}**\n    access_roles: [财务]\n"
            rules.write_text(RULES.format(extra=extra), encoding="utf-8")
            prefix = {"prefix": {"document_name": folder}}
            return Change(
                "rules",
                time.time(),
                lambda es: count(es, index, kb, [], prefix) == 0,
                kept=lambda es: every(es, index, kb, ["财务"], prefix),
            )

        for kind, make in (
            ("move", move),
            ("delete", delete),
            ("sidecar", sidecar),
            ("rules", restrict),
            ("edit", edit),
            ("new", new),
        ):
            if kind == "rules" and n >= restricted:
                continue  # (a folder of 公共 stays public)
            made[kind].append(make)
    order = [
        (k, f) for n in range(per_kind) for k in made if n < len(made[k]) for f in [made[k][n]]
    ]
    return order


class Prober:
    """Asks every ``PROBE_S`` whether each pending change holds, and notes when it first does;
    and whether those who keep access still see it, until they see it again after it holds
    (``keeping``: the changes still asked about)."""

    def __init__(self, es: Elasticsearch) -> None:
        self.es, self.pending, self.done = es, [], []  # type: ignore[var-annotated]
        self.keeping: list[Change] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def add(self, change: Change) -> None:
        with self._lock:
            self.pending.append(change)
            if change.kept is not None:
                self.keeping.append(change)

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                pending = list(self.pending)
            for change in pending:
                try:
                    holds = change.holds(self.es)
                except Exception:  # (the prober keeps asking)
                    holds = False
                if holds:
                    change.done_at = time.time()
                    with self._lock:
                        self.pending.remove(change)
                        self.done.append(change)
            with self._lock:
                keeping = list(self.keeping)
            for change in keeping:
                assert change.kept is not None
                try:
                    sees = change.kept(self.es)
                except Exception:
                    continue
                change.keeping(sees, time.time())
                if sees and change.done_at is not None:
                    with self._lock:
                        self.keeping.remove(change)
            time.sleep(PROBE_S)

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for change in self.keeping:  # (still dark at the end: dark until now)
            change.keeping(True, time.time())
