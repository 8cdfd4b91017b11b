"""What an indexing run does so the index converges to its source, beyond each document:
whether it prunes what the source no longer holds (by default, yes), what it keeps of itself
for the next run and the console (its source, counts, failures and rules digest), and the
permission-history event when a changed rules file changed documents' roles."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer
from elasticsearch import ApiError, AsyncElasticsearch, TransportError

from indexer.loading import IndexOptions
from indexer.permissions import AclRules
from indexer.report import Report
from indexer.shards import Shard
from indexer.sources import Source
from retrieval_svc.causes import cause
from retrieval_svc.search.runs import COUNTS, record_run, run_record
from retrieval_svc.settings import IndexSettings
from retrieval_svc.words import cli_language, problem, say


def prune_decision(options: IndexOptions, source: Source, asked: bool | None) -> tuple[bool, str]:
    """Whether this run prunes, and the summary's sentence why. A run prunes by default: a
    knowledge base holds what its sources hold, so a moved or deleted object must leave. It
    prunes only what its own source wrote (each document records its source; documents
    written before sources were recorded count as this source's where their address lies in
    it), so one folder indexed into a knowledge base fed by several never empties the rest.
    It does not when asked not to, or on a dry run."""
    here = options.source_name or source.description
    if options.dry_run:
        return False, "not pruned: a dry run"
    if asked is not None:  # (--prune: this source is the knowledge base's only one)
        return asked, (
            f"pruned as asked (--prune): the knowledge base holds what {here} holds, whichever "
            "source wrote the rest"
            if asked
            else "not pruned (--no-prune)"
        )
    return True, f"pruned what {here} no longer holds (its own documents: other sources' stay)"


async def keep_run(
    es: AsyncElasticsearch,
    index_alias: str,
    tenant: str,
    report: Report,
    rules: AclRules | None = None,
    shard: Shard | None = None,
) -> None:
    """Keep the run's counts and failures for the console, with its source and its rules
    file's digest; a run is not failed by this."""
    counts = {name: getattr(report, name) for name in COUNTS}
    record = run_record(
        report.knowledge_id,
        counts,
        report.failures,
        report.passed_over,
        report.passed_over_examples,
    )
    if report.fail_closed:
        record["fail_closed"] = [
            {"sid": sid, "count": n, "examples": report.fail_closed_examples.get(sid, [])}
            for sid, n in sorted(report.fail_closed.items())
        ]
    record["source"] = report.source
    if shard is not None:  # (each shard's own record: N of them add up to the source)
        record["shard"] = str(shard)
        record["run_id"] = shard.run_id(report.knowledge_id)
    if rules is not None:
        record["rules"] = {"file": rules.path, "digest": rules.fingerprint()}
    try:
        await record_run(es, index_alias, tenant, record)
    except (ApiError, TransportError) as exc:
        why = cause(exc, cli_language()) or str(exc)[:300]
        typer.echo(say("warning", what=say("run_not_kept", why=why)), err=True)


def rules_changed_event(
    settings: IndexSettings,
    tenant: str,
    report: Report,
    rules: AclRules | None,
    last: dict[str, Any],
) -> str | None:
    """When the rules file changed since the knowledge base's last run and documents' roles
    changed with it, record that in the permission history (actor: the indexer and the
    rules file; the counts and the first documents); why it was not, or None."""
    if rules is None or settings.casbin_db_url is None or report.dry_run:
        return None
    before = (last.get("rules") or {}).get("digest")
    changed = report.documents_retagged + report.documents_withdrawn
    if before in (None, rules.fingerprint()) or not changed:
        return None
    from retrieval_svc.acl.admin import PolicyAdmin
    from retrieval_svc.acl.history import Actor
    from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase, PolicyError

    detail = (
        f"knowledge base {report.knowledge_id}: {report.documents_retagged} re-tagged, "
        f"{report.documents_withdrawn} withdrawn after {rules.path} changed; "
        + ", ".join(report.roles_changed)
    )
    try:
        store = PolicyDatabase(DEFAULT_MODEL, settings.casbin_db_url.get_secret_value())
        admin = PolicyAdmin(store, Actor(f"indexer:{Path(rules.path).name}", "indexer"))
        admin.record(tenant, "rules-changed", detail)
    except PolicyError as exc:
        return say("rules_not_recorded", why=problem(exc))
    return None


class RulesEditRecorder:
    """``watch``'s permission history of a rules edit, as ``index`` records one: the edit is
    settled from the index at once (``rules``), what it held read again at once (``events``),
    then the re-listing it asks for; when these re-tagged or withdrew documents, a
    ``rules-changed`` event names them (a warning, never a stop, when the history cannot be
    written)."""

    def __init__(
        self,
        settings: IndexSettings,
        tenant: str,
        at_start: AclRules | None,
        rules: Callable[[], AclRules | None],
    ) -> None:
        self.settings, self.tenant, self.rules = settings, tenant, rules
        self.in_force = at_start.fingerprint() if at_start is not None else None
        self.pending: str | None = None  # the digest before an edit not yet accounted
        self.held = 0
        self.roles: list[str] = []  # documents whose roles changed before the re-listing
        self.read_again: Report | None = None  # (the re-listing may find nothing left to do)

    def said(self, what: str, report: Report | None, held: int = 0) -> str | None:
        """Account one settle (``what`` as the watcher names it; ``held``: the documents the
        edit held at once, whose re-listing may count them indexed rather than re-tagged); a
        warning, or None."""
        rules = self.rules()
        now = rules.fingerprint() if rules is not None else None
        if what == "rules":
            if self.pending is None:
                self.pending, self.held, self.roles = self.in_force, 0, []
                self.read_again = None
            self.in_force = now
            self.held += held
            return None
        if self.pending is not None and report is not None and what == "events":
            self.roles.extend(report.roles_changed)  # (the held documents, read again)
            self.read_again = report
        report = report or self.read_again
        if what != "re-listing" or self.pending is None or report is None:
            return None  # (a count of events settled meanwhile is not the edit's)
        before, self.pending = self.pending, None
        counted = replace(
            report,
            documents_retagged=max(report.documents_retagged, self.held),
            roles_changed=[*dict.fromkeys([*self.roles, *report.roles_changed])][: Report.KEPT],
        )
        return rules_changed_event(
            self.settings, self.tenant, counted, rules, {"rules": {"digest": before}}
        )
