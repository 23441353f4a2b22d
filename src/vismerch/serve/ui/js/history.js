// Change history: who changed what, when, in words (GET /history reads the audit log of
// writes), newest first, for every collection or one; older changes a page at a time.

import { get, getAll } from "./api.js";
import { clear, h } from "./dom.js";

const when = (t) => (t ? t.replace("T", " ").replace(/Z$/, " UTC") : "–");

export async function render(main, ctx, [only]) {
  const collections = await getAll("/collections");
  const pick = h("select", { id: "history-collection", "aria-label": "Collection", on: { change: () => {
    ctx.go(pick.value ? `#/history/${encodeURIComponent(pick.value)}` : "#/history");
  } } }, h("option", { value: "" }, "Every collection"),
  collections.map((c) => h("option", { value: c.id, selected: c.id === only }, c.id)));
  const body = h("tbody", {});
  const table = h("table", { class: "data history", id: "history" },
    h("caption", { class: "muted" }, only ? `Changes to ${only}, newest first` : "Changes, newest first"),
    h("thead", {}, h("tr", {}, ["When", "Who", "What", "Collection"].map((t) => h("th", { scope: "col" }, t)))), body);
  const older = h("button", { type: "button", id: "history-older", hidden: true }, "Older changes");
  const empty = h("p", { class: "muted", id: "history-empty", hidden: true }, "No changes yet.");
  main.append(h("div", { class: "page" }, h("h1", {}, "Change history"),
    h("div", { class: "toolbar" }, h("label", {}, "Show ", pick)), table, empty, older));

  let before = null;
  async function more() {
    older.disabled = true;
    let page;
    try {
      page = await get("/history", { collection: only || null, before, limit: 50 });
    } catch (e) {
      ctx.fail(e);
      older.disabled = false;
      return;
    }
    for (const c of page.items) {
      body.append(h("tr", { class: "change", dataset: { id: String(c.id), kind: c.kind } },
        h("td", { class: "when" }, h("time", { datetime: c.at }, when(c.at))),
        h("td", {}, c.who, h("div", { class: "muted" }, c.role || "")),
        h("td", { class: "what" }, c.text),
        h("td", {}, c.collection ? h("a", { href: `#/collections/${encodeURIComponent(c.collection)}` }, c.collection) : "–")));
    }
    before = page.next_before;
    older.hidden = !before;
    older.disabled = false;
    empty.hidden = body.childNodes.length > 0;
  }
  older.addEventListener("click", more);
  clear(body);
  await more();
}
