"""The operator's console at ``/console`` (design.md §14): server-rendered pages for the
admin keys of a tenant — *Search as*, *Why not*, *Policy*, *Audit* here; *Knowledge bases* and
*Documents* in ``console.inventory``.

A transport like ``routes/``: it translates forms into the one pipeline (``retrieval.answer``,
``retrieval.explain_visibility``) and the policy store's validated commands, and renders the
answers; it decides nothing about access itself. Sign-in takes an admin key once; then a
signed, HttpOnly, SameSite=Strict, short-lived cookie; every form carries a CSRF token; every
answer a strict Content-Security-Policy (no script at all) and ``no-store``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from starlette.datastructures import FormData

from retrieval_svc import reasons
from retrieval_svc.acl.policy_store import PolicyError
from retrieval_svc.auth.identity import make_claims
from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode
from retrieval_svc.console.session import (
    COOKIE,
    LOGIN_COOKIE,
    LOGIN_MAX_AGE_S,
    Sessions,
    ended_index,
)
from retrieval_svc.console.text import WORDS, actor_text, language, refusal_text
from retrieval_svc.deps import StateDep
from retrieval_svc.errors import AuthError, ServiceError
from retrieval_svc.key_entry import reserved_role
from retrieval_svc.languages import error_message
from retrieval_svc.observability import log_fields
from retrieval_svc.retrieval import RetrievalQuery, answer, explain_visibility, identity_view
from retrieval_svc.state import AppState

HERE = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=HERE / "templates")
# The indexer's reasons in the page's language (retrieval_svc.reasons): ``{{ r | failure(lang) }}``.
templates.env.filters["failure"] = reasons.failure_text
templates.env.filters["passed_over"] = reasons.passed_over_text
templates.env.filters["roles_source"] = reasons.roles_source_text
templates.env.filters["actor"] = actor_text
templates.env.filters["refusal"] = refusal_text
templates.env.filters["error_message"] = error_message
templates.env.filters["timestamp"] = lambda t: time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(t))
router = APIRouter(prefix="/console", include_in_schema=False)
PAGES = ("search", "why-not", "policy", "knowledge-bases", "audit")
SPAN = re.compile(r"[1-9][0-9]{0,3}[mhd]")  # the audit page's "since": up to 9999 days


def sessions(state: AppState) -> Sessions:
    """The app's console sessions (made once, with the configured secret)."""
    found = _SESSIONS.get(id(state))
    if found is None or found[0] is not state:
        secret = state.settings.console_secret
        made = Sessions(
            secret.get_secret_value() if secret else None,
            state.settings.console_session_s,
            state.es,
            ended_index(state.settings.index_alias),
        )
        found = _SESSIONS[id(state)] = (state, made)
    return found[1]


_SESSIONS: dict[int, tuple[AppState, Sessions]] = {}


def _admin(state: AppState, name: str) -> ApiKeyConfig | None:
    return next((k for k in state.keys.keys if k.name == name and k.admin), None)


async def signed_in(
    request: Request, state: AppState
) -> tuple[ApiKeyConfig, dict[str, str]] | None:
    """The admin key and session of this request's cookie, if it is a live one: ours, not
    expired, of a key still configured with the same secret, and not signed out."""
    found = sessions(state).read(request.cookies.get(COOKIE), lambda name: _admin(state, name))
    if found is None or not await sessions(state).live(found[1]):
        return None
    key = found[0]
    log_fields(key=key.name, tenant=key.tenant, actor=f"console:{key.name}")  # (the access log)
    return found


def render(request: Request, page: str, status: int = 200, **context: Any) -> Response:
    """A page, in the browser's language, with the console's security headers."""
    lang = language(request.headers.get("accept-language"))
    response = templates.TemplateResponse(
        request,
        f"{page}.html",
        {"t": WORDS[lang], "lang": lang, "page": page, "pages": PAGES, **context},
        status_code=status,
    )
    return response  # (the security headers: console.headers, on every answer)


def to_login() -> Response:
    return RedirectResponse("/console/login", status_code=303)


def _list(value: Any) -> list[str]:
    return [v.strip() for v in str(value or "").replace("，", ",").split(",") if v.strip()]


async def _form(request: Request, state: AppState, session: dict[str, str]) -> FormData | None:
    """The posted form, or None when it does not carry this session's CSRF token."""
    form = await request.form()
    token = form.get("csrf")
    return (
        form
        if sessions(state).csrf_ok(session, token if isinstance(token, str) else None)
        else None
    )


@router.get("")
async def home() -> Response:
    """The console starts at *Search as*."""
    return RedirectResponse("/console/search", status_code=303)


def _cookie(
    request: Request, state: AppState, response: Response, name: str, value: str, max_age: int
) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path="/console",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https" or state.settings.public_url.startswith("https"),
    )


def _login_form(request: Request, state: AppState, status: int = 200, **context: Any) -> Response:
    """The sign-in page, with a fresh login-CSRF token in its form and in a cookie."""
    cookie, token = sessions(state).login_token()
    response = render(request, "login", status=status, login_csrf=token, **context)
    _cookie(request, state, response, LOGIN_COOKIE, cookie, LOGIN_MAX_AGE_S)
    return response


@router.get("/login")
async def login_page(request: Request, state: StateDep) -> Response:
    """Sign in with an admin key."""
    return _login_form(request, state)


@router.post("/login")
async def login(request: Request, state: StateDep) -> Response:
    """An admin key of a tenant opens a session; any other answer is the same refusal."""
    form = await request.form()
    t = WORDS[language(request.headers.get("accept-language"))]
    token = form.get("login_csrf")
    if not sessions(state).login_ok(
        request.cookies.get(LOGIN_COOKIE), token if isinstance(token, str) else None
    ):
        return _login_form(request, state, status=403, error=t["csrf"])
    presented = str(form.get("key") or "")
    try:
        key = state.keys.lookup(presented)
    except AuthError:
        key = None
    if key is None or not key.admin:
        state.metrics.auth_failures.labels(reason="ConsoleRefused").inc()
        return _login_form(request, state, status=403, error=t["refused"])
    response = RedirectResponse("/console/search", status_code=303)
    issued = sessions(state).issue(key)
    _cookie(request, state, response, COOKIE, issued, state.settings.console_session_s)
    response.delete_cookie(LOGIN_COOKIE, path="/console", httponly=True, samesite="strict")
    return response


@router.post("/logout")
async def logout(request: Request, state: StateDep) -> Response:
    """End the session, on the server for every worker and replica (its form carries the
    session's CSRF token, so another site cannot sign an operator out either)."""
    found = await signed_in(request, state)
    if found is not None:
        if await _form(request, state, found[1]) is None:
            t = WORDS[language(request.headers.get("accept-language"))]
            return _login_form(request, state, status=403, error=t["csrf"])
        await sessions(state).end(found[1])
    response = to_login()
    response.delete_cookie(COOKIE, path="/console", httponly=True, samesite="strict")
    return response


Handler = Callable[..., Any]


async def _guarded(
    request: Request, state: AppState, page: str, work: Handler | None = None
) -> Response:
    """The page for a signed-in admin: GET renders the form; POST checks the CSRF token and
    runs ``work(key, form)`` for the page's context."""
    found = await signed_in(request, state)
    if found is None:
        return to_login()
    key, session = found
    context: dict[str, Any] = {"key": key, "csrf": sessions(state).csrf(session), "form": {}}
    if request.method == "POST":
        form = await _form(request, state, session)
        if form is None:
            t = WORDS[language(request.headers.get("accept-language"))]
            return render(request, page, status=403, error=t["csrf"], **context)
        context["form"] = {k: str(v) for k, v in form.items() if k != "csrf"}
        if work is not None:
            try:
                context |= await work(key, context["form"])
            except (ServiceError, PolicyError, ValueError) as exc:
                context["error"] = getattr(exc, "message", str(exc))
    elif work is not None and page in (
        "why-not",
        "policy",
        "knowledge-bases",
        "documents",
        "audit",
    ):
        context["form"] = dict(request.query_params)
        try:
            context |= await work(key, context["form"])
        except (ServiceError, PolicyError, ValueError) as exc:
            context["error"] = getattr(exc, "message", str(exc))
    return render(request, page, **context)


@router.api_route("/search", methods=["GET", "POST"])
async def search_as(request: Request, state: StateDep) -> Response:
    """What a user gets for a question, why each passage is visible, and (for the operator
    only) which better-scoring passages are hidden from them and by which rule."""

    async def work(key: ApiKeyConfig, form: dict[str, str]) -> dict[str, Any]:
        as_trusted = key.model_copy(
            update={
                "mode": IdentityMode.TRUSTED,
                "unknown_user": "public",
                "anonymous": "public",
                "user_id_shape": (),
            }
        )
        claims = make_claims(form.get("user_id") or None, _list(form.get("roles")) or None,
                             None, path="form")  # fmt: skip
        query = RetrievalQuery(
            query=form.get("query", "").strip() or " ",
            knowledge_ids=_list(form.get("knowledge_ids")) or ["*"],
            top_k=10,
            claims=claims,
            mode=form.get("mode") or None,  # type: ignore[arg-type]
            actor=f"console:{key.name}",  # the operator acting as the user, not the user
        )
        got = await answer(state, as_trusted, query)
        rows = []
        for chunk in got.chunks:
            why = await explain_visibility(state, key, claims, chunk_id=chunk.chunk_id)
            rule = why["chunks"][0]["acl"] if why["chunks"] else {}
            rows.append({"chunk": chunk, "matched": rule.get("matched_roles", []),
                         "rule": rule.get("rule", "")})  # fmt: skip
        overview = await state.engine.tenant_overview(key.tenant)
        # Every role a chunk names, but those no principal can hold (user:…, anyone: a chunk
        # stored with one is nobody's, and asserting it would be refused).
        held = [r for r in overview["roles"] if reserved_role(r) is None]
        everyone = make_claims(None, held or None, None, path="form")
        seen = {c.chunk_id for c in got.chunks}
        floor = min((c.score for c in got.chunks), default=0.0)
        operator = await answer(state, as_trusted, RetrievalQuery(
            query=query.query, knowledge_ids=query.knowledge_ids, top_k=10, claims=everyone,
            mode=query.mode))  # fmt: skip
        hidden = []
        for chunk in operator.chunks:
            if chunk.chunk_id in seen or chunk.score <= floor:
                continue
            why = await explain_visibility(state, key, claims, chunk_id=chunk.chunk_id)
            rule = why["chunks"][0]["acl"] if why["chunks"] else {}
            hidden.append({"chunk": chunk, "roles": rule.get("access_roles", []),
                           "rule": rule.get("code", "restricted"),
                           "aces": rule.get("aces", [])})  # fmt: skip
        return {
            "rows": rows,
            "hidden": hidden,
            "roles_after": sorted(got.retrieval.principal.roles),
            "identity": identity_view(got.retrieval.principal.identity),
        }

    return await _guarded(request, state, "search", work)


@router.api_route("/why-not", methods=["GET", "POST"])
async def why_not(request: Request, state: StateDep) -> Response:
    """User × document: the knowledge-base grant, the roles after the hierarchy, the chunk's
    access_roles — the answer ``/v1/explain`` gives."""

    async def work(key: ApiKeyConfig, form: dict[str, str]) -> dict[str, Any]:
        documents = [  # picked by title; only what the key could retrieve is offered
            d
            for d in await state.engine.document_titles(key.tenant)
            if key.may_read(d["knowledge_id"])
        ]
        if request.method != "POST":
            return {"documents": documents}
        claims = make_claims(form.get("user_id") or None, _list(form.get("roles")) or None,
                             None, path="form")  # fmt: skip
        found = await explain_visibility(
            state, key, claims, document_id=form.get("document_id", "").strip() or "-"
        )
        return {"explained": found, "documents": documents}

    return await _guarded(request, state, "why-not", work)


@router.get("/audit")
async def audit(request: Request, state: StateDep) -> Response:
    """The audit trail of the key's tenant, by user, document and time."""

    async def work(key: ApiKeyConfig, form: dict[str, str]) -> dict[str, Any]:
        span = (form.get("since") or "7d").strip()
        if not SPAN.fullmatch(span):
            raise ValueError(f"since: {span[:20]!r} is not a span such as 30m, 12h or 7d")
        amount, unit = int(span[:-1]), span[-1]
        delta = {"d": timedelta(days=amount), "h": timedelta(hours=amount)}.get(
            unit, timedelta(minutes=amount)
        )
        events = await state.audit.search(
            tenant=key.tenant,
            document=form.get("document") or None,
            user=form.get("user") or None,
            actor=form.get("actor") or None,
            since=datetime.now(UTC) - delta,
        )
        ids = [d for e in events for d in e.get("documents", [])]
        return {"events": events, "titles": await state.engine.titles_of(key.tenant, ids)}

    return await _guarded(request, state, "audit", work)
