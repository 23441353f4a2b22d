// Building DOM safely: every piece of text goes in as a text node (never HTML), so product
// titles and other data cannot inject markup. Attributes go through setAttribute; event
// handlers are functions (on: {click: fn}), never strings.

const SVG_NS = "http://www.w3.org/2000/svg";

function build(el, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "on") {
      for (const [ev, fn] of Object.entries(value)) el.addEventListener(ev, fn);
    } else if (name === "dataset") {
      Object.assign(el.dataset, value);
    } else if (name === "style") {
      Object.assign(el.style, value); // CSSOM: allowed by the page's CSP
    } else if (name === "text") {
      el.textContent = String(value);
    } else if (name in el && typeof value !== "string" && !(el instanceof SVGElement)) {
      el[name] = value; // properties such as checked, disabled, value
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function h(tag, attrs = {}, ...children) {
  return build(document.createElement(tag), attrs, children);
}

export function s(tag, attrs = {}, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function fmt(value, digits = 2) {
  if (value === null || value === undefined || value === "") return "–";
  if (typeof value === "number") {
    return Number.isInteger(value) ? value.toLocaleString("en") : value.toFixed(digits);
  }
  return String(value);
}

export function thumbUrl(id) {
  return `/api/v1/products/${encodeURIComponent(id)}/thumbnail`;
}

// A thumbnail <img> whose alt text is the product's name (pages that hold only ids ask
// api.titlesOf first); a missing image shows an empty tile, not a broken-image icon. With
// deferred, the URL waits in data-src until the owner (the virtual grid, once scrolling
// pauses) sets it, so a fast scroll past thousands of products requests none of them.
export function thumb(id, title = "", cls = "thumb", deferred = false) {
  const img = h("img", { class: cls, alt: title || id, loading: "lazy", draggable: "false" });
  if (deferred) img.dataset.src = thumbUrl(id); else img.src = thumbUrl(id);
  img.addEventListener("error", () => img.classList.add("missing"), { once: true });
  return img;
}

// A modal <dialog> (focus stays in it, Esc cancels; focus returns to the opener): resolves
// true when confirmed.
export function confirmDialog(title, text, ok) {
  return new Promise((resolve) => {
    const yes = h("button", { type: "submit", class: "primary", value: "ok", id: "confirm-ok" }, ok);
    const dialog = h("dialog", { class: "confirm", id: "confirm", "aria-labelledby": "confirm-title", "aria-describedby": "confirm-text" },
      h("form", { method: "dialog" }, h("h2", { id: "confirm-title" }, title), h("p", { id: "confirm-text" }, text),
        h("div", { class: "inline" }, yes, h("button", { type: "submit", value: "cancel", id: "confirm-cancel" }, "Cancel"))));
    const opener = document.activeElement;
    dialog.addEventListener("close", () => {
      dialog.remove();
      if (opener && opener.isConnected) opener.focus();
      resolve(dialog.returnValue === "ok");
    });
    document.body.append(dialog);
    dialog.showModal();
    yes.focus();
  });
}

// A busy indicator for a wait the user started (role=status: screen readers hear the label)
export function spinner(label, id) {
  return h("span", { class: "spinner", role: "status", id }, h("span", { class: "spin", "aria-hidden": "true" }), label);
}
