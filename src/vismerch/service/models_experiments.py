"""Typed inputs and results of the experiments service (the API's bodies and answers)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Variant(BaseModel):
    name: str = Field(description="The version's name (the first variant is the control)")
    version_id: int
    weight: float = Field(description="Share of the counted visitors, in percent")


class Experiment(BaseModel):
    id: int
    collection: str
    name: str
    status: str = Field(description="running | stopped | promoted")
    variants: list[Variant]
    holdout: float = Field(description="Share of visitors kept on the live version and not counted")
    metric: str
    guardrails: list[str]
    min_lift: float = Field(description="The relative lift the plan is sized to detect")
    plan: dict[str, Any] | None = Field(None, description="Sample size and days needed, from recent traffic")
    starts_at: str
    ends_at: str | None = None
    created_at: str
    created_by: str | None = None
    ended_at: str | None = None
    ended_by: str | None = None
    winner: str | None = None


class ExperimentIn(BaseModel):
    collection: str = Field(min_length=1, max_length=200)
    variants: list[str] = Field(min_length=2, max_length=8,
                                description="Version names; the first is the control")
    split: list[float] | None = Field(None, description="Percent per variant, summing to 100 (default even)")
    holdout: float = Field(0.0, ge=0, lt=0.5, description="Share kept on the live version, not counted")
    metric: str = Field("revenue_per_visitor",
                        description="revenue_per_visitor | conversion_per_visitor | ctr")
    guardrails: list[str] = Field(default_factory=list, max_length=4)
    min_lift: float = Field(0.05, gt=0, le=1, description="Relative lift to detect (0.05 = +5%)")
    starts_at: str | None = Field(None, max_length=40, description="RFC 3339; default now")
    ends_at: str | None = Field(None, max_length=40, description="RFC 3339; default open until stopped")
    name: str | None = Field(None, max_length=200)


class PromoteIn(BaseModel):
    variant: str | None = Field(None, max_length=200, description="Default: the results' winner")
