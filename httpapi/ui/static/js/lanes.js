// Lanes: the live /admin/state (SPEC §7), read every half second while the view is shown and
// the page visible: gateway totals against max_running and max_admitted, then per provider its
// lanes (busy, free, and those learned away: effective_lanes below lanes), its queue, and per
// model its model lanes, running and queued.

import { byId, h, say } from './dom.js';
import { t, integer, onLangChange } from './i18n.js';
import { getJSON, ApiError } from './api.js';

// every is the refresh period (ms); SPEC §14 asks for at least one update a second.
const every = 500;

export function mountLanes() {
  const summary = byId('lanes-summary');
  const error = byId('lanes-error');
  const providers = byId('lanes-providers');
  const updated = byId('lanes-updated');

  let shown = false;
  let timer = 0;
  let inflight = null;
  let last = null; // {state, at}

  function render() {
    if (!last) return;
    const { state: s, at } = last;
    summary.textContent = t('lanes.summary', {
      r: integer(s.running), max: integer(s.max_running), q: integer(s.queued),
      a: integer(s.running + s.queued), maxA: integer(s.max_admitted),
    });
    const list = s.providers ?? [];
    providers.replaceChildren(...(list.length ? list.map(providerView) : [h('p', { class: 'hint', text: t('lanes.empty') })]));
    updated.textContent = t('lanes.updated', { t: at.toLocaleTimeString(document.documentElement.lang) });
  }

  async function refresh() {
    timer = 0;
    if (!shown || document.hidden) return;
    const ctrl = new AbortController();
    inflight = ctrl;
    try {
      const state = await getJSON('/admin/state', { kind: 'admin', signal: ctrl.signal });
      last = { state, at: new Date() };
      say(error, '');
      render();
    } catch (e) {
      if (ctrl.signal.aborted) return;
      say(error, t('lanes.error', { m: e instanceof ApiError ? `${e.code}: ${e.message}` : e.message }));
      if (e instanceof ApiError && e.status === 401) return; // main.js asks for a key and resumes us
    } finally {
      if (inflight === ctrl) inflight = null;
    }
    if (shown && !timer) timer = setTimeout(refresh, every);
  }

  function start() {
    if (!timer && !inflight) refresh();
  }

  function halt() {
    clearTimeout(timer);
    timer = 0;
    inflight?.abort();
    inflight = null;
  }

  document.addEventListener('visibilitychange', () => (document.hidden ? halt() : shown && start()));
  onLangChange(render);

  return {
    show() { shown = true; start(); },
    hide() { shown = false; halt(); },
    resume() { if (shown) { halt(); start(); } },
  };
}

// providerView draws one provider of /admin/state: a cell per configured lane, busy for each
// running call, free up to effective_lanes, and struck out beyond (learned away).
export function providerView(p) {
  const lanes = [];
  for (let i = 0; i < p.lanes; i++) {
    const cls = i < p.running ? 'lane busy' : i < p.effective_lanes ? 'lane free' : 'lane off';
    lanes.push(h('span', { class: cls }));
  }
  const learned = p.effective_lanes < p.lanes
    ? h('span', { class: 'learned', text: t('lanes.effective', { e: p.effective_lanes, l: p.lanes }) }) : null;
  return h('section', { class: 'provider', dataset: { provider: p.name }, 'aria-labelledby': `prov-${p.name}` },
    h('header', { class: 'provider-head' },
      h('h3', { id: `prov-${p.name}` }, p.name, ' ', h('span', { class: 'kind', text: p.kind })),
      h('div', { class: 'meter', role: 'img', 'aria-label': t('lanes.lanes', { r: p.running, l: p.lanes }) }, ...lanes),
      h('span', { class: 'lanes-text', dataset: { running: p.running, lanes: p.lanes, effective: p.effective_lanes } },
        t('lanes.lanes', { r: integer(p.running), l: integer(p.lanes) })),
      learned,
      h('span', { class: p.queued > 0 ? 'queue waiting' : 'queue', dataset: { queued: p.queued } },
        t('lanes.queue', { q: integer(p.queued), len: integer(p.queue_length) }))),
    h('table', { class: 'model-table' },
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col', text: t('lanes.col.model') }),
        h('th', { scope: 'col', text: t('lanes.col.modelLanes') }),
        h('th', { scope: 'col', text: t('lanes.col.running') }),
        h('th', { scope: 'col', text: t('lanes.col.queued') }))),
      h('tbody', {}, ...(p.models ?? []).map((m) => h('tr', { dataset: { model: m.id } },
        h('th', { scope: 'row', text: m.id }),
        h('td', { text: integer(m.model_lanes) }),
        h('td', { class: m.running > 0 ? 'hot' : '', text: integer(m.running) }),
        h('td', { class: m.queued > 0 ? 'hot' : '', text: integer(m.queued) }))))));
}
