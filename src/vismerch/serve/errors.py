"""Every failure as a JSON body ``{"error": {code, message, field, hint}}``, never a traceback.

Bad requests (FastAPI validation, vismerch's typed errors) get 4xx naming the field; any
other exception is logged here on the server with its traceback and answered with a plain
500 that says nothing about the code.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from vismerch import errors as vm

log = logging.getLogger("vismerch.serve")


class ErrorDetail(BaseModel):
    code: str
    message: str
    field: str | None = None
    hint: str | None = None


class ErrorBody(BaseModel):
    error: ErrorDetail


class ApiError(Exception):
    """An HTTP error the routes raise themselves (auth, preconditions, caps)."""

    def __init__(self, status: int, code: str, message: str, *, field: str | None = None,
                 hint: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.field, self.hint, self.headers = field, hint, headers


# the statuses every route may answer with an ErrorBody (documented in the OpenAPI)
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text} for status, text in (
        (400, "Bad request"),
        (401, "No key, or an unknown, expired or revoked key"),
        (403, "The key's role may not do this"),
        (404, "Not found"),
        (408, "The request body stalled (serve_body_timeout)"),
        (409, "Conflicts with the current state"),
        (412, "If-Match does not match the current ETag"),
        (413, "Body too large (serve_body_max_bytes; uploads: serve_upload_max_bytes)"),
        (422, "Invalid input (the body names the field)"),
        (428, "If-Match is required for this write"),
        (429, "Rate limit exceeded (see Retry-After)"),
    )
}


CLIENT_GONE = 499  # the client went away before its answer (nginx's code): not a server error
REFUSALS = {401, 403, 429}  # counted per process (GET /audit/refusals): guesses, role and CSRF misses


def count_refusal(scope: dict, status: int, code: str) -> None:
    """Count a 401/403/429 by status and code in the app's ``refusals`` counter."""
    app = scope.get("app")
    counter = getattr(getattr(app, "state", None), "refusals", None)
    if status in REFUSALS and counter is not None:
        counter[f"{status} {code}"] += 1


def body(code: str, message: str, field: str | None = None, hint: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "field": field, "hint": hint}}


def _json(status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(payload, status_code=status, headers=headers)


def status_of(exc: vm.VismerchError) -> tuple[int, str]:
    """HTTP status and error code for a vismerch error (the most specific class wins)."""
    for cls, status, code in (
        (vm.Stale, 412, "stale"),
        (vm.NotFound, 404, "not_found"),
        (vm.Busy, 409, "busy"),
        (vm.Conflict, 409, "conflict"),
        (vm.InvalidInput, 422, "invalid"),
        (vm.DecodeError, 422, "bad_image"),
        (vm.UsageError, 422, "invalid"),
    ):
        if isinstance(exc, cls):
            return status, code
    return 500, "failed"


def _field_of(loc: tuple[Any, ...] | list[Any]) -> str:
    """``("body", "items", 0, "id")`` -> ``items[0].id``; ``("query", "limit")`` -> ``limit``."""
    parts = [p for p in loc if p not in ("body", "query", "path", "header", "cookie")] or list(loc)
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def install(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        field = _field_of(first.get("loc", ()))
        message = f"{field}: {first.get('msg', 'invalid')}" if field else str(first.get("msg"))
        return _json(422, body("invalid", message, field or None))

    @app.exception_handler(ApiError)
    async def _api(request: Request, exc: ApiError) -> JSONResponse:
        count_refusal(request.scope, exc.status, exc.code)
        return _json(exc.status, body(exc.code, exc.message, exc.field, exc.hint), exc.headers)

    @app.exception_handler(vm.VismerchError)
    async def _vismerch(request: Request, exc: vm.VismerchError) -> JSONResponse:
        status, code = status_of(exc)
        if status >= 500:
            log.error("job failed on %s %s: %s", request.method, request.url.path, exc)
            return _json(500, body("failed", exc.message, hint=exc.hint))
        headers = {"ETag": f'"{exc.current_etag}"'} if getattr(exc, "current_etag", None) else None
        return _json(status, body(code, exc.message, getattr(exc, "field", None), exc.hint), headers)

    @app.exception_handler(ClientDisconnect)
    async def _gone(request: Request, exc: ClientDisconnect) -> Response:
        return Response(status_code=CLIENT_GONE)  # nobody reads it; the audit row says 499

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        carried = getattr(exc, "error", None)  # serve/guard.py's body refusals carry an ApiError
        if isinstance(carried, ApiError):
            return await _api(request, carried)
        if isinstance(exc.__cause__, ClientDisconnect):  # FastAPI's 400 for a body cut short
            return Response(status_code=CLIENT_GONE)
        code = {404: "not_found", 405: "method_not_allowed", 408: "timeout",
                413: "too_large"}.get(exc.status_code, "http_error")
        return _json(exc.status_code, body(code, str(exc.detail)), getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return _json(500, body("internal", "internal server error (logged on the server)"))
