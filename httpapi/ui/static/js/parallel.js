// Parallel chat: one prompt to 2–10 picks from /v1/models, each its own ordinary streaming
// request (a fan-out, never the batch endpoint). A model may be picked more than once. Before
// sending, picks beyond a provider's lanes or a model's model lanes are announced: those will
// wait their turn in the gateway's queue.

import { byId, h, say } from './dom.js';
import { t, onLangChange } from './i18n.js';
import { models } from './api.js';
import { overflow } from './capacity.js';
import { Card } from './card.js';

const minPicks = 2;
const maxPicks = 10;
// stopStagger (ms) is how long Stop all lets the gateway see the waiting calls leave.
const stopStagger = 50;

export function mountParallel() {
  const list = byId('par-models');
  const filter = byId('par-filter');
  const picked = byId('par-picked');
  const notice = byId('par-notice');
  const noticeList = byId('par-notice-list');
  const prompt = byId('par-prompt');
  const maxTokens = byId('par-max-tokens');
  const send = byId('par-send');
  const stopAll = byId('par-stop');
  const error = byId('par-error');
  const board = byId('par-cards');

  let cards = [];
  let specs = new Map(); // id → spec
  const picks = []; // model ids in pick order, repeats allowed

  const count = (id) => picks.filter((p) => p === id).length;

  function renderList() {
    const q = filter.value.trim().toLowerCase();
    const rows = [];
    for (const id of specs.keys()) {
      if (q && !id.toLowerCase().includes(q)) continue;
      const n = count(id);
      rows.push(h('li', { class: n > 0 ? 'pick on' : 'pick', dataset: { model: id } },
        h('span', { class: 'pick-name', text: id }),
        h('button', { type: 'button', class: 'small step', 'aria-label': t('parallel.remove', { m: id }),
          disabled: n === 0, dataset: { action: 'remove' }, text: '−' }),
        h('output', { class: 'pick-count', text: String(n) }),
        h('button', { type: 'button', class: 'small step', 'aria-label': t('parallel.add', { m: id }),
          disabled: picks.length >= maxPicks, dataset: { action: 'add' }, text: '+' })));
    }
    list.replaceChildren(...rows);
  }

  function renderPicks() {
    picked.textContent = picks.length === 0 ? t('parallel.picked.zero') : t('parallel.picked', { n: picks.length });
    send.textContent = t('parallel.send', { n: picks.length });
    const over = overflow(picks, (id) => specs.get(id));
    noticeList.replaceChildren(...over.map((o) => h('li', {
      text: o.scope === 'provider'
        ? t('notice.provider', { p: o.name, lanes: o.lanes, n: o.picked, extra: o.extra })
        : t('notice.model', { m: o.name, lanes: o.lanes, n: o.picked, extra: o.extra }),
    })));
    notice.hidden = over.length === 0;
  }

  function renderBusy() {
    stopAll.disabled = !cards.some((c) => c.run.active);
  }

  list.addEventListener('click', (ev) => {
    const button = ev.target.closest('button[data-action]');
    if (!button) return;
    const id = button.closest('li').dataset.model;
    if (button.dataset.action === 'add' && picks.length < maxPicks) {
      picks.push(id);
    } else if (button.dataset.action === 'remove') {
      const at = picks.lastIndexOf(id);
      if (at >= 0) picks.splice(at, 1);
    }
    renderList();
    renderPicks();
    list.querySelector(`li[data-model="${CSS.escape(id)}"] button[data-action="${button.dataset.action}"]`)?.focus();
  });
  filter.addEventListener('input', renderList);
  byId('par-clear-picks').addEventListener('click', () => {
    picks.length = 0;
    renderList();
    renderPicks();
  });
  byId('par-sample').addEventListener('click', () => {
    prompt.value = t('sample.prompt');
    prompt.focus();
  });
  // Stop all aborts the calls still waiting first and the running ones a moment later, so
  // that the gateway has dropped the waiting ones from its queue before the running ones give
  // their lanes back; otherwise it could start a waiting call on its way out. (Such a call is
  // still cancelled, but only when Chromium lets go of its connection: a browser that sees an
  // answer begin just as it aborts may keep the socket up to 5 s to drain it.)
  function stopEvery(list, then = () => {}) {
    const running = list.filter((c) => c.run.state === 'generating');
    for (const c of list) if (!running.includes(c)) c.stop();
    setTimeout(() => {
      for (const c of running) c.stop();
      then();
    }, stopStagger);
  }
  stopAll.addEventListener('click', () => stopEvery(cards));

  byId('par-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const text = prompt.value.trim();
    const limit = Math.floor(Number(maxTokens.value));
    if (picks.length < minPicks || picks.length > maxPicks) return say(error, t('parallel.needModels', { n: picks.length }));
    if (!text) return say(error, t('parallel.needPrompt'));
    if (!(limit >= 1)) return say(error, `max_tokens: ${maxTokens.validationMessage || maxTokens.value}`);
    say(error, '');
    const old = cards;
    stopEvery(old, () => { for (const c of old) c.dispose(); }); // a new send replaces the board
    const seen = new Map();
    cards = picks.map((model) => {
      const n = (seen.get(model) ?? 0) + 1;
      seen.set(model, n);
      const title = count(model) > 1 ? t('card.copy', { m: model, n }) : model;
      return new Card({ model, title, messages: [{ role: 'user', content: text }], maxTokens: limit,
        priority: 'interactive' });
    });
    board.replaceChildren(...cards.map((c) => c.el));
    for (const c of cards) c.start();
    renderBusy();
  });

  // Stop all follows the cards: it is enabled while any of them is still active.
  new MutationObserver(renderBusy).observe(board, { subtree: true, attributes: true, attributeFilter: ['data-state'] });

  onLangChange(() => { renderList(); renderPicks(); });

  return {
    async load() {
      try {
        const data = await models();
        specs = new Map(data.map((m) => [m.id, m.spec]));
        for (let i = picks.length - 1; i >= 0; i--) if (!specs.has(picks[i])) picks.splice(i, 1);
      } catch (e) {
        say(error, t('models.loadError', { m: e.message || e.code }));
      }
      renderList();
      renderPicks();
    },
  };
}
