// The example shop: /shop/?collection=C&key=<storefront key>[&columns=4]. Renders the
// published grid page by page through GET /api/v1/storefront/collections/C and reports what
// the shopper does with vismerch-events.js (impressions as tiles come into view, a click when
// a product is opened, add-to-cart). The key is a storefront key: public and read-only.
// The request names the snippet's visitor id, so a running A/B experiment serves this
// visitor their own variant; every event then carries the answer's experiment and variant.

import { createTracker } from "./vismerch-events.js";

const PAGE = 24;
const params = new URLSearchParams(location.search);
const collection = params.get("collection");
const key = params.get("key");
const columns = Math.min(6, Math.max(1, parseInt(params.get("columns"), 10) || 4));
const $ = (id) => document.getElementById(id);
const grid = $("grid");
const more = $("more");
const note = $("note");
const dialog = $("product");
let offset = 0;
let total = null;
let cart = 0;
let current = null; // the slot shown in the product dialog

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  node.append(...children); // strings become text nodes: product ids are never HTML
  return node;
}

async function api(path) {
  const res = await fetch(`/api/v1${path}`, { headers: { Authorization: `Bearer ${key}` }, credentials: "omit" });
  if (!res.ok) {
    const body = await res.json().catch(() => ({}));
    throw new Error((body.error && body.error.message) || `HTTP ${res.status}`);
  }
  return res;
}

// Thumbnails need the key, which goes in a header (never in an image URL): read each as a
// blob once it nears the viewport and show it through an object URL.
const images = new IntersectionObserver((entries) => {
  for (const entry of entries) {
    if (!entry.isIntersecting) continue;
    images.unobserve(entry.target);
    showImage(entry.target, entry.target.dataset.src);
  }
}, { rootMargin: "300px" });

async function showImage(img, url) {
  try {
    const blob = await (await api(url.replace(/^\/api\/v1/, ""))).blob();
    img.src = URL.createObjectURL(blob);
  } catch (_) {
    img.classList.add("missing");
  }
}

const tracker = createTracker({ key, flushMs: 1000 });

// served: what the storefront answer says this visitor sees (version, experiment, variant)
function slotOf(item, served) {
  const slot = { collection, version_id: served.version_id, position: item.position, columns, product_id: item.id };
  if (served.experiment !== null && served.experiment !== undefined) {
    slot.experiment = served.experiment;
    slot.variant = served.variant;
  }
  return slot;
}

function addToCart(slot) {
  tracker.addToCart({ ...slot, quantity: 1 });
  cart += 1;
  $("cart").textContent = `Cart: ${cart}`;
}

function tile(item, served) {
  const slot = slotOf(item, served);
  const img = el("img", { alt: item.id, width: "240", height: "240" });
  if (item.thumbnail) { img.dataset.src = item.thumbnail; images.observe(img); }
  const node = el("li", { class: "tile", "data-id": item.id, "data-position": String(item.position) },
    el("button", { type: "button", class: "open", "aria-label": `Open ${item.id}`, onclick: () => open(slot, img) },
      img, el("span", { class: "name" }, item.id)),
    el("span", { class: "pos" }, `#${item.position}`),
    el("button", { type: "button", class: "buy add", "aria-label": `Add ${item.id} to cart`, onclick: () => addToCart(slot) },
      "Add to cart"));
  tracker.observe(node, slot);
  return node;
}

function open(slot, img) {
  current = slot;
  tracker.click(slot);
  $("product-img").src = img.src || "";
  $("product-img").alt = slot.product_id;
  $("product-name").textContent = slot.product_id;
  $("product-pos").textContent = `Position ${slot.position} of ${collection}`;
  dialog.showModal();
}

async function loadPage() {
  more.hidden = true;
  const visitor = encodeURIComponent(tracker.visitor);
  const res = await api(`/storefront/collections/${encodeURIComponent(collection)}?columns=${columns}&offset=${offset}&limit=${PAGE}&visitor=${visitor}`);
  const page = await res.json();
  total = page.total;
  // each page carries the version it was cut from (the visitor's variant during an
  // experiment): events say which version, experiment and variant the shopper saw
  for (const item of page.items) grid.append(tile(item, page));
  offset += page.items.length;
  grid.dataset.version = String(page.version_id);
  grid.dataset.experiment = page.experiment === null || page.experiment === undefined ? "" : String(page.experiment);
  grid.dataset.variant = page.variant || "";
  note.textContent = `${total} products · version ${page.version}${page.variant ? ` · experiment ${page.experiment}, variant ${page.variant}` : ""}`;
  more.hidden = !page.items.length || offset >= total;
}

async function start() {
  if (!collection || !key) {
    note.textContent = "Open this page as /shop/?collection=<collection id>&key=<storefront key>.";
    return;
  }
  $("collection-title").textContent = collection;
  document.title = `${collection} · Example shop`;
  grid.style.setProperty("--cols", String(columns));
  $("product-add").addEventListener("click", () => { if (current) addToCart(current); dialog.close(); });
  more.addEventListener("click", () => loadPage().catch(fail));
  // the next page loads as the shopper reaches the end of the grid
  new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting) && !more.hidden) loadPage().catch(fail);
  }, { rootMargin: "200px" }).observe(more);
  await loadPage();
}

function fail(error) {
  note.textContent = `Could not load ${collection}: ${error.message}`;
  note.setAttribute("role", "alert");
}

start().catch(fail);
