"""POST /plan: size and cost a workload on candidate GPUs (the JSON of ``vismerch plan --json``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from vismerch.serve.auth import require
from vismerch.service import plan
from vismerch.service.plan import PlanRequest, PlanResult

router = APIRouter(tags=["plan"])


@router.post("/plan", response_model=PlanResult, summary="Plan GPUs for a workload (offline, no store read)")
def make_plan(request: PlanRequest, _: object = Depends(require("viewer"))) -> dict[str, Any]:
    return plan.make_plan(request)
