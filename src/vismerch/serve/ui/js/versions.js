// Versions of a collection: save the current arrangement as a draft, diff a draft against
// what is published (as thumbnails: moved, in, out), publish, roll back, export. Writes carry
// If-Match: a stale one (someone published or edited meanwhile) gets 412, shown as a conflict
// message; the draft and the user's order are kept, nothing is lost. Under a diff, how the
// two versions did with shoppers (the analytics' by-version funnel, all time).

import { call, enc, titlesOf } from "./api.js";
import { append, clear, confirmDialog, fmt, h, thumb } from "./dom.js";
import { analytics, funnelTable } from "./metrics.js";

const idOf = (x) => (typeof x === "string" ? x : x.id);
const shortTime = (t) => (t ? t.replace("T", " ").replace(/:\d\dZ?$/, "").slice(5) : "–");

export function versionsPanel(ctx, collection, { current, onChange }) {
  const canEdit = ctx.can("merchandiser");
  const canPublish = ctx.can("publisher");
  const root = h("div", { class: "versions" });
  const conflict = h("div", { class: "conflict", id: "conflict", role: "alert", hidden: true });
  const list = h("div", { id: "versions-list" });
  const diffBox = h("div", { class: "diff", id: "diff" });
  let etag = null; // the collection's publication state, for If-Match on publish / rollback
  let versions = [];
  let pendingOrder = null; // the user's order kept across a 412 on a draft edit
  let diffed = null; // the version the diff box shows: compared again after a publish or rollback

  const base = `/collections/${enc(collection)}`;

  function showConflict(message, actions = []) {
    clear(conflict).append(h("strong", {}, "Conflict: "), message, h("div", { class: "actions" }, actions));
    conflict.hidden = false;
  }

  async function refresh() {
    try {
      const res = await call("GET", `${base}/versions`);
      versions = res.data.items;
      for (let cursor = res.data.next_cursor; cursor;) {  // the list comes a page at a time
        const more = (await call("GET", `${base}/versions`, { params: { cursor } })).data;
        versions.push(...more.items);
        cursor = more.next_cursor;
      }
      etag = res.etag;
    } catch (e) {
      clear(list).append(h("p", { class: "error" }, ctx.explain(e)));
      return;
    }
    draw();
  }

  function draw() {
    clear(list);
    const published = versions.find((v) => v.published);
    list.append(h("p", { class: "muted", id: "published-now" }, published ? `Published: ${published.name}` : "Nothing published yet."));
    list.append(h("table", { class: "data" },
      h("thead", {}, h("tr", {}, ["Version", "Saved", "By", ""].map((t) => h("th", {}, t)))),
      h("tbody", {}, versions.map((v) => h("tr", { dataset: { version: v.name }, class: v.published ? "published" : "" },
        h("td", {}, v.name, v.published ? h("span", { class: "badge pinned" }, "live") : null),
        h("td", { title: v.created_at || "" }, shortTime(v.created_at)), h("td", { class: "code" }, fmt(v.created_by)),
        h("td", {}, h("button", { type: "button", class: "diff-btn", on: { click: () => diff(v.name) } }, "Diff"),
          h("a", { href: `/api/v1${base}/versions/${enc(v.name)}/export?format=csv`, download: `${collection}-${v.name}.csv` }, "CSV"),
          canPublish && !v.published ? h("button", { type: "button", class: "primary publish-btn", on: { click: () => publish(v.name) } }, "Publish") : null,
          canEdit && !v.published ? h("button", { type: "button", class: "update-btn", title: "Replace this draft's order with the arrangement shown",
            on: { click: () => updateDraft(v.name) } }, "Update") : null))))));
  }

  async function saveDraft(name) {
    try {
      const st = current();
      await call("POST", `${base}/versions`, { body: { name, mode: st.mode, columns: [st.columns, ...[2, 3, 4, 5].filter((w) => w !== st.columns)] } });
      ctx.toast(`Draft ${name} saved`);
      await refresh();
      await diff(name);
    } catch (e) {
      ctx.fail(e);
    }
  }

  async function diff(name) {
    diffed = name;
    clear(diffBox).append(h("p", { class: "muted" }, "Comparing…"));
    const published = versions.find((v) => v.published);
    if (!published) {
      clear(diffBox).append(h("p", { class: "muted" }, `Nothing is published yet: publishing ${name} puts all its products in.`));
      return;
    }
    let d;
    try {
      d = (await call("GET", `${base}/diff`, { params: { a: published.name, b: name } })).data;
    } catch (e) {
      clear(diffBox).append(h("p", { class: "error" }, ctx.explain(e)));
      return;
    }
    const shown = [d.moved || [], d.added || [], d.removed || []].flatMap((items) => items.slice(0, 60).map(idOf));
    const names = await titlesOf(shown);
    const group = (title, cls, items, label) => h("div", { class: `diff-group ${cls}` },
      h("h4", {}, `${title} (${items.length})`),
      h("div", { class: "strip" }, items.slice(0, 60).map((x) => h("figure", { class: "mini", dataset: { id: idOf(x) } },
        thumb(idOf(x), names.get(idOf(x))), h("figcaption", { title: names.get(idOf(x)) }, label(x))))));
    append(clear(diffBox), [h("h3", {}, `${published.name} → ${name}`),
      // moves are a minimal edit: the products whose order among the others changed
      group("Moved", "moved", d.moved || [], (m) => `${m.from} → ${m.to}`),
      d.shifted ? h("p", { class: "muted", id: "diff-shifted" }, `${d.shifted} other products keep their order but sit at another position.`) : null,
      group("In", "in", d.added || [], (x) => (x.position ? `at ${x.position}` : "new")),
      group("Out", "out", d.removed || [], () => "leaves")]);
    diffBox.append(await performance([published, versions.find((v) => v.name === name)].filter(Boolean)));
  }

  // each version's funnel while it was live; a version never published has no events
  async function performance(pair) {
    let data;
    try {
      data = await analytics(collection, 0);
    } catch (e) {
      return h("p", { class: "error" }, ctx.explain(e));
    }
    const zero = { impressions: 0, clicks: 0, add_to_carts: 0, orders: 0, revenue: 0 };
    const rows = [...new Map(pair.map((v) => [v.id, v])).values()].map((v) => ({
      ...zero, ...(data.by_version.find((r) => r.version_id === v.id) || {}), name: v.name, dataset: { version: v.name } }));
    return h("div", { class: "diff-performance" }, h("h4", {}, "How they performed (all shopper events)"),
      funnelTable("diff-performance", "Version", rows, (r) => r.name, data.currencies,
        ["impressions", "clicks", "ctr", "orders", "revenue"]));
  }

  async function publish(name) {
    conflict.hidden = true;
    const live = versions.find((v) => v.published);
    if (!await confirmDialog(`Publish ${name}?`, `Shoppers see ${name} on ${collection} at once`
      + (live ? `, instead of ${live.name}.` : "."), `Publish ${name}`)) return;
    try {
      const seen = versions.find((v) => v.name === name);
      const res = await call("POST", `${base}/publish`, { body: { version: name, version_etag: seen ? seen.etag : null }, ifMatch: etag });
      ctx.toast(`Published ${res.data.published}`);
      await refresh();
      if (diffed) await diff(diffed);
      onChange();
    } catch (e) {
      await stale(e, `Someone published or rolled back ${collection} since you loaded it. Nothing was lost: draft ${name} is still saved. The list below now shows what is live; check the diff and publish again.`);
    }
  }

  async function rollback() {
    conflict.hidden = true;
    const live = versions.find((v) => v.published);
    if (!await confirmDialog(`Roll back ${collection}?`, `Shoppers see the version published before `
      + `${live ? live.name : "the live one"} again, at once.`, "Roll back")) return;
    try {
      const res = await call("POST", `${base}/rollback`, { body: {}, ifMatch: etag });
      ctx.toast(`Rolled back: ${res.data.published || "nothing"} is live`);
      await refresh();
      if (diffed) await diff(diffed);
      onChange();
    } catch (e) {
      await stale(e, `Someone published or rolled back ${collection} since you loaded it, so nothing was rolled back. The list below now shows what is live; roll back again if you still mean to.`);
    }
  }

  // the draft's ETag is the one the list showed when the user loaded it: an edit made by
  // someone else since then makes the PUT stale (412), and the user's order is kept
  async function updateDraft(name, order, tag) {
    conflict.hidden = true;
    const known = versions.find((v) => v.name === name);
    try {
      const ids = order || await shownOrder(name);
      try {
        await call("PUT", `${base}/versions/${enc(name)}`, { body: { ids }, ifMatch: tag || (known && known.etag) });
      } catch (e) {
        e.ids = ids;
        throw e;
      }
      pendingOrder = null;
      ctx.toast(`Draft ${name} updated (${ids.length} products)`);
      await refresh();
      await diff(name);
    } catch (e) {
      if (e.status !== 412 && e.status !== 428) { ctx.fail(e); return; }
      pendingOrder = { name, ids: e.ids };
      showConflict(`Draft ${name} was changed by someone else since you loaded it. Your order (${e.ids.length} products) is kept here, not saved.`, [
        h("button", { type: "button", id: "save-mine", on: { click: async () => {
          try {
            const theirs = await call("GET", `${base}/versions/${enc(name)}`);
            updateDraft(name, pendingOrder.ids, theirs.etag);
          } catch (err) { ctx.fail(err); }
        } } }, "Save mine over theirs"),
        h("button", { type: "button", id: "keep-theirs", on: { click: () => { pendingOrder = null; conflict.hidden = true; refresh(); diff(name); } } }, "Keep theirs"),
      ]);
    }
  }

  // the order the editor shows (its loaded pages), then the draft's other products in the
  // draft's order: a 10,000-product draft is never cut to the pages on screen
  async function shownOrder(name) {
    const shown = current().slots.map((slot) => slot.id);
    const draft = (await call("GET", `${base}/versions/${enc(name)}`)).data;
    const seen = new Set(shown);
    return shown.concat((draft.ids || (draft.items || []).map((x) => x.id)).filter((x) => !seen.has(x)));
  }

  async function stale(e, message) {
    if (e.status === 412 || e.status === 428) {
      await refresh();
      showConflict(message);
    } else {
      ctx.fail(e);
    }
  }

  const controls = h("div", { class: "inline" });
  if (canEdit) {
    const name = h("input", { id: "draft-name", placeholder: "draft name", "aria-label": "Draft name", size: 14 });
    controls.append(h("form", { id: "save-draft", class: "inline", on: { submit: (ev) => {
      ev.preventDefault();
      const stamp = new Date().toISOString().slice(0, 19).replace(/[-:T]/g, "");
      saveDraft(name.value.trim() || `draft-${stamp}`);
      name.value = "";
    } } }, name, h("button", { type: "submit", class: "primary" }, "Save draft")));
  }
  if (canPublish) controls.append(h("button", { type: "button", id: "rollback", on: { click: rollback } }, "Roll back"));
  root.append(controls, conflict, list, diffBox);
  refresh();
  return root;
}
