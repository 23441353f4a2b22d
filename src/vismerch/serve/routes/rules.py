"""Merchandising rules: list (by collection, active now or not), add, change, delete.
Dates are RFC 3339 (UTC unless an offset is given), the end exclusive."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request

from vismerch.serve.auth import require
from vismerch.serve.routes.common import Paging, workspace
from vismerch.service import rules
from vismerch.service.models import Done
from vismerch.service.models_merch import (
    MatchCount,
    ProductField,
    Rule,
    RuleCheck,
    RuleCheckIn,
    RuleIn,
    RuleKindInfo,
    RulePatch,
)
from vismerch.service.paging import Page, paginate

router = APIRouter(tags=["rules"])
merchandiser = Depends(require("merchandiser"))
RuleId = Annotated[int, Path(ge=1, le=2**62, description="Rule id")]
Collection = Annotated[str | None, Query(min_length=1, max_length=200,
                                         description="Only this collection's products")]


@router.get("/rules", response_model=Page[Rule], summary="Rules by id, by collection and whether active now")
def list_rules(request: Request, paging: Paging,
               collection: Annotated[str | None, Query(min_length=1, max_length=200,
                                                       description="Rules scoped to it")] = None,
               active: Annotated[bool | None, Query(description="In force now (or not)")] = None,
               _: object = Depends(require("viewer"))) -> Page[Rule]:
    return paginate(rules.list_rules(workspace(request), collection, active), lambda r: [r.id], *paging)


@router.post("/rules", response_model=Rule, status_code=201, summary="Add a rule")
def add_rule(request: Request, body: RuleIn, _: object = merchandiser) -> Rule:
    return rules.add_rule(workspace(request), **body.model_dump())


@router.get("/rules/kinds", response_model=list[RuleKindInfo], summary="The rule kinds and what each needs")
def rule_kinds(_: object = Depends(require("viewer"))) -> list[RuleKindInfo]:
    return rules.kinds()


@router.get("/rules/fields", response_model=list[ProductField],
            summary="The product fields a rule's condition may use, with common values")
def rule_fields(request: Request, collection: Collection = None,
                _: object = Depends(require("viewer"))) -> list[ProductField]:
    return rules.product_fields(workspace(request), collection)


@router.get("/rules/count", response_model=MatchCount,
            summary="How many products a condition matches now (the rule form's live count)")
def match_count(request: Request,
                where: Annotated[str, Query(min_length=1, max_length=4000,
                                            description='e.g. brand == "acme"')],
                collection: Collection = None,
                _: object = Depends(require("viewer"))) -> MatchCount:
    return rules.count_matches(workspace(request), where, collection)


def _read_only(request: Request) -> None:
    """A check writes nothing: not audited."""
    request.state.read_only = True


@router.post("/rules/check", response_model=RuleCheck, dependencies=[Depends(_read_only)],
             summary="Validate a rule before saving it and list the rules it conflicts with")
def check_rule(request: Request, body: RuleCheckIn, _: object = merchandiser) -> RuleCheck:
    fields = body.model_dump(exclude_unset=True)
    rule_id = fields.pop("id", None)
    if rule_id is None:
        fields = {**body.model_dump(exclude={"id"})}
    return rules.check_rule(workspace(request), fields, rule_id)


@router.get("/rules/{rule_id}", response_model=Rule, summary="One rule")
def get_rule(request: Request, rule_id: RuleId, _: object = Depends(require("viewer"))) -> Rule:
    return rules.get_rule(workspace(request), rule_id)


@router.patch("/rules/{rule_id}", response_model=Rule, summary="Change some fields of a rule")
def update_rule(request: Request, rule_id: RuleId, body: RulePatch, _: object = merchandiser) -> Rule:
    return rules.update_rule(workspace(request), rule_id, body.model_dump(exclude_unset=True))


@router.delete("/rules/{rule_id}", response_model=Done, summary="Delete a rule")
def delete_rule(request: Request, rule_id: RuleId, _: object = merchandiser) -> Done:
    rules.delete_rule(workspace(request), rule_id)
    return Done(detail={"id": rule_id})
