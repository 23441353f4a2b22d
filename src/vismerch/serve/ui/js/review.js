// Review queues: duplicate groups (keep one / not duplicates) and the quality and listed-colour
// audit queues (accept / ignore), each with bulk actions over the ticked rows.

import { getAll, post, titlesOf } from "./api.js";
import { clear, fmt, h, thumb } from "./dom.js";

export async function render(main, ctx, [tab]) {
  const editable = ctx.can("merchandiser");
  const current = ["duplicates", "quality", "audit"].includes(tab) ? tab : "duplicates";
  const body = h("div", { id: "review-body" });
  main.append(h("div", { class: "page review" }, h("h1", {}, "Review"),
    h("div", { class: "tabs" }, [["duplicates", "Duplicate groups"], ["quality", "Quality flags"], ["audit", "Listed-colour audit"]]
      .map(([name, label]) => h("a", { href: `#/review/${name}`, class: name === current ? "on" : "" }, label))),
    body));
  if (current === "duplicates") await duplicates(body, ctx, editable);
  else await queue(body, ctx, editable, current);
}

async function duplicates(body, ctx, editable) {
  const groups = await getAll("/duplicates", { status: "pending" });
  const names = await titlesOf(groups.flatMap((g) => g.members));
  const picks = new Map(); // group -> chosen keeper
  const ticked = new Set();
  clear(body);
  if (!groups.length) { body.append(h("p", { class: "muted" }, "No duplicate groups wait for review.")); return; }

  const decide = async (list, decision) => {
    let done = 0;
    for (const g of list) {
      try {
        await post(`/duplicates/${g.group}/review`, decision === "keep"
          ? { decision, keep: picks.get(g.group) || g.representative } : { decision });
        done++;
      } catch (e) { ctx.fail(e); break; }
    }
    ctx.toast(done === 1 && list.length === 1 && decision === "keep"
      ? `Kept ${names.get(picks.get(list[0].group) || list[0].representative)}; its copies leave the grids`
      : `${done} group${done === 1 ? "" : "s"} reviewed`);
    await duplicates(body, ctx, editable);
  };

  if (editable) {
    body.append(h("div", { class: "toolbar" },
      h("label", {}, h("input", { type: "checkbox", id: "tick-all", on: { change: (ev) => {
        for (const box of body.querySelectorAll("input.tick")) { box.checked = ev.target.checked; box.dispatchEvent(new Event("change")); }
      } } }), " all"),
      h("button", { type: "button", id: "bulk-keep", on: { click: () => decide(groups.filter((g) => ticked.has(g.group)), "keep") } }, "Keep the chosen one (ticked)"),
      h("button", { type: "button", id: "bulk-distinct", on: { click: () => decide(groups.filter((g) => ticked.has(g.group)), "distinct") } }, "Not duplicates (ticked)")));
  }
  for (const g of groups) {
    const members = h("div", { class: "strip" }, g.members.map((m) => h("label", { class: "member", title: m },
      thumb(m, names.get(m)),
      editable ? h("input", { type: "radio", name: `keep-${g.group}`, value: m, checked: m === g.representative,
        on: { change: () => picks.set(g.group, m) } }) : null,
      h("span", {}, names.get(m)))));
    body.append(h("div", { class: "card group", dataset: { group: String(g.group) } },
      h("div", { class: "inline" },
        editable ? h("input", { type: "checkbox", class: "tick", "aria-label": `Tick group ${g.group}`, on: { change: (ev) => {
          if (ev.target.checked) ticked.add(g.group); else ticked.delete(g.group);
        } } }) : null,
        h("strong", {}, `Group ${g.group}`), h("span", { class: "muted" }, `${g.members.length} products · representative ${names.get(g.representative) || g.representative}`),
        editable ? h("button", { type: "button", class: "primary", on: { click: () => decide([g], "keep") } }, "Keep chosen") : null,
        editable ? h("button", { type: "button", on: { click: () => decide([g], "distinct") } }, "Not duplicates") : null),
      members));
  }
}

async function queue(body, ctx, editable, name) {
  const items = await getAll(`/queues/${name}`, { status: "open" });
  const names = await titlesOf([...new Set(items.map((it) => it.product_id))]);
  const ticked = new Set();
  const key = (it) => `${it.product_id}\u0000${it.item}`;
  clear(body);
  if (!items.length) { body.append(h("p", { class: "muted" }, "Nothing open in this queue.")); return; }
  const decide = async (list, decision) => {
    try {
      await post(`/queues/${name}/decisions`, { items: list.map((it) => ({ product_id: it.product_id, item: it.item })), decision });
      ctx.toast(`${list.length} item${list.length === 1 ? "" : "s"} ${decision === "resolved" ? "accepted" : "ignored"}`);
    } catch (e) { ctx.fail(e); }
    await queue(body, ctx, editable, name);
  };
  if (editable) {
    body.append(h("div", { class: "toolbar" },
      h("label", {}, h("input", { type: "checkbox", id: "tick-all", on: { change: (ev) => {
        for (const box of body.querySelectorAll("input.tick")) { box.checked = ev.target.checked; box.dispatchEvent(new Event("change")); }
      } } }), " all"),
      h("button", { type: "button", id: "bulk-accept", on: { click: () => decide(items.filter((it) => ticked.has(key(it))), "resolved") } }, "Accept ticked"),
      h("button", { type: "button", id: "bulk-ignore", on: { click: () => decide(items.filter((it) => ticked.has(key(it))), "ignored") } }, "Ignore ticked")));
  }
  const heads = name === "audit" ? ["", "", "Product", "Kind", "Listed", "Observed", "ΔE00", ""] : ["", "", "Product", "Flag", "Value", ""];
  body.append(h("table", { class: "data", id: `queue-${name}` },
    h("thead", {}, h("tr", {}, heads.map((t) => h("th", {}, t)))),
    h("tbody", {}, items.map((it) => h("tr", { dataset: { product: it.product_id, item: it.item } },
      h("td", {}, editable ? h("input", { type: "checkbox", class: "tick", "aria-label": `Tick ${it.product_id}`, on: { change: (ev) => {
        if (ev.target.checked) ticked.add(key(it)); else ticked.delete(key(it));
      } } }) : null),
      h("td", {}, thumb(it.product_id, names.get(it.product_id), "tiny")),
      h("td", {}, names.get(it.product_id), h("div", { class: "code muted" }, it.product_id)),
      h("td", {}, it.item),
      name === "audit" ? [h("td", {}, fmt(it.listed)), h("td", {}, fmt(it.observed))] : null,
      h("td", { class: "num" }, fmt(it.value, 3)),
      h("td", {}, editable ? [
        h("button", { type: "button", class: "primary", on: { click: () => decide([it], "resolved") } }, "Accept"),
        h("button", { type: "button", on: { click: () => decide([it], "ignored") } }, "Ignore")] : null))))));
}
