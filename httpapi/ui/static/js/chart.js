// Small SVG charts for the usage view, drawn here rather than with a library: stacked columns
// (one column a day, one colour a series) and horizontal bars (the top keys). Colours are
// classes (s0…s7, s-other) the stylesheet fills, so the charts follow the light or dark theme
// and need no inline style. Each chart is one tab stop: the arrow keys, Home and End move
// between its columns or bars, and the one under focus or the pointer is read out in words
// below it (a live region), so the numbers are never only in the picture.

import { h } from './dom.js';

const ns = 'http://www.w3.org/2000/svg';

// colours is how many series get a colour of their own; the rest are folded into "others".
export const colours = 8;

// s builds an SVG element; attrs are set as attributes, children appended (strings as text).
function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(ns, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  el.append(...children.filter((c) => c !== null && c !== undefined));
  return el;
}

// scale is the axis for a largest value v: a top of 1, 2, 2.5 or 5 times a power of ten, at
// least v, and how many equal steps divide it so that every gridline falls on a round value.
export function scale(v) {
  if (!(v > 0)) return { max: 1, steps: 4 };
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) {
    if (m * p >= v * (1 - 1e-9)) return { max: m * p, steps: m === 2.5 || m === 5 ? 5 : 4 };
  }
  return { max: 10 * p, steps: 4 };
}

// series turns usage rows into one series per value of dim (key or model), each with one value
// per day of days taken from metric(row), largest total first. Past the first colours-1 series
// the rest are summed into one series named null ("others").
export function series(rows, dim, metric, days) {
  const at = new Map(days.map((d, i) => [d, i]));
  const by = new Map();
  for (const r of rows) {
    const i = at.get(r.day);
    if (i === undefined) continue;
    const name = String(r[dim] ?? '');
    if (!by.has(name)) by.set(name, { name, values: new Array(days.length).fill(0), total: 0 });
    const v = Number(metric(r)) || 0;
    by.get(name).values[i] += v;
    by.get(name).total += v;
  }
  const all = [...by.values()].filter((x) => x.total > 0)
    .sort((a, b) => b.total - a.total || a.name.localeCompare(b.name));
  if (all.length <= colours) return all;
  const rest = { name: null, values: new Array(days.length).fill(0), total: 0 };
  for (const x of all.slice(colours - 1)) {
    x.values.forEach((v, i) => { rest.values[i] += v; });
    rest.total += x.total;
  }
  return [...all.slice(0, colours - 1), rest];
}

// colourOf is the class of the i-th series (null name: the "others").
export function colourOf(x, i) {
  return x.name === null ? 's-other' : `s${i}`;
}

// roving makes the focusable items of a chart one tab stop moved by the arrow keys, Home and
// End, and calls read(i) for the item under focus or the pointer.
function roving(svg, items, read, start) {
  let current = start;
  const focus = (i) => {
    items[current]?.setAttribute('tabindex', '-1');
    current = Math.max(0, Math.min(items.length - 1, i));
    items[current].setAttribute('tabindex', '0');
    items[current].focus();
  };
  items.forEach((el, i) => {
    el.setAttribute('tabindex', i === current ? '0' : '-1');
    el.addEventListener('focus', () => { current = i; read(i); });
    el.addEventListener('pointerenter', () => read(i));
  });
  svg.addEventListener('keydown', (ev) => {
    const to = { ArrowRight: current + 1, ArrowDown: current + 1, ArrowLeft: current - 1, ArrowUp: current - 1,
      Home: 0, End: items.length - 1 }[ev.key];
    if (to === undefined || items.length === 0) return;
    ev.preventDefault();
    focus(to);
  });
}

// columns draws stacked columns: days along the bottom (labelled by dayLabel), one stack a
// day of the series' values, the y axis labelled by axis(value, top, step). describe(i) is the
// words for day i. It
// returns the chart and its readout, to be placed in a figure.
export function columns({ days, list, format, axis, dayLabel, describe, label }) {
  const W = 720, H = 240, left = 80, right = 8, top = 10, bottom = 26;
  const totals = days.map((_, i) => list.reduce((sum, x) => sum + x.values[i], 0));
  const { max, steps } = scale(Math.max(0, ...totals));
  const y = (v) => top + (H - top - bottom) * (1 - v / max);
  const step = (W - left - right) / Math.max(1, days.length);
  const bar = Math.max(2, Math.min(36, step * 0.7));
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'group', 'aria-label': label });
  for (let k = 0; k <= steps; k++) {
    const v = (max * k) / steps;
    svg.append(s('line', { class: 'grid', x1: left, x2: W - right, y1: y(v), y2: y(v) }),
      s('text', { class: 'tick', x: left - 6, y: y(v) + 4, 'text-anchor': 'end' }, axis(v, max, max / steps)));
  }
  const every = Math.ceil(days.length / 10);
  const items = days.map((d, i) => {
    const x = left + step * i + (step - bar) / 2;
    const col = s('g', { class: 'col', role: 'img', 'aria-label': describe(i), 'data-day': d,
      'data-total': totals[i] });
    col.append(s('rect', { class: 'hit', x: left + step * i, y: top, width: step, height: H - top - bottom }));
    let base = 0;
    list.forEach((x0, j) => {
      const v = x0.values[i];
      if (v <= 0) return;
      col.append(s('rect', { class: `seg ${colourOf(x0, j)}`, x, width: bar, y: y(base + v), height: Math.max(0.5, y(base) - y(base + v)) }));
      base += v;
    });
    if (i % every === 0) svg.append(s('text', { class: 'tick', x: x + bar / 2, y: H - 8, 'text-anchor': 'middle' }, dayLabel(d)));
    return col;
  });
  svg.append(...items);
  const readout = h('p', { class: 'readout', 'aria-live': 'polite' });
  const read = (i) => {
    readout.textContent = describe(i);
    items.forEach((el, j) => el.classList.toggle('on', i === j));
  };
  roving(svg, items, read, items.length - 1);
  if (items.length) read(items.length - 1);
  return { svg, readout };
}

// bars draws one horizontal bar per item ({name, value, cls}), in the order given, with the
// name on the left and format(value) on the right; describe(i) is the words for item i.
export function bars({ items, format, describe, label }) {
  const W = 720, row = 30, nameW = 170, valueW = 170;
  const H = Math.max(1, items.length) * row + 4;
  const max = Math.max(0, ...items.map((x) => x.value)) || 1;
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart bars', role: 'group', 'aria-label': label });
  const els = items.map((x, i) => {
    const y0 = 2 + i * row;
    const name = x.name.length > 22 ? `${x.name.slice(0, 21)}…` : x.name;
    return s('g', { class: 'bar', role: 'img', 'aria-label': describe(i), 'data-name': x.name, 'data-value': x.value },
      s('rect', { class: 'hit', x: 0, y: y0, width: W, height: row }),
      s('text', { class: 'name', x: nameW - 8, y: y0 + row / 2 + 5, 'text-anchor': 'end' }, s('title', {}, x.name), name),
      s('rect', { class: `seg ${x.cls}`, x: nameW, y: y0 + 5, height: row - 10,
        width: Math.max(1, ((W - nameW - valueW) * x.value) / max) }),
      s('text', { class: 'value', x: W - 4, y: y0 + row / 2 + 5, 'text-anchor': 'end' }, format(x.value)));
  });
  svg.append(...els);
  const readout = h('p', { class: 'readout', 'aria-live': 'polite' });
  const read = (i) => {
    readout.textContent = describe(i);
    els.forEach((el, j) => el.classList.toggle('on', i === j));
  };
  roving(svg, els, read, 0);
  return { svg, readout };
}

// legend lists the series with their colours.
export function legend(list, nameOf) {
  return h('ul', { class: 'legend' }, ...list.map((x, i) =>
    h('li', {}, h('span', { class: `swatch ${colourOf(x, i)}`, 'aria-hidden': 'true' }), nameOf(x))));
}
