"""Run an app as ``vismerch serve`` does: uvicorn on one event loop, warning-level log, no
access log, and one compute thread per request.

Requests already run side by side (the thread pool), so torch's and FAISS's intra-op thread
pools only add waiting: on a busy 2-core host one small torch op (a colour search's CIEDE2000
over a few thousand palette entries) took about 10 ms with two intra-op threads and a few
microseconds with one. Ingest jobs run in their own processes and keep their own settings.
"""

from __future__ import annotations

import contextlib
from typing import Any


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
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
