// Usage: the spend ledger of GET /admin/usage (SPEC §18) as pictures. For a period (the last 7,
// 30 or 90 days, this or last calendar month, or chosen dates; days are UTC, as budgets are)
// it shows the totals, spend or tokens or requests per key and per model a day, and the keys
// that used the most. Two calls per period: grouped by key and day, and by model and day.

import { byId, h, say } from './dom.js';
import { t, integer, usd, lang, onLangChange } from './i18n.js';
import { admin, headers, errorOf, ApiError } from './api.js';
import { series, columns, bars, legend, colourOf } from './chart.js';

const dayMs = 86400000;

// isoDay is the UTC calendar day of a time, as YYYY-MM-DD.
export function isoDay(ms) {
  return new Date(ms).toISOString().slice(0, 10);
}

// period is the days a choice covers, first to last (UTC), given now (ms) and, for "custom",
// the chosen first and last days; null when the custom days are missing or reversed.
export function period(choice, now, from = '', to = '') {
  const today = Date.parse(isoDay(now));
  const d = new Date(today);
  let first = today;
  let last = today;
  switch (choice) {
    case '7d': first = today - 6 * dayMs; break;
    case '90d': first = today - 89 * dayMs; break;
    case 'month': first = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1); break;
    case 'lastmonth':
      first = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() - 1, 1);
      last = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1) - dayMs;
      break;
    case 'custom':
      first = Date.parse(from);
      last = Date.parse(to);
      if (!Number.isFinite(first) || !Number.isFinite(last) || last < first) return null;
      break;
    default: first = today - 29 * dayMs; // 30d
  }
  const days = [];
  for (let ms = first; ms <= last; ms += dayMs) days.push(isoDay(ms));
  return { days, from: new Date(first).toISOString().replace('.000', ''), to: new Date(last + dayMs).toISOString().replace('.000', '') };
}

// metrics are what the charts can show, read from one usage row.
export const metrics = {
  spend: (r) => Number(r.cost_usd) || 0,
  tokens: (r) => (Number(r.tokens_in) || 0) + (Number(r.tokens_out) || 0),
  requests: (r) => Number(r.requests) || 0,
};

// sum adds up the counters of rows (the period's totals, from the rows the charts show).
export function sum(rows) {
  const total = { requests: 0, errors: 0, tokens_in: 0, cached_in: 0, tokens_out: 0, reasoning: 0, cost_usd: 0 };
  for (const r of rows) for (const k of Object.keys(total)) total[k] += Number(r[k]) || 0;
  return total;
}

// decimals is how many decimal places write step exactly (at most 10).
export function decimals(step) {
  for (let d = 0; d < 10; d++) {
    const x = step * 10 ** d;
    if (Math.abs(x - Math.round(x)) < 1e-6 * Math.max(1, x)) return d;
  }
  return 10;
}

// formats are the value formats of the current language: money, a compact count, a count.
function formats() {
  const l = lang();
  const compact = new Intl.NumberFormat(l, { notation: 'compact', maximumFractionDigits: 1 });
  const day = new Intl.DateTimeFormat(l, { month: 'short', day: 'numeric', timeZone: 'UTC' });
  const longDay = new Intl.DateTimeFormat(l, { dateStyle: 'medium', timeZone: 'UTC' });
  const fixed = (d) => new Intl.NumberFormat(l, { style: 'currency', currency: 'USD', minimumFractionDigits: d, maximumFractionDigits: d });
  return {
    spend: usd,
    // axis labels a gridline: money with the decimals its step needs, at least cents below $10.
    axis: {
      spend: (v, top, step) => fixed(Math.max(top < 10 ? 2 : 0, decimals(step))).format(v),
      tokens: (v) => compact.format(v),
      requests: (v) => compact.format(v),
    },
    tokens: (v) => compact.format(v),
    requests: (v) => compact.format(v),
    day: (d) => day.format(Date.parse(d)),
    longDay: (d) => longDay.format(Date.parse(d)),
  };
}

export function mountUsage() {
  const choice = byId('usage-period');
  const from = byId('usage-from');
  const to = byId('usage-to');
  const error = byId('usage-error');
  const totals = byId('usage-totals');
  const charts = byId('usage-charts');
  const empty = byId('usage-empty');
  let last = null; // {days, byKey, byModel}
  let seq = 0;

  const metric = () => document.querySelector('input[name="usage-metric"]:checked')?.value ?? 'spend';

  async function load() {
    byId('usage-custom').hidden = choice.value !== 'custom';
    const p = period(choice.value, Date.now(), from.value, to.value);
    if (!p) return say(error, t('usage.badDates'));
    const n = ++seq;
    const q = (group) => `/admin/usage?from=${encodeURIComponent(p.from)}&to=${encodeURIComponent(p.to)}&group_by=${group}&format=json`;
    try {
      const [byKey, byModel] = await Promise.all([admin('GET', q('key,day')), admin('GET', q('model,day'))]);
      if (n !== seq) return; // a newer choice is loading
      last = { days: p.days, byKey: inPeriod(byKey.rows, p.days), byModel: inPeriod(byModel.rows, p.days) };
      say(error, '');
      render();
    } catch (e) {
      if (n !== seq) return;
      say(error, t('usage.error', { m: e instanceof ApiError ? `${e.code}: ${e.message}` : e.message }));
    }
  }

  function render() {
    if (!last) return;
    const f = formats();
    const m = metric();
    const total = sum(last.byKey);
    totals.replaceChildren(...[
      ['usage.total.spend', f.spend(total.cost_usd)],
      ['usage.total.requests', integer(total.requests)],
      ['usage.total.tokensIn', integer(total.tokens_in)],
      ['usage.total.tokensOut', integer(total.tokens_out)],
      ['usage.total.errors', integer(total.errors)],
    ].map(([k, v]) => h('div', { class: 'tile', dataset: { total: k.split('.').pop() } },
      h('dt', { text: t(k) }), h('dd', { text: v }))));
    empty.hidden = total.requests > 0;
    charts.hidden = total.requests === 0;
    if (total.requests === 0) return;
    charts.replaceChildren(
      perDay('key', last.byKey, m, f),
      perDay('model', last.byModel, m, f),
      topKeys(last.byKey, m, f));
  }

  // perDay is the figure of one dimension's stacked columns, with its legend and a table.
  function perDay(dim, rows, m, f) {
    const days = last.days;
    const list = series(rows, dim, metrics[m], days);
    const nameOf = (x) => x.name ?? t('usage.others');
    const title = t(`usage.chart.${dim}.${m}`);
    const describe = (i) => {
      const parts = list.filter((x) => x.values[i] > 0).map((x) => `${nameOf(x)} ${f[m](x.values[i])}`);
      const all = list.reduce((s0, x) => s0 + x.values[i], 0);
      return `${f.longDay(days[i])}: ${f[m](all)}${parts.length ? ` (${parts.join(', ')})` : ''}`;
    };
    const { svg, readout } = columns({ days, list, format: f[m], axis: f.axis[m], dayLabel: f.day, describe, label: title });
    return h('figure', { class: 'chart-card', dataset: { chart: dim } },
      h('figcaption', {}, h('h3', { text: title })),
      legend(list, nameOf), svg, readout,
      table(days.map(f.longDay), list.map(nameOf), (i, j) => list[j].values[i], f[m]));
  }

  // topKeys is the figure of the keys that used the most in the period, by the metric.
  function topKeys(rows, m, f) {
    const list = series(rows, 'key', metrics[m], last.days);
    const all = list.reduce((s0, x) => s0 + x.total, 0);
    const items = list.map((x, i) => ({ name: x.name ?? t('usage.others'), value: x.total, cls: colourOf(x, i) }));
    const pct = new Intl.NumberFormat(lang(), { style: 'percent' });
    const share = (v) => `${f[m](v)} · ${pct.format(all ? v / all : 0)}`;
    const describe = (i) => t('usage.share', { k: items[i].name, v: f[m](items[i].value), p: pct.format(all ? items[i].value / all : 0) });
    const title = t(`usage.chart.top.${m}`);
    const { svg, readout } = bars({ items, format: share, describe, label: title });
    return h('figure', { class: 'chart-card', dataset: { chart: 'top' } },
      h('figcaption', {}, h('h3', { text: title })), svg, readout);
  }

  for (const el of [choice, from, to]) el.addEventListener('change', load);
  for (const el of document.querySelectorAll('input[name="usage-metric"]')) el.addEventListener('change', render);
  byId('usage-refresh').addEventListener('click', load);
  byId('usage-csv').addEventListener('click', () => csv(choice.value, from.value, to.value, error));
  onLangChange(render);
  from.value = isoDay(Date.now() - 29 * dayMs);
  to.value = isoDay(Date.now());

  return { show: load, resume: load };
}

// inPeriod keeps the rows of the period's days.
function inPeriod(rows, days) {
  const want = new Set(days);
  return (rows ?? []).filter((r) => want.has(String(r.day).slice(0, 10))).map((r) => ({ ...r, day: String(r.day).slice(0, 10) }));
}

// table is a chart's numbers as a folded table: one row a day, one column a series.
function table(rowNames, colNames, value, format) {
  return h('details', { class: 'chart-table' },
    h('summary', { text: t('usage.asTable') }),
    h('div', { class: 'scroll' }, h('table', { class: 'model-table' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col', text: t('usage.col.day') }),
        ...colNames.map((n) => h('th', { scope: 'col', text: n })))),
      h('tbody', {}, ...rowNames.map((r, i) => h('tr', {}, h('th', { scope: 'row', text: r }),
        ...colNames.map((_, j) => h('td', { text: format(value(i, j)) }))))))));
}

// usageCSV is the ledger of the period p by key, model and day as CSV text, fetched with the
// admin key.
export async function usageCSV(p) {
  const path = `/admin/usage?from=${encodeURIComponent(p.from)}&to=${encodeURIComponent(p.to)}&group_by=key,model,day&format=csv`;
  const res = await fetch(path, { headers: headers('admin'), cache: 'no-store' });
  if (!res.ok) throw await errorOf(res, 'admin');
  return res.text();
}

// csv downloads the chosen period's usageCSV as a file.
async function csv(choice, from, to, error) {
  const p = period(choice, Date.now(), from, to);
  if (!p) return;
  try {
    const url = URL.createObjectURL(new Blob([await usageCSV(p)], { type: 'text/csv' }));
    const a = h('a', { href: url, download: `tollgate-usage-${p.days[0]}-${p.days.at(-1)}.csv` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 0);
  } catch (e) {
    say(error, t('usage.error', { m: e instanceof ApiError ? `${e.code}: ${e.message}` : e.message }));
  }
}
