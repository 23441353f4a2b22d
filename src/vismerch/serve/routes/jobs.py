"""Ingest jobs (admin): start one in the background (202), poll it, list them. One writer at a
time: a second job while one runs, or while a CLI ingest holds the store, is a 409."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from vismerch.serve.auth import Principal, require
from vismerch.serve.routes.common import Paging, workspace
from vismerch.service import jobs
from vismerch.service.jobs import MAX_WORKERS, JobInfo
from vismerch.service.paging import Page

router = APIRouter(tags=["jobs"])
admin = Depends(require("admin"))


class NewJob(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str = Field(min_length=1, max_length=4096,
                        description="A folder of images or a manifest (.csv, .jsonl, .parquet), inside "
                                    "serve_source_root (unset: jobs are off, 409); relative paths are "
                                    "read from there")
    backend: str | None = Field(None, max_length=100,
                                description="A feature backend besides colour (which always runs)")
    workers: int | None = Field(None, ge=1, le=MAX_WORKERS, description="Worker processes (default 1)")


@router.post("/jobs", response_model=JobInfo, status_code=202,
             summary="Start an ingest job (409 while another job or ingest writes the store)")
def start_job(request: Request, new: NewJob, who: Principal = admin) -> JobInfo:
    return jobs.start_ingest(workspace(request), new.source, backend=new.backend, workers=new.workers,
                             by=who.key_id)


@router.get("/jobs", response_model=Page[JobInfo], summary="Ingest jobs, newest first")
def list_jobs(request: Request, paging: Paging, _: object = admin) -> Page[JobInfo]:
    return jobs.jobs_page(workspace(request), *paging)


@router.get("/jobs/{job_id}", response_model=JobInfo,
            summary="A job's status, progress, summary and refused files with reasons")
def get_job(request: Request, job_id: Annotated[int, Path(ge=1, le=2**62)], _: object = admin) -> JobInfo:
    return jobs.get_job(workspace(request), job_id)
