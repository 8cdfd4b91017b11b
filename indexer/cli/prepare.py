"""What ``retrieval-indexer index`` and ``watch`` make of their options before touching
Elasticsearch: the settings, the run's ``IndexOptions``, the source (its exclusions, its
links refused) and the rules file, checked whole — one line and exit 2 on bad input."""

from __future__ import annotations

import enum
import functools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import typer

from indexer.budget import Budget, split_memory
from indexer.chunking import ChunkOptions
from indexer.cli.common import settings_or_exit
from indexer.permissions import AclRules, RulesError, load_rules
from indexer.pipeline import IndexOptions
from indexer.shards import Shard, from_environment
from indexer.sources import ObjectStoreOptions, SmbSource, Source, open_source
from indexer.sources.local import refuse_links_inside
from retrieval_svc.acl.known_sids import KnownSids, known_sids
from retrieval_svc.config_words import named
from retrieval_svc.settings import IndexSettings
from retrieval_svc.tenancy import tenant_alias
from retrieval_svc.words import again, problem, say


def load_manifest(path: Path | None) -> dict[str, dict[str, Any]]:
    """A JSON Lines manifest: one object per document with a ``path`` key."""
    if path is None:
        return {}
    entries: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise typer.BadParameter(f"{path}:{number}: not JSON ({exc.msg})") from None
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise typer.BadParameter(f"{path}:{number}: needs an object with a 'path' string")
        entries[entry["path"].lstrip("/")] = entry
    return entries


class OcrChoice(enum.StrEnum):
    """``--ocr``: when pages and images are read by OCR."""

    auto = "auto"
    off = "off"
    force = "force"


def cores() -> int:
    """The cores this process may use."""
    return max(1, len(os.sched_getaffinity(0)))


def _rules_or_exit(path: Path | None) -> AclRules | None:
    """The rules file, checked whole (exit 2 before anything is written), its warnings
    printed."""
    if path is None:
        return None
    try:
        rules = load_rules(path)
    except RulesError as exc:
        typer.echo(say("rules_error", why=problem(str(exc))), err=True)
        raise typer.Exit(2) from None
    for warning in rules.warnings:
        typer.echo(say("warning", what=named(rules.path, problem(warning))), err=True)
    return rules


@dataclass(frozen=True, slots=True)
class Prepared:
    """What ``index`` and ``watch`` make of their options before touching Elasticsearch."""

    settings: IndexSettings
    options: IndexOptions
    src: Source
    rules: AclRules | None
    shard: Shard | None


def prepare(args: dict[str, Any]) -> Prepared:
    """The settings, the run's options, the source and the rules from the command line's
    values (``index``'s options, by name); exit 2 with one line on bad input."""
    a = args
    settings = settings_or_exit()
    processes, per_document = split_memory(
        a["memory_mb"], cores(), a["workers"] or None, a["doc_memory_mb"],
        ocr=a["ocr"] != OcrChoice.off,
    )  # fmt: skip
    if a["workers"] == 0:
        processes = 0
    rules = _rules_or_exit(a["acl_rules"])
    try:
        part = Shard.parse(a["shard"]) if a["shard"] is not None else from_environment(os.environ)
    except ValueError as exc:  # (before anything touches Elasticsearch)
        typer.echo(say("error", what=problem(exc)), err=True)
        raise typer.Exit(2) from None
    source, roles_tag, tenant = a["source"], a["roles_tag"], a["tenant"]
    try:
        if roles_tag is not None and not roles_tag.strip():
            raise ValueError("--roles-tag is empty: name the object tag that holds roles")
        if roles_tag and urlparse(source).scheme not in ("s3", "oss"):
            raise ValueError(
                f"--roles-tag reads object tags, which {source!r} has none of: use it with "
                "s3:// or oss://, and --acl-rules for a folder"
            )
        options = IndexOptions(
            knowledge_id=a["knowledge_id"],
            alias=tenant_alias(settings.index_alias, tenant),
            tenant=tenant,
            timezone=settings.timezone,
            dataset_name=a["dataset_name"],
            chunk=ChunkOptions(max_chars=a["chunk_size"], overlap_chars=a["chunk_overlap"]),
            url_template=a["url_template"],
            manifest=load_manifest(a["manifest"]),
            prune=bool(a["prune"]),
            sole=a["prune"] is True,
            force=a["force"],
            dry_run=a["dry_run"],
            concurrency=a["concurrency"],
            workers=processes,
            budget=Budget(
                seconds=a["doc_timeout"],
                memory_mb=per_document,
                max_bytes=a["max_doc_bytes"],
                max_unpacked_bytes=a["max_unpacked_bytes"],
                max_chars=a["max_chars"],
                max_pages=a["max_pages"],
                max_pixels=a["max_pixels"],
                ocr_page_seconds=a["ocr_page_seconds"],
            ),
            ocr=a["ocr"].value,
            acl_rules=rules,
            roles_tag=roles_tag,
            shard=part,
            source_name=(a["source_name"] or "").strip(),
        )
        src = open_source(source, ObjectStoreOptions(endpoint=a["endpoint"], region=a["region"]))
        if isinstance(src, SmbSource):
            src.directory = directory_sids(settings, tenant)
            src.sidecars = bool(a.get("share_sidecars"))
        elif a.get("share_sidecars"):
            raise ValueError(
                "--share-sidecars is for an smb:// share: a folder's or a "
                "bucket's sidecars are always read"
            )
        refuse_links_inside(src, {"--acl-rules": a["acl_rules"], "--manifest": a["manifest"]})
        exclude_from(src, a["exclude"], rules)
    except (ValueError, NotADirectoryError) as exc:
        typer.echo(say("error", what=problem(again(str(exc), "not_a_folder"))), err=True)
        raise typer.Exit(2) from None
    return Prepared(settings, options, src, rules, part)


def directory_sids(settings: IndexSettings, tenant: str) -> Callable[[], KnownSids]:
    """Which SIDs the tenant's directory knows, read from the policy database each time a
    share is listed whole (none without ``RSVC_CASBIN_DB_URL``)."""
    url = settings.casbin_db_url.get_secret_value() if settings.casbin_db_url else None
    return functools.partial(known_sids, url, tenant)


def exclude_from(src: Source, exclude: list[str] | None, rules: AclRules | None) -> None:
    """Pass over what ``--exclude`` and the rules file's ``exclude:`` name."""
    if exclude:
        src.passed_over.excluding(exclude, "--exclude")
    if rules is not None and rules.exclude:
        origin = f"exclude of {Path(rules.path).name}"  # (compared as its rules are)
        src.passed_over.excluding(list(rules.exclude), origin, rules.fold)
