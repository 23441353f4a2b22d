"""``/docs``: Swagger UI served from the files the ``swagger-ui-bundle`` package ships (a
pinned Swagger UI release, at ``/docs/assets/``), never from a CDN: the page works offline
and loads no third-party code. Without that package ``/docs`` is off (404);
``/openapi.json`` is served either way."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs/assets"


def install(app: FastAPI) -> bool:
    """Add ``/docs`` when the Swagger UI files are installed; whether they were."""
    try:
        from swagger_ui_bundle import swagger_ui_path
    except ImportError:
        return False
    app.mount(ASSETS, StaticFiles(directory=swagger_ui_path), name="swagger-ui")

    @app.get("/docs", include_in_schema=False)
    def swagger(request: Request) -> HTMLResponse:
        root = str(request.scope.get("root_path", ""))
        return get_swagger_ui_html(openapi_url=root + "/openapi.json", title=f"{app.title} API",
                                   swagger_js_url=f"{root}{ASSETS}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{root}{ASSETS}/swagger-ui.css",
                                   swagger_favicon_url=f"{root}{ASSETS}/favicon-32x32.png")

    return True
