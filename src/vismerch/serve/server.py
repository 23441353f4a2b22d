"""Run an app as ``vismerch serve`` does: uvicorn on one event loop, warning-level log, no
access log, one compute thread per request, and a deadline for each request's headers.

Requests already run side by side (the thread pool), so torch's and FAISS's intra-op thread
pools only add waiting: on a busy 2-core host one small torch op (a colour search's CIEDE2000
over a few thousand palette entries) took about 10 ms with two intra-op threads and a few
microseconds with one. Ingest jobs run in their own processes and keep their own settings.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from vismerch.config import setting


class HeaderDeadline(H11Protocol):
    """uvicorn's h11 protocol with a deadline for headers: a connection that has not sent a
    whole request head within ``header_timeout`` seconds of connecting (or of its previous
    answer) is closed, so half-sent requests cannot hold sockets forever. uvicorn itself only
    times out idle keep-alive connections, and any byte received stops that timer."""

    header_timeout = 10.0
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.cycle is not None and not self.cycle.response_complete:
            self._disarm()  # the head arrived: the body has serve_body_timeout (serve/guard.py)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.cycle is None or self.cycle.response_complete:  # waiting for the next request
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.header_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def protocol(header_timeout: float) -> type[HeaderDeadline]:
    return type("HeaderDeadline", (HeaderDeadline,), {"header_timeout": float(header_timeout)})


def one_thread_per_request() -> None:
    """Intra-op thread pools of torch and FAISS set to one thread in this process."""
    with contextlib.suppress(ImportError):
        import torch

        torch.set_num_threads(1)
    with contextlib.suppress(ImportError, AttributeError):
        import faiss

        faiss.omp_set_num_threads(1)


def run(app: Any, host: str = "127.0.0.1", port: int = 8000) -> None:
    import uvicorn

    one_thread_per_request()
    settings = getattr(app.state, "settings", None)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False,
                http=protocol(setting(settings, "serve_header_timeout")))
