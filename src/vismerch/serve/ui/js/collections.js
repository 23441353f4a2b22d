// Collections: the list (categories, manifest columns, rule-defined sets) and a form to add one.

import { enc, getAll, post } from "./api.js";
import { fmt, h } from "./dom.js";

export async function render(main, ctx) {
  const list = await getAll("/collections");
  const table = h("table", { class: "data", id: "collections" },
    h("thead", {}, h("tr", {}, ["Collection", "Kind", "Parent", "Size", "Published", "Where"].map((t) => h("th", {}, t)))),
    h("tbody", {}, list.map((c) => h("tr", {},
      h("td", {}, h("a", { href: `#/collections/${enc(c.id)}` }, c.id)),
      h("td", {}, fmt(c.kind)), h("td", {}, fmt(c.parent)), h("td", { class: "num" }, fmt(c.size)),
      h("td", {}, fmt(c.published_version)), h("td", { class: "code" }, fmt(c.where))))));
  main.append(h("div", { class: "page" }, h("h1", {}, "Collections"), table));
  if (ctx.can("merchandiser")) {
    const id = h("input", { name: "id", required: true, placeholder: "summer-navy", "aria-label": "Collection id" });
    const where = h("input", { name: "where", placeholder: "colour == 'navy' and price < 80", size: 40,
      "aria-label": "Where" });
    const parent = h("input", { name: "parent", placeholder: "parent (optional)", "aria-label": "Parent" });
    main.append(h("form", { class: "card inline", id: "new-collection", on: { submit: async (ev) => {
      ev.preventDefault();
      try {
        const made = await post("/collections", { id: id.value.trim(), where: where.value.trim() || null,
          parent: parent.value.trim() || null });
        ctx.toast(`Collection ${made.id} created`);
        ctx.go(`#/collections/${enc(made.id)}`);
      } catch (e) {
        ctx.fail(e);
      }
    } } }, h("h3", {}, "New collection"), id, where, parent, h("button", { type: "submit", class: "primary" }, "Create")));
  }
}
