"""Every error answered in the one documented shape (retrieval_svc.errors), its message in
the reader's language (retrieval_svc.languages)."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from retrieval_svc.errors import INTERNAL_ERROR_BODY, ServiceError, invalid_body
from retrieval_svc.languages import Language, error_body, language

log = logging.getLogger("retrieval_svc.app")


def request_language(request: Request) -> Language:
    """The language of the answer to ``request``: its Accept-Language, else the server's
    default (RSVC_DEFAULT_LANGUAGE)."""
    state = getattr(request.app.state, "rsvc", None)
    default = state.settings.default_language if state is not None else "en"
    return language(request.headers.get("accept-language"), language(default))


def install_error_handlers(app: FastAPI) -> None:
    """Render every error in the one documented shape."""

    def said(request: Request, body: dict[str, object]) -> dict[str, object]:
        return error_body(body, request_language(request))

    @app.exception_handler(ServiceError)
    async def _service_error(request: Request, exc: ServiceError) -> JSONResponse:
        body = said(request, exc.body())
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        err = invalid_body(exc.errors())
        return JSONResponse(said(request, err.body()), status_code=err.status_code)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> Response:
        # A bug outside InternalErrorMiddleware (in an outer middleware): the same answer.
        log.exception("unhandled error: %s", type(exc).__name__)
        return Response(INTERNAL_ERROR_BODY, status_code=500, media_type="application/json")

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(
            said(request, {"error_code": exc.status_code, "error_msg": str(exc.detail)}),
            status_code=exc.status_code,
            headers=exc.headers,
        )
