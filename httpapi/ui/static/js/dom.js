// h builds an element. Children are nodes or strings; strings always become text nodes, so
// nothing built here is ever parsed as HTML. attrs: "class", "text" (textContent), "on*"
// (listeners), "dataset", boolean true/false (present/absent), anything else setAttribute.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  el.append(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

// byId returns the element with id, failing loudly when the page lacks it.
export function byId(id) {
  const el = document.getElementById(id);
  if (!el) throw new Error(`console: no element #${id}`);
  return el;
}

// show toggles an element's hidden attribute.
export function show(el, visible) {
  el.hidden = !visible;
}

// say puts a message in a status or error element and shows it; an empty message hides it.
export function say(el, message) {
  el.textContent = message ?? '';
  el.hidden = !message;
}
