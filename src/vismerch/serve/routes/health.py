"""GET /health: no key needed; says the server is up and which version answers."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from vismerch import __version__

router = APIRouter(tags=["health"])


class Health(BaseModel):
    status: str
    version: str


@router.get("/health", response_model=Health, summary="Liveness (no key needed)")
def health() -> Health:
    return Health(status="ok", version=__version__)
