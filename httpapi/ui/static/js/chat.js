// Single chat: a conversation with one model, streamed, reasoning folded, with a stop button.
// Each answer is a Card; a finished answer (done or truncated) joins the history that the next
// message sends, a failed or stopped one does not (its Retry sends the same history again).

import { byId, h, say } from './dom.js';
import { t, onLangChange } from './i18n.js';
import { models } from './api.js';
import { Card } from './card.js';

export function mountChat() {
  const form = byId('chat-form');
  const select = byId('chat-model');
  const input = byId('chat-input');
  const maxTokens = byId('chat-max-tokens');
  const stop = byId('chat-stop');
  const error = byId('chat-error');
  const log = byId('chat-log');
  const empty = byId('chat-empty');

  let history = []; // finished turns: {role, content}
  let current = null; // the Card answering now
  const turns = []; // {user: element, card}

  function busy() {
    return current !== null && current.run.active;
  }

  function renderBusy() {
    stop.disabled = !busy();
    empty.hidden = turns.length > 0;
  }

  // settle moves a finished answer into the history once its run ends.
  function settle(card, sent) {
    const observer = new MutationObserver(() => {
      const r = card.run;
      renderBusy();
      if (r.active) return;
      if ((r.state === 'done' || r.state === 'truncated') && history === sent.history) {
        history = [...sent.messages, { role: 'assistant', content: r.text }];
      }
    });
    observer.observe(card.el, { attributes: true, attributeFilter: ['data-state'] });
  }

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const text = input.value.trim();
    const model = select.value;
    const limit = Math.floor(Number(maxTokens.value));
    if (!model) return say(error, t('chat.needModel'));
    if (!text) return say(error, t('chat.needPrompt'));
    if (!(limit >= 1)) return say(error, `max_tokens: ${maxTokens.validationMessage || maxTokens.value}`);
    if (busy()) return;
    say(error, '');
    const messages = [...history, { role: 'user', content: text }];
    const card = new Card({ model, messages, maxTokens: limit, priority: 'interactive' });
    const user = h('li', { class: 'turn user' },
      h('span', { class: 'who', 'data-i18n': 'chat.you', text: t('chat.you') }),
      h('div', { class: 'said', text }));
    log.append(user, h('li', { class: 'turn assistant' }, card.el));
    turns.push({ user, card });
    current = card;
    settle(card, { history, messages });
    input.value = '';
    card.start();
    renderBusy();
    card.el.scrollIntoView({ block: 'nearest' });
  });

  input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) { // IME composition (Korean) keeps Enter
      ev.preventDefault();
      form.requestSubmit();
    }
  });
  stop.addEventListener('click', () => current?.stop());
  byId('chat-sample').addEventListener('click', () => {
    input.value = t('sample.prompt');
    input.focus();
  });
  byId('chat-clear').addEventListener('click', () => {
    for (const { card } of turns) card.dispose();
    turns.length = 0;
    history = [];
    current = null;
    log.replaceChildren();
    say(error, '');
    renderBusy();
    input.focus();
  });
  onLangChange(() => {
    for (const el of log.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
  });

  return {
    async load() {
      try {
        const data = await models();
        const keep = select.value;
        select.replaceChildren(...data.map((m) => h('option', { value: m.id, text: m.id })));
        if (data.some((m) => m.id === keep)) select.value = keep;
      } catch (e) {
        say(error, t('models.loadError', { m: e.message || e.code }));
      }
      renderBusy();
    },
  };
}
