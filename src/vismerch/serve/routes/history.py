"""The change history in words (who changed what, when), from the audit log of writes."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from vismerch.serve.auth import Principal, require
from vismerch.serve.routes.common import page_limit, workspace
from vismerch.service import history as service
from vismerch.service.history import ChangePage

router = APIRouter(tags=["history"])


@router.get("/history", response_model=ChangePage, summary="Changes in words, newest first")
def history(request: Request,
            collection: Annotated[str | None, Query(min_length=1, max_length=200,
                                                    description="Only changes to this collection")] = None,
            before: Annotated[int | None, Query(ge=1, le=2**62, description="Cursor: changes older "
                                                "than this id (the previous page's next_before)")] = None,
            limit: Annotated[int, Query(ge=1, le=1000)] = 50,
            principal: Principal = Depends(require("viewer"))) -> ChangePage:
    return service.history(workspace(request), collection=collection, before=before,
                           limit=page_limit(request, limit), admin=principal.role == "admin")
