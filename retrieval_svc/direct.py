"""The routes with a body, answered without FastAPI's per-request machinery.

``POST /retrieval``, ``POST /v1/search`` and ``POST /v1/tools/unified-search`` carry the
traffic. On each request FastAPI walks its routers, solves the dependencies, validates the
parsed body through a ``TypeAdapter``, validates the endpoint's result again against the
``response_model`` before serialising it, all under an exception middleware and an exit
stack. Issue #17 measured that at about 0.25 ms of CPU per request, a sixth of what the
service spends on one, when Elasticsearch needs 3 ms for the search itself.

``DirectRoutes`` answers these routes with the same parts, put together once: the endpoint
functions, their request and response models (``model_validate_json``; ``render``, which is
``model_dump_json``'s JSON, written by orjson where that is the same),
``authenticate`` and the service's error shapes. It sits innermost, so the edge middlewares
(path form, body limit, request id, metrics, access log, ``no-store``) apply as before, and
everything else (other routes, other methods) goes on to FastAPI, which still declares these
routes for OpenAPI and ``/docs``. ``/v1/merge``, ``/v1/citations/resolve`` and ``/v1/explain``
are answered here too, for another reason: the key is checked before the body is read (FastAPI
parses the body first, so a caller without a key learnt whether its JSON was valid), and every
error has the one shape. An unexpected exception goes on to ``InternalErrorMiddleware``:
500 / 5000, logged, as on any route.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar, get_args

import orjson
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from retrieval_svc.auth.keys import ApiKeyConfig
from retrieval_svc.deps import authenticate
from retrieval_svc.errors import InvalidRequest, ServiceError, invalid_body
from retrieval_svc.languages import error_body, explained, language
from retrieval_svc.refusals import note_refusal
from retrieval_svc.state import AppState

Endpoint = Callable[[Any, ApiKeyConfig, AppState], Awaitable[Any]]
# Answers whose words follow the reader's language (their codes and values do not).
LOCALIZED: dict[str, Callable[[dict[str, Any], str], dict[str, Any]]] = {"/v1/explain": explained}
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class DirectRoute:
    """One route answered directly: its FastAPI declaration and what that declares."""

    route: APIRoute  # what the metrics and the access log name (``scope["route"]``)
    body: type[BaseModel]
    response: type[BaseModel]
    endpoint: Endpoint
    plain: bool = False  # rendered by orjson (``render``), else by pydantic

    @classmethod
    def of(cls, route: APIRoute) -> DirectRoute:
        """``route``, which must be ``async def f(body: Model, key, state)`` with a response
        model and no other dependencies: the shape of the retrieval endpoints. Anything else
        is refused at start, so nothing FastAPI would have run is skipped in silence."""
        if list(inspect.signature(route.endpoint).parameters) != ["body", "key", "state"]:
            raise TypeError(f"{route.path}: a direct route's endpoint is f(body, key, state)")
        if route.dependencies:
            raise TypeError(f"{route.path}: a direct route cannot have extra dependencies")
        body = route.body_field.field_info.annotation if route.body_field else None
        if not (isinstance(body, type) and issubclass(body, BaseModel)):
            raise TypeError(f"{route.path}: a direct route needs a pydantic body model")
        response = route.response_model
        if not (isinstance(response, type) and issubclass(response, BaseModel)):
            raise TypeError(f"{route.path}: a direct route needs a pydantic response model")
        return cls(
            route=route,
            body=body,
            response=response,
            endpoint=route.endpoint,
            plain=plain_fields(response),
        )


class DirectRoutes:
    """ASGI middleware: ``POST`` to one of ``routes`` is answered here, the rest passes on."""

    def __init__(self, app: ASGIApp, routes: Iterable[APIRoute]) -> None:
        self.app = app
        self.routes = {r.path: DirectRoute.of(r) for r in routes}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        direct = (
            self.routes.get(scope["path"])
            if scope["type"] == "http" and scope["method"] == "POST"
            else None
        )
        if direct is None:
            await self.app(scope, receive, send)
            return
        scope["route"] = direct.route
        state: AppState = scope["app"].state.rsvc
        authorization = content_type = accept_language = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value.decode("latin-1")
            elif name == b"content-type":
                content_type = value
            elif name == b"accept-language":
                accept_language = value.decode("latin-1")
        lang = language(accept_language, language(state.settings.default_language))
        response: Response
        key: ApiKeyConfig | None = None
        body: BaseModel | None = None
        raw: bytes | None = None
        try:
            key = await authenticate(state, authorization)
            raw = await read_body(receive)
            body = parse_body(direct.body, content_type, raw)
            result = await direct.endpoint(body, key, state)
            if lang != "en" and isinstance(result, dict) and direct.route.path in LOCALIZED:
                result = LOCALIZED[direct.route.path](result, lang)
            if not isinstance(result, direct.response):
                result = direct.response.model_validate(result)
            plain = direct.plain and type(result) is direct.response  # not a subclass's fields
            response = Response(render(result, plain), media_type="application/json")
        except ClientDisconnect:
            return  # nobody to answer
        except ServiceError as exc:
            note_refusal(
                state.metrics,
                state.refusals,
                direct.route.path,
                key,
                exc,
                knowledge_id=_knowledge(body),
                raw=raw if body is None else None,
            )
            response = JSONResponse(
                error_body(exc.body(), lang), status_code=exc.status_code, headers=exc.headers
            )
        await response(scope, receive, send)


def _knowledge(body: BaseModel | None) -> str:
    """The knowledge base(s) a request named, for the console's list of refusals."""
    found = getattr(body, "knowledge_id", None) or getattr(body, "knowledge_ids", None)
    if isinstance(found, list | tuple):
        return ", ".join(str(k) for k in found[:5])
    return found if isinstance(found, str) else ""


@functools.cache
def plain_fields(model: type[BaseModel]) -> bool:
    """Whether orjson over ``model``'s fields writes what pydantic writes: they are its JSON
    under their own names, as they are (no alias, no excluded or computed field, no
    serializer or JSON setting of its own), and so is every model a field declares, which
    has no subclass either (pydantic writes a value by the type its field declares)."""
    config = model.model_config
    decorators = model.__pydantic_decorators__
    if (
        model.model_computed_fields
        or decorators.field_serializers
        or decorators.model_serializers
        or any(key.startswith("ser_json") for key in config)
        or config.get("extra") == "allow"
        or any(
            f.alias is not None or f.serialization_alias is not None or f.exclude
            for f in model.model_fields.values()
        )
    ):
        return False
    declared = {m for f in model.model_fields.values() for m in _models_in(f.annotation)}
    return all(plain_fields(m) and not m.__subclasses__() for m in declared)


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for arg in get_args(annotation):
        yield from _models_in(arg)


# Everything orjson would write its own way (datetimes, dataclasses, subclasses of str, int,
# dict…) goes to ``_nested`` instead, which takes only models: the rest ends the fast path.
_PASSTHROUGH = (
    orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def _nested(value: object) -> dict[str, Any]:
    if isinstance(value, BaseModel):
        if plain_fields(type(value)):
            return value.__dict__
        return value.model_dump(mode="json", by_alias=True)
    raise TypeError  # not JSON's own type: pydantic renders the whole answer


def render(result: BaseModel, plain: bool) -> bytes:
    """``result.model_dump_json(by_alias=True)``, the same JSON, by orjson when the model is
    ``plain_fields`` and its values are JSON's own types and models: a fifth of the CPU for
    an answer's ten chunk dicts, which pydantic types one value at a time (issue #38). Any
    other value (a datetime, a big integer, a non-text key) is left to pydantic."""
    if plain:
        try:
            return orjson.dumps(result.__dict__, default=_nested, option=_PASSTHROUGH)
        except TypeError:
            pass
    return result.model_dump_json(by_alias=True).encode()


async def read_body(receive: Receive) -> bytes:
    """The whole request body (the body limit is enforced outside, by ``BodyLimitMiddleware``)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def is_json(content_type: bytes | None) -> bool:
    """``application/json`` or ``application/<anything>+json``, parameters aside: what FastAPI
    parses as JSON (its ``strict_content_type``). A form or text/plain body is refused, so a
    browser page elsewhere cannot send one without a CORS preflight."""
    if not content_type:
        return False
    kind, _, subtype = content_type.split(b";", 1)[0].strip().lower().partition(b"/")
    return kind == b"application" and (subtype == b"json" or subtype.endswith(b"+json"))


def parse_body(model: type[M], content_type: bytes | None, raw: bytes) -> M:
    """The validated body, or the 400 saying what is wrong with it and where."""
    if not raw:
        raise InvalidRequest("body: request body is required", path="body")
    if not is_json(content_type):
        raise InvalidRequest(
            "body: send the body as JSON, with Content-Type: application/json", path="body"
        )
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise invalid_body(exc.errors(include_url=False)) from None
