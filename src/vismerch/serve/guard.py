"""What a request passes before any route reads its body: who is calling, how big the body
is, and how slowly it arrives (ASGI middleware, inside the audit middleware).

A write to ``/api/v1`` is authenticated here, from its headers alone (key or session cookie
with its CSRF token), so a request without a key is answered 401 without a byte of its body
read, however large or malformed; routes reuse the principal. Then the body is capped by
``Content-Length`` and by the bytes streamed (413 naming ``body``; search-by-image uploads
have serve_upload_max_bytes), and a body that stalls longer than ``serve_body_timeout``
between chunks is answered 408. Slow headers never reach an ASGI app: ``serve/server.py``
times them out.

FastAPI's own ``max_body_size`` is not used: its 413 is plain text and, for an over-long
``Content-Length``, replaces whatever the app answered (a 401 included), while every error
here is JSON and authentication comes first.
"""

from __future__ import annotations

from typing import Any

import anyio
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

from vismerch.serve import errors
from vismerch.serve.auth import authenticate
from vismerch.serve.sessions import WRITE_METHODS

UPLOAD_PATHS = ("/search/image",)  # raw image bodies: serve_upload_max_bytes instead


class RequestGuard:
    def __init__(self, app: Any, *, prefix: str, body_max: int, upload_max: int, body_timeout: float):
        self.app, self.prefix, self.body_timeout = app, prefix, body_timeout
        self.body_max, self.upload_max = body_max, upload_max

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        upload = path.startswith(self.prefix) and path[len(self.prefix):] in UPLOAD_PATHS
        cap = max(self.body_max, self.upload_max) if upload else self.body_max
        try:
            if scope["method"] in WRITE_METHODS and path.startswith(self.prefix):
                await authenticate(Request(scope))  # headers only: receive is never called
            if (_content_length(scope) or 0) > cap:
                raise _too_large(cap, "image" if upload else "body")
        except errors.ApiError as exc:
            errors.count_refusal(scope, exc.status, exc.code)
            payload = errors.body(exc.code, exc.message, exc.field, exc.hint)
            # Connection: close, so the unread body is dropped with the socket, never parsed
            response = JSONResponse(payload, status_code=exc.status,
                                    headers={**(exc.headers or {}), "Connection": "close"})
            await response(scope, receive, send)
            return
        await self.app(scope, self._guarded(receive, cap, "image" if upload else "body"), send)

    def _guarded(self, receive: Any, cap: int, field: str) -> Any:
        """``receive`` with the byte cap and a deadline per chunk while the body is arriving
        (afterwards a response may wait on it for a disconnect as long as it likes)."""
        seen, body_done = 0, False

        async def guarded_receive() -> dict:
            nonlocal seen, body_done
            if body_done:
                return await receive()
            with anyio.move_on_after(self.body_timeout):
                message = await receive()
                body_done = message["type"] != "http.request" or not message.get("more_body", False)
                seen += len(message.get("body", b""))
                if seen > cap:
                    raise BodyRefused(_too_large(cap, field))
                return message
            raise BodyRefused(errors.ApiError(
                408, "timeout", f"{field}: the request body stalled for over {self.body_timeout:g} s",
                field=field, hint="serve_body_timeout", headers={"Connection": "close"}))

        return guarded_receive


def _content_length(scope: dict) -> int | None:
    for name, value in scope.get("headers") or ():
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _too_large(cap: int, field: str) -> errors.ApiError:
    return errors.ApiError(413, "too_large", f"{field}: the request body is over {cap} bytes",
                           field=field, hint="serve_body_max_bytes (image uploads: serve_upload_max_bytes)",
                           headers={"Connection": "close"})


class BodyRefused(HTTPException):
    """An ApiError raised while the body streams in: an HTTPException, because FastAPI turns
    any other exception out of a body read into a 400; ``errors.py`` answers it as the
    ApiError it carries."""

    def __init__(self, error: errors.ApiError):
        super().__init__(error.status, error.message, error.headers)
        self.error = error
