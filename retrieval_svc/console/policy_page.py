"""The console's *Policy* page: roles and their inheritance, the users of each role (those a
directory sync owns marked), grants, the tenant's skipped policy lines, the user ids that named
no one lately, and the recent history; editable when the policy is in a database."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from retrieval_svc.acl import owned
from retrieval_svc.acl.admin import PolicyAdmin
from retrieval_svc.acl.history import Actor
from retrieval_svc.acl.identities import Seen, Status
from retrieval_svc.acl.policy_store import PolicyDatabase, PolicyError
from retrieval_svc.auth.keys import ApiKeyConfig
from retrieval_svc.console.pages import _guarded, router
from retrieval_svc.console.text import language
from retrieval_svc.deps import StateDep
from retrieval_svc.state import AppState
from retrieval_svc.tenancy import EVERY_TENANT
from retrieval_svc.words import reader_language


@router.api_route("/policy", methods=["GET", "POST"])
async def policy(request: Request, state: StateDep) -> Response:
    """Roles and their inheritance, users of each role, grants; editable when the policy is
    in a database, with the same validations as ``retrieval-svc policy``."""
    source = state.acl.source

    async def work(key: ApiKeyConfig, form: dict[str, str]) -> dict[str, Any]:
        done, refused = "", None
        if request.method == "POST" and isinstance(source, PolicyDatabase):
            admin = await asyncio.to_thread(
                PolicyAdmin, source, Actor(f"console:{key.name}", "console")
            )
            action, tenant = form.get("action", ""), key.tenant

            def field(name: str) -> str:
                value = form.get(name, "").strip()
                if not value:
                    raise ValueError(f"{name}: required for {action!r}")
                return value

            changes: dict[str, Callable[[], bool]] = {
                "grant-role": lambda: admin.grant_role(field("user"), field("role"), tenant),
                "revoke-role": lambda: admin.revoke_role(field("user"), field("role"), tenant),
                "inherit": lambda: admin.inherit(field("role"), field("parent"), tenant),
                "disinherit": lambda: admin.disinherit(field("role"), field("parent"), tenant),
                "allow": lambda: admin.allow(field("subject"), field("knowledge_ids"), tenant),
                "disallow": lambda: admin.disallow(
                    field("subject"), field("knowledge_ids"), tenant
                ),
            }
            try:
                if action not in changes:
                    raise ValueError(f"unknown change {action!r}")
                # (a refusal in the page's language, not the server's terminal's)
                with reader_language(language(request.headers.get("accept-language"))):
                    await asyncio.to_thread(changes[action])
                await asyncio.to_thread(state.acl.reload)  # in force now, for every page
                done = action
            except (PolicyError, ValueError) as exc:  # refused: the page still shows the policy
                refused = str(exc)
        read = await asyncio.to_thread(source.rules)
        grants, grouping, mine = read.policy, read.grouping, key.tenant
        inherits = sorted(
            (g[0], g[1]) for g in grouping if g[2] == mine and not g[0].startswith("user:")
        )
        users: dict[str, list[str]] = {}
        for g in grouping:
            if g[2] == mine and g[0].startswith("user:"):
                users.setdefault(g[1], []).append(g[0].removeprefix("user:"))
        owned_roles = (
            await asyncio.to_thread(owned.owned_roles, source.engine(), mine)
            if isinstance(source, PolicyDatabase)
            else {}
        )
        history = (
            await asyncio.to_thread(
                source.history,
                since=datetime.now(UTC) - timedelta(days=30),
                tenant=mine,
                limit=20,
                with_changes=20,
            )
            if isinstance(source, PolicyDatabase)
            else []
        )
        return {
            "history": history,
            "inherits": inherits,
            "users": sorted(users.items()),
            "owned": owned_roles,  # roles a directory sync gives (a hand grant is refused)
            "unknown_users": await _unknown_users(state, mine),
            "skipped": len(read.skipped_in(mine)),
            # By equality: this tenant's lines, and the global ones ("*" alone) that apply here.
            "grants": sorted(p for p in grants if p[1] in (mine, EVERY_TENANT)),
            "editable": isinstance(source, PolicyDatabase),
            "done": done,
        } | ({"error": refused} if refused else {})

    return await _guarded(request, state, "policy", work)


async def _unknown_users(state: AppState, tenant: str) -> list[Seen]:
    """The ids that named no one lately: the audit trail's of the last 30 days (kept across
    restarts and replicas, with the elasticsearch sink) and this process's not yet written
    there, one row an id and key."""
    rows = {(s.asked, s.key): s for s in state.unknown_users.recent(tenant)}
    try:
        kept = await state.audit.unresolved(tenant, datetime.now(UTC) - timedelta(days=30))
    except Exception:  # (the trail unreadable: this process's list still shows)
        kept = []
    for asked, status, key, count, last in kept:
        mine = rows.get((asked, key))
        if mine is None or mine.count < count:
            said: Status = "ambiguous" if status == "ambiguous" else "unknown"
            rows[(asked, key)] = Seen(asked, said, key, count, max(last, mine.last if mine else 0))
    return sorted(rows.values(), key=lambda s: s.last, reverse=True)
