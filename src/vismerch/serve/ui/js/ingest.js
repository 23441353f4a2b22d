// Ingest: start a job on a folder or manifest (inside the server's source root), watch its
// progress bar, see the files it refused and why. Admin keys only (the API says the same).

import { get, post } from "./api.js";
import { clear, fmt, h } from "./dom.js";

export async function render(main, ctx) {
  const source = h("input", { id: "ingest-source", required: true, size: 50, placeholder: "catalog/ or catalog/manifest.csv",
    "aria-label": "Folder or manifest" });
  const backend = h("input", { id: "ingest-backend", placeholder: "backend (optional)", "aria-label": "Backend" });
  const workers = h("input", { id: "ingest-workers", type: "number", min: 1, max: 64, placeholder: "workers", "aria-label": "Workers" });
  const job = h("div", { id: "job" });
  const history = h("div", { id: "jobs" });
  let timer = null;

  const form = h("form", { class: "card inline", id: "ingest-form", on: { submit: async (ev) => {
    ev.preventDefault();
    try {
      const started = await post("/jobs", { source: source.value.trim(), backend: backend.value.trim() || null,
        workers: workers.value ? parseInt(workers.value, 10) : null });
      ctx.toast(`Job ${started.id} started`);
      watch(started.id);
    } catch (e) {
      ctx.fail(e);
    }
  } } }, h("label", { for: "ingest-source" }, "Source"), source, backend, workers,
  h("button", { type: "submit", class: "primary" }, "Start ingest"));
  main.append(h("div", { class: "page ingest" }, h("h1", {}, "Ingest"),
    h("p", { class: "muted" }, "A folder or manifest (CSV, JSONL, Parquet) under the server's source root. One job runs at a time."),
    form, job, h("h2", {}, "Jobs"), history));

  function drawJob(j) {
    const pct = j.total ? Math.round((100 * j.done) / j.total) : (j.status === "done" ? 100 : 0);
    const refused = j.refused || [];
    clear(job).append(h("div", { class: "card", dataset: { status: j.status } },
      h("h3", {}, `Job ${j.id}: ${j.status}`),
      h("div", { class: "progress", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": 100, "aria-valuenow": pct },
        h("div", { class: "fill", style: { width: `${pct}%` } })),
      h("p", { id: "job-count" }, `${fmt(j.done)} / ${fmt(j.total)} (${pct}%)`),
      j.error ? h("p", { class: "error" }, j.error) : null,
      j.summary ? h("dl", { class: "facts" }, Object.entries(j.summary).filter(([, v]) => typeof v !== "object")
        .map(([k, v]) => [h("dt", {}, k), h("dd", {}, fmt(v))])) : null,
      h("h4", {}, `Refused files (${refused.length})`),
      refused.length ? h("table", { class: "data", id: "refused" }, h("tbody", {}, refused.map((r) =>
        h("tr", {}, h("td", { class: "code" }, r.path), h("td", {}, r.reason))))) : h("p", { class: "muted" }, "none")));
  }

  async function watch(id) {
    clearTimeout(timer);
    try {
      const j = await get(`/jobs/${id}`);
      drawJob(j);
      if (j.status === "queued" || j.status === "running") timer = setTimeout(() => watch(id), 600);
      else loadHistory();
    } catch (e) {
      ctx.fail(e);
    }
  }

  async function loadHistory() {
    try {
      const jobs = (await get("/jobs", { limit: 50 })).items;
      clear(history).append(jobs.length ? h("table", { class: "data" },
        h("thead", {}, h("tr", {}, ["Job", "Status", "Done", "Started", "Finished", ""].map((t) => h("th", {}, t)))),
        h("tbody", {}, jobs.map((j) => h("tr", {}, h("td", {}, String(j.id)), h("td", {}, j.status),
          h("td", {}, `${fmt(j.done)} / ${fmt(j.total)}`), h("td", {}, fmt(j.started_at)), h("td", {}, fmt(j.finished_at)),
          h("td", {}, h("button", { type: "button", on: { click: () => watch(j.id) } }, "Show"))))))
        : h("p", { class: "muted" }, "No jobs yet."));
      const running = jobs.find((j) => j.status === "running" || j.status === "queued");
      if (running && !timer) watch(running.id);
    } catch (e) {
      clear(history).append(h("p", { class: "error" }, ctx.explain(e)));
    }
  }

  loadHistory();
  return () => clearTimeout(timer);
}
