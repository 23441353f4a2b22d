"""The process an ingest job runs in: ``python -m vismerch.service.job_worker STORE JOB_ID``,
the server's settings as JSON on stdin. Runs the job's ingest under the store's writer
lock and records progress, refused files and the outcome in the job's row."""

from __future__ import annotations

import json
import sys
from typing import Any

from vismerch.catalog import jobs as job_rows
from vismerch.catalog.store import Store
from vismerch.config import load_settings
from vismerch.errors import VismerchError

REFUSED_KEPT = 1000


def run_job(store_path: str, job_id: int, settings_values: dict[str, Any] | None = None) -> int:
    """Run job ``job_id``; 0 when it is done, 1 when it failed (the row says why)."""
    from vismerch.pipeline.ingest import ingest

    store = Store.open(store_path)
    try:
        job = job_rows.get_job(store, job_id)
        if job is None:
            print(f"no job {job_id} in {store_path}", file=sys.stderr)
            return 2
        params = job["params"]
        settings = load_settings(base=settings_values) if settings_values else load_settings()
        job_rows.start_job(store, job_id)
        state: dict[str, Any] = {"run_id": None}

        def progress(run_id: int, done: int, total: int) -> None:
            # once after planning and once per committed task (a task is task_size images,
            # so this is a few small writes a second at most)
            fields: dict[str, Any] = {"done": done, "total": total}
            if state["run_id"] is None:
                state["run_id"] = run_id
                fields["summary"] = {"run_id": run_id}  # lets a poll list refusals so far
            job_rows.update_job(store, job_id, **fields)

        error = None
        summary: dict[str, Any] | None = None
        try:
            result = ingest(params["source"], store_path, backends=params.get("backends") or ["colour"],
                            settings=settings, workers=int(params.get("workers") or 1),
                            progress=False, on_progress=progress)
            summary = result.as_dict()
        except VismerchError as exc:
            error = exc.message + (f" (hint: {exc.hint})" if exc.hint else "")
        except Exception as exc:  # recorded for the client; the log keeps the traceback
            import traceback

            traceback.print_exc()
            error = f"ingest failed: {type(exc).__name__}: {exc}"
        run_id = (summary or {}).get("run_id") or state["run_id"]
        if run_id is not None:
            summary = {**(summary or {"run_id": run_id}),
                       "refused": job_rows.refused_in_run(store, int(run_id), REFUSED_KEPT)}
        job_rows.finish_job(store, job_id, summary, error)
        return 1 if error else 0
    finally:
        store.close()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or not args[1].isdigit():
        print("usage: python -m vismerch.service.job_worker STORE JOB_ID  (settings JSON on stdin)",
              file=sys.stderr)
        return 2
    text = sys.stdin.read() if not sys.stdin.isatty() else ""
    return run_job(args[0], int(args[1]), json.loads(text) if text.strip() else None)


if __name__ == "__main__":
    sys.exit(main())
