"""The merchandiser web app: static files shipped in ``serve/ui/`` and its sign-in session.

Mounted outside ``/api/v1`` (it is not part of the API's OpenAPI): ``/ui/`` serves the page
and its ES modules with a strict Content-Security-Policy (scripts and styles from this origin
only, no inline script); ``/ui/session`` exchanges an API key for the session cookie
(``serve/sessions.py``), tells the page its role and CSRF token, and signs out. The app
itself only calls the REST API.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel

from vismerch.catalog import access
from vismerch.serve.auth import Principal, client_address
from vismerch.serve.errors import ApiError
from vismerch.serve.sessions import COOKIE, CSRF_HEADER, IDLE_SECONDS, PER_KEY, Sessions

UI_ROOT = Path(__file__).resolve().parent.parent / "ui"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}
_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".svg": "image/svg+xml",
          ".png": "image/png", ".txt": "text/plain"}

router = APIRouter(include_in_schema=False)
_bearer = HTTPBearer(auto_error=False)


class SessionInfo(BaseModel):
    key_id: str
    role: str
    csrf: str


def _file(rel: str) -> Response:
    try:
        path = (UI_ROOT / rel).resolve()
        found = path.is_relative_to(UI_ROOT) and path.is_file()
    except (ValueError, OSError):  # a NUL byte, a name too long: no such file either
        found = False
    if not found:
        raise ApiError(404, "not_found", f"no such web app file: {rel[:200]!r}")
    media = _TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return FileResponse(path, media_type=media, headers=SECURITY_HEADERS)


@router.get("/")
def root() -> RedirectResponse:
    return RedirectResponse("/ui/", status_code=307)


@router.get("/ui")
def ui_bare() -> RedirectResponse:
    return RedirectResponse("/ui/", status_code=307)


@router.get("/ui/")
def index() -> Response:
    return _file("index.html")


@router.post("/ui/session", response_model=SessionInfo)
def sign_in(request: Request,
            bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)] = None) -> JSONResponse:
    """Exchange the key (sent once as ``Authorization: Bearer``) for the session cookie."""
    principal = request.app.state.auth.principal(bearer.credentials if bearer else None,
                                                 client_address(request))
    if principal.role == "storefront":
        raise ApiError(403, "forbidden", "a storefront key cannot sign in to the web app",
                       hint="use a viewer, merchandiser, publisher or admin key")
    request.state.principal = principal  # the sign-in is audited (the body is empty: no key in the log)
    sid, session = request.app.state.sessions.create(principal.key_id)
    response = JSONResponse({"key_id": principal.key_id, "role": principal.role, "csrf": session.csrf})
    response.set_cookie(COOKIE, sid, max_age=IDLE_SECONDS, path="/", httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")
    return response


@router.get("/ui/session", response_model=SessionInfo)
def who(request: Request) -> SessionInfo:
    session = request.app.state.sessions.get(request.cookies.get(COOKIE))
    if session is None:
        raise ApiError(401, "unauthenticated", "not signed in", hint="sign in with an API key")
    principal = request.app.state.auth.principal_of_id(session.key_id)
    return SessionInfo(key_id=principal.key_id, role=principal.role, csrf=session.csrf)


@router.delete("/ui/session")
def sign_out(request: Request) -> JSONResponse:
    sessions: Sessions = request.app.state.sessions
    sid = request.cookies.get(COOKIE)
    session = sessions.get(sid)
    if session is not None and not session.csrf_ok(request.headers.get(CSRF_HEADER)):
        raise ApiError(403, "csrf", f"signing out needs the {CSRF_HEADER} header of the session")
    if session is not None:  # the sign-out is audited under the session's key
        key = access.get_key(request.app.state.store_of(), session.key_id)
        request.state.principal = Principal(session.key_id, key.role if key else "unknown")
    sessions.drop(sid)
    response = JSONResponse({"signed_out": True})
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response


@router.get("/ui/{rel:path}")
def asset(rel: str) -> Response:
    return _file(rel)


def install(app: FastAPI, per_key: int = PER_KEY) -> None:
    """Add the web app's routes and session store (``per_key`` sessions a key) to ``app``."""
    app.state.sessions = Sessions(per_key=per_key)
    app.include_router(router)
