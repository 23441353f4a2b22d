"""The audit log of every write an authenticated key makes through the API (ASGI middleware,
outermost but for CORS).

The row is written in the same transaction as the write it records (``catalog/
audit_context.py``): a crash after the commit still leaves it. Its HTTP status is filled in
as the response starts, so a client that has its answer finds a complete row. A write
refused before it wrote anything (a 4xx, a 500) gets its row then too. A route that answers
a POST without writing (a preview) sets ``request.state.read_only``; a client that went
away before any answer is recorded as 499, not as a server error.
"""

from __future__ import annotations

import json
from typing import Any

import anyio.to_thread
from starlette.requests import ClientDisconnect

from vismerch.catalog import access
from vismerch.catalog.audit_context import audited
from vismerch.serve.sessions import WRITE_METHODS

BODY_BYTES = 4096  # the start of a JSON write body is kept in the audit row


class AuditMiddleware:
    def __init__(self, app: Any, store_of: Any):
        self.app, self.store_of = app, store_of

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] not in WRITE_METHODS:
            await self.app(scope, receive, send)
            return
        seen: dict[str, Any] = {"body": b"", "recorded": False, "gone": False}
        json_body = b"json" in dict(scope.get("headers") or []).get(b"content-type", b"")

        async def receive_and_keep() -> dict:
            message = await receive()
            if json_body and message.get("type") == "http.request":
                seen["body"] = (seen["body"] + message.get("body", b""))[:BODY_BYTES]
            seen["gone"] = seen["gone"] or message.get("type") == "http.disconnect"
            return message

        async def send_and_record(message: dict) -> None:
            if message["type"] == "http.response.start":
                await self._record(scope, seen, pending, message["status"])
            await send(message)

        with audited(lambda: _row(scope, seen)) as pending:
            try:
                await self.app(scope, receive_and_keep, send_and_record)
            except ClientDisconnect:
                seen["gone"] = True  # nothing to answer: not a 500, not a traceback in the log
            finally:
                await self._record(scope, seen, pending, 499 if seen["gone"] else 500)

    async def _record(self, scope: dict, seen: dict[str, Any], pending: dict[str, Any],
                      status: int) -> None:
        if seen["recorded"]:
            return
        seen["recorded"] = pending["closed"] = True  # closed: the writes below are the audit's own
        if pending["row_id"] is not None:  # written with the write: its status now
            await anyio.to_thread.run_sync(access.set_status, self.store_of(), pending["row_id"], status)
            return
        row = _row(scope, seen)
        if row is not None:  # nothing was written (refused, failed): the attempt is recorded
            await anyio.to_thread.run_sync(lambda: access.record(
                self.store_of(), row["actor"], row["action"], role=row["role"], target=row["target"],
                status=status, detail=row["detail"]))


def _row(scope: dict, seen: dict[str, Any]) -> dict[str, Any] | None:
    """The audit row of this request, or None when there is no key to name (yet) or the
    route only reads."""
    state = scope.get("state") or {}
    principal = state.get("principal")
    if principal is None or state.get("read_only") or state.get("audited_in_log"):
        return None  # audited_in_log: POST /events, whose log keeps each event's key
    detail: dict[str, Any] = {}
    if scope.get("query_string"):
        detail["query"] = scope["query_string"].decode(errors="replace")
    if seen["body"]:
        try:
            detail["body"] = json.loads(seen["body"])
        except ValueError:
            detail["body"] = seen["body"].decode(errors="replace")
    return {"actor": principal.key_id, "role": principal.role, "target": scope["path"],
            "action": f"{scope['method']} {scope['path']}", "status": None, "detail": detail or None}
