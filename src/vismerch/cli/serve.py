"""`vismerch serve STORE [--host 127.0.0.1] [--port 8000]`: the REST API (uvicorn + FastAPI)."""

from __future__ import annotations

from typing import Annotated

import typer

from vismerch.cli.output import StoreArg, say


def serve_cmd(
    store: StoreArg,
    host: Annotated[str, typer.Option(
        "--host", help="Address to bind. The default is loopback only; "
        "put a TLS proxy in front before binding wider.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="TCP port.")] = 8000,
    workers: Annotated[int, typer.Option("--threads", min=1, max=256,
                                         help="Threads answering requests at once.")] = 40,
    cors_origins: Annotated[str | None, typer.Option(
        "--cors-origins", help="Comma-separated origins allowed by CORS (setting: serve_cors_origins; "
        "default: CORS off).")] = None,
    rate_limit: Annotated[float | None, typer.Option(
        "--rate-limit", min=0, help="Requests per second per key, 0 = no limit "
        "(setting: serve_rate_limit).")] = None,
) -> None:
    """Serve the store over HTTP: /api/v1 (keys: `vismerch keys create`), OpenAPI at /openapi.json.
    Settings serve_* (env VISMERCH_SERVE_*, --config, --setting) tune limits and CORS."""
    from vismerch.cli.context import open_workspace
    from vismerch.serve.app import create_app
    from vismerch.serve.server import run

    workspace = open_workspace(store, {"serve_cors_origins": cors_origins, "serve_rate_limit": rate_limit},
                               writable=True)
    app = create_app(workspace, workspace.settings, threads=workers)

    say(f"serving {store} on http://{host}:{port}  (OpenAPI: http://{host}:{port}/openapi.json)")
    try:
        run(app, host=host, port=port)
    finally:
        if workspace.jobs is not None:  # a running ingest job outlives the server
            workspace.jobs.detach()
        workspace.close()


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_cmd)
