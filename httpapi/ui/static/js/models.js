// Models: the spec cards of /v1/models (SPEC §6), unknown values shown as unknown, never
// guessed. "Test model" sends one short, non-streaming call at priority normal (SPEC §2: UI
// test calls do not go ahead of people chatting).

import { byId, h } from './dom.js';
import { t, integer, seconds, onLangChange } from './i18n.js';
import { models, chat, errorOf } from './api.js';

const testPrompt = 'Introduce yourself in one sentence.';
const testMaxTokens = 64;
const fields = ['provider', 'kind', 'context_window', 'max_output_tokens', 'reasoning', 'tools', 'vision',
  'lanes', 'model_lanes', 'run_timeout_ms', 'priority_default', 'fallbacks'];

export function mountModels() {
  const grid = byId('models-grid');
  const filter = byId('models-filter');
  let data = [];
  let failure = null;
  const results = new Map(); // id → last test result, kept across redraws

  function render() {
    if (failure) {
      grid.replaceChildren(h('p', { class: 'form-error', role: 'alert', text: t('models.loadError', { m: failure }) }));
      return;
    }
    if (data.length === 0) {
      grid.replaceChildren(h('p', { class: 'hint', text: t('models.none') }));
      return;
    }
    const q = filter.value.trim().toLowerCase();
    grid.replaceChildren(...data.filter((m) => !q || m.id.toLowerCase().includes(q)).map(card));
  }

  function card(m) {
    const result = h('p', { class: 'test-result', 'aria-live': 'polite' });
    showResult(result, results.get(m.id));
    const button = h('button', { type: 'button', class: 'small', text: t('models.test'),
      'aria-label': t('models.testLabel', { m: m.id }), onclick: () => test(m.id, button, result) });
    return h('article', { class: 'spec-card', dataset: { model: m.id } },
      h('h3', { text: m.id }),
      h('dl', {}, ...fields.flatMap((f) => [h('dt', { text: t(`spec.${f}`) }), h('dd', { text: value(f, m.spec?.[f]) })])),
      h('div', { class: 'row' }, button, result));
  }

  async function test(id, button, result) {
    button.disabled = true;
    results.set(id, { state: 'testing' });
    showResult(result, results.get(id));
    const began = performance.now();
    let r;
    try {
      const res = await chat({ model: id, messages: [{ role: 'user', content: testPrompt }],
        maxTokens: testMaxTokens, stream: false, priority: 'normal' });
      if (!res.ok) {
        const e = await errorOf(res);
        r = { state: 'failed', code: e.code, message: e.message };
      } else {
        const body = await res.json();
        const queueMs = Number(res.headers.get('X-Gateway-Queue-Ms')) || 0;
        r = { state: 'ok', ms: performance.now() - began - queueMs,
          text: String(body.choices?.[0]?.message?.content ?? '') };
      }
    } catch (e) {
      r = { state: 'failed', code: 'network_error', message: e.message };
    }
    results.set(id, r);
    showResult(result, r);
    button.disabled = false;
  }

  filter.addEventListener('input', render);
  onLangChange(render);

  return {
    async load() {
      try {
        data = await models();
        failure = null;
      } catch (e) {
        failure = e.code ? `${e.code}: ${e.message}` : e.message;
      }
      render();
    },
  };
}

function showResult(el, r) {
  el.dataset.state = r?.state ?? '';
  el.replaceChildren();
  if (!r) return;
  if (r.state === 'testing') {
    el.textContent = t('models.testing');
  } else if (r.state === 'ok') {
    el.append(t('models.testOk', { s: seconds(r.ms) }), ' · ', h('q', { text: r.text }));
  } else {
    el.append(t('models.testFailed'), ' · ', h('code', { text: r.code }), ' ', r.message);
  }
}

function value(field, v) {
  if (v === null || v === undefined) return t('value.unknown');
  if (typeof v === 'boolean') return t(v ? 'value.yes' : 'value.no');
  if (field === 'fallbacks') return v.length ? v.join(', ') : t('value.none');
  if (field === 'run_timeout_ms') return v >= 60000 && v % 60000 === 0 ? t('minutes', { n: integer(v / 60000) }) : seconds(v);
  if (typeof v === 'number') return integer(v);
  return String(v);
}
