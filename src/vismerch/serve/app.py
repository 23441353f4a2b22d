"""The HTTP API: ``create_app(workspace, settings)`` builds the FastAPI app over one workspace.

Routes live in ``serve/routes/`` (one module per resource), each only parsing, calling the
service layer and rendering. This module wires what they share: the versioned prefix, the
error bodies, auth, the audit log of every write, CORS (off unless configured).
"""

from __future__ import annotations

import contextlib
import importlib
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.to_thread
from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute

from vismerch import __version__
from vismerch.config import Settings, load_settings, setting
from vismerch.serve import docs, errors
from vismerch.serve.audit import AuditMiddleware
from vismerch.serve.auth import Authenticator, FailureThrottle, RateLimiter
from vismerch.serve.guard import RequestGuard
from vismerch.serve.routes import shop, ui

API_PREFIX = "/api/v1"
ROUTE_MODULES = ("health", "storefront", "products", "search", "duplicates", "quality", "admin",
                 "versions", "collections", "rules", "query_rules", "jobs", "plan", "events", "experiments",
                 "history")


def needed_role(route: APIRoute) -> str | None:
    """The role a route's ``require(...)`` dependency asks for; None for a public route."""
    stack = list(route.dependant.dependencies)
    while stack:
        dep = stack.pop()
        role = getattr(dep.call, "needed_role", None)
        if role:
            return role
        stack.extend(dep.dependencies)
    return None


def route_table(router: APIRouter) -> list[tuple[str, str, str | None]]:
    """``(method, full path, needed role)`` of every route of ``router``."""
    return [(method, API_PREFIX + route.path, needed_role(route))
            for route in router.routes if isinstance(route, APIRoute) for method in sorted(route.methods)]


def create_app(workspace: Any, settings: Settings | None = None, *, threads: int | None = None) -> FastAPI:
    """The API over ``workspace`` (an open service Workspace: store per thread, settings).
    ``threads``: how many sync requests run at once (anyio's pool; default 40)."""
    settings = settings or getattr(workspace, "settings", None) or load_settings()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if threads:
            anyio.to_thread.current_default_thread_limiter().total_tokens = threads
        yield

    def store_of() -> Any:
        return workspace.store

    body_max = int(setting(settings, "serve_body_max_bytes"))
    app = FastAPI(
        title="vismerch", version=__version__,
        description="Visual merchandising API: catalog, search, duplicates, quality, collections, "
                    "rules, arrangements, versions, ingest jobs, plan, and a storefront read.",
        openapi_url="/openapi.json", docs_url=None, redoc_url=None, lifespan=lifespan,
    )
    app.state.workspace = workspace
    app.state.settings = settings
    app.state.store_of = store_of
    app.state.auth = Authenticator(
        store_of, RateLimiter(setting(settings, "serve_rate_limit"), setting(settings, "serve_rate_burst")),
        FailureThrottle(setting(settings, "serve_auth_fail_limit"),
                        setting(settings, "serve_auth_fail_window")),
        RateLimiter(setting(settings, "serve_thumbnail_rate_limit"),
                    setting(settings, "serve_thumbnail_rate_burst")))
    app.state.client_ip_header = setting(settings, "serve_client_ip_header")
    app.state.refusals = Counter()  # 401/403/429 by status and code, this process (GET /audit/refusals)
    errors.install(app)
    app.state.route_table = []
    upload_max = int(setting(settings, "serve_upload_max_bytes"))
    for name in ROUTE_MODULES:
        module = importlib.import_module(f"vismerch.serve.routes.{name}")
        app.include_router(module.router, prefix=API_PREFIX, responses=errors.ERROR_RESPONSES)
        app.state.route_table += route_table(module.router)
        if hasattr(module, "setup"):  # per-app state a module keeps (caches)
            module.setup(app)
    ui.install(app, int(setting(settings, "serve_sessions_per_key")))  # web app: /ui/, outside /api/v1
    shop.install(app)  # the storefront example page (/shop/), outside /api/v1 too
    docs.install(app)  # Swagger UI from the package's own files, or none (serve/docs.py)
    app.add_middleware(RequestGuard, prefix=API_PREFIX, body_max=body_max, upload_max=upload_max,
                       body_timeout=float(setting(settings, "serve_body_timeout")))
    app.add_middleware(AuditMiddleware, store_of=store_of)
    origins = [o.strip() for o in str(setting(settings, "serve_cors_origins")).split(",") if o.strip()]
    if origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=origins, allow_credentials=False,
                           allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                           allow_headers=["Authorization", "X-API-Key", "Content-Type", "If-Match",
                                          "If-None-Match"], expose_headers=["ETag", "Retry-After"])
    return app
