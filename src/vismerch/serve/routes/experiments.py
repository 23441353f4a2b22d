"""A/B experiments of a collection's versions: create, list, plan, results, stop, promote."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request

from vismerch.serve.auth import Principal, require
from vismerch.serve.routes.common import Paging, workspace
from vismerch.service import experiments
from vismerch.service.models_experiments import Experiment, ExperimentIn, PromoteIn
from vismerch.service.paging import Page, paginate

router = APIRouter(tags=["experiments"])
ExperimentId = Annotated[int, Path(ge=1, le=2**62, description="Experiment id")]


@router.get("/experiments", response_model=Page[Experiment], summary="Experiments, oldest first")
def list_experiments(request: Request, paging: Paging,
                     collection: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
                     _: object = Depends(require("viewer"))) -> Page[Experiment]:
    return paginate(experiments.list_experiments(workspace(request), collection), lambda e: [e.id], *paging)


@router.get("/experiments/plan", summary="Visitors and days needed to detect a lift, from recent traffic")
def plan(request: Request,
         collection: Annotated[str, Query(min_length=1, max_length=200)],
         metric: Annotated[str, Query(max_length=64)] = "revenue_per_visitor",
         min_lift: Annotated[float, Query(gt=0, le=1)] = 0.05,
         variants: Annotated[int, Query(ge=2, le=8)] = 2,
         holdout: Annotated[float, Query(ge=0, lt=0.5)] = 0.0,
         _: object = Depends(require("viewer"))) -> dict[str, Any]:
    out = experiments.plan_experiment(workspace(request), collection, metric=metric, min_lift=min_lift,
                                      split=[100.0 / variants] * variants, holdout=holdout)
    return {"collection": collection, "metric": metric, "min_lift": min_lift, "plan": out}


@router.post("/experiments", response_model=Experiment, status_code=201, summary="Start an experiment")
def create(request: Request, body: ExperimentIn,
           who: Principal = Depends(require("merchandiser"))) -> Experiment:
    return experiments.create_experiment(workspace(request), body, by=who.key_id)


@router.get("/experiments/{experiment_id}", response_model=Experiment, summary="One experiment")
def get(request: Request, experiment_id: ExperimentId, _: object = Depends(require("viewer"))) -> Experiment:
    return experiments.get_experiment(workspace(request), experiment_id)


@router.get("/experiments/{experiment_id}/results", summary="Per variant: metric, lift, intervals, SRM")
def results(request: Request, experiment_id: ExperimentId,
            _: object = Depends(require("viewer"))) -> dict[str, Any]:
    return experiments.experiment_results(workspace(request), experiment_id)


@router.post("/experiments/{experiment_id}/stop", response_model=Experiment,
             summary="End without a winner (everyone sees the live version)")
def stop(request: Request, experiment_id: ExperimentId,
         who: Principal = Depends(require("merchandiser"))) -> Experiment:
    return experiments.stop_experiment(workspace(request), experiment_id, by=who.key_id)


@router.post("/experiments/{experiment_id}/promote", response_model=Experiment,
             summary="Publish the winning variant and end the experiment")
def promote(request: Request, experiment_id: ExperimentId, body: PromoteIn | None = None,
            who: Principal = Depends(require("publisher"))) -> Experiment:
    return experiments.promote_experiment(workspace(request), experiment_id,
                                          body.variant if body else None, by=who.key_id)
