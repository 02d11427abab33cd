// Card shows one Run: its state and live time, the queue-wait line, the answer with folded
// reasoning, the warning of a truncated answer, the failure's code and message, a footer with
// time, finish reason and tokens, and its own Stop and Retry. Model output only ever becomes
// text nodes.

import { h } from './dom.js';
import { t, plural, seconds, integer, onLangChange } from './i18n.js';
import { Run } from './run.js';
import { maxRetries } from './retry.js';

// nearBottom is how close (px) to its end a card's scroll must be for new text to keep it there.
const nearBottom = 40;
// queueLineAfter: a card says how long it queued only when it waited longer than this (ms).
const queueLineAfter = 1000;

const cards = new Set();
const ticking = new Set();
let ticker = 0;

onLangChange(() => { for (const c of cards) c.render(); });

// tick redraws the live times of the running cards; the interval runs only while one does.
function schedule(card, on) {
  if (on) ticking.add(card);
  else ticking.delete(card);
  if (ticking.size > 0 && !ticker) {
    ticker = setInterval(() => { for (const c of ticking) c.tick(); }, 100);
  } else if (ticking.size === 0 && ticker) {
    clearInterval(ticker);
    ticker = 0;
  }
}

export class Card {
  // opts: model, messages, maxTokens, priority, and title (defaults to the model id).
  constructor(opts) {
    this.run = new Run({ ...opts, onChange: () => this.render(), onText: (kind, piece) => this.#append(kind, piece) });
    this.title = opts.title ?? opts.model;
    this.#build();
    cards.add(this);
  }

  start() { this.run.start(); }
  stop() { this.run.stop(); }

  // dispose stops the run and forgets the card; its element is the caller's to remove.
  dispose() {
    this.run.stop();
    cards.delete(this);
    schedule(this, false);
  }

  #build() {
    const id = `card-${Math.random().toString(36).slice(2, 10)}`;
    this.stateLabel = h('span', { class: 'state-label', 'aria-live': 'polite' });
    this.stateTime = h('span', { class: 'state-time' });
    this.stopButton = h('button', { type: 'button', class: 'stop small', onclick: () => this.run.stop() });
    this.retryButton = h('button', { type: 'button', class: 'retry small', onclick: () => this.run.start() });
    this.waitLine = h('p', { class: 'card-wait', hidden: true });
    this.warning = h('p', { class: 'card-warning', role: 'alert', hidden: true });
    this.errorCode = h('code', { class: 'error-code' });
    this.errorMessage = h('span', { class: 'error-message' });
    this.errorBox = h('p', { class: 'card-error', hidden: true }, this.errorCode, ' ', this.errorMessage);
    this.reasoningText = document.createTextNode('');
    this.reasoningSummary = h('summary');
    this.reasoningBox = h('details', { class: 'card-reasoning', hidden: true }, this.reasoningSummary,
      h('div', { class: 'reasoning-text' }, this.reasoningText));
    this.answerText = document.createTextNode('');
    this.answer = h('div', { class: 'card-answer' }, this.answerText);
    this.body = h('div', { class: 'card-body', tabindex: '0', role: 'region', 'aria-labelledby': id },
      this.reasoningBox, this.answer);
    this.foot = h('footer', { class: 'card-foot' });
    this.el = h('article', { class: 'card', dataset: { model: this.run.model } },
      h('header', { class: 'card-head' },
        h('h3', { class: 'card-title', id, text: this.title }),
        h('p', { class: 'card-state' }, this.stateLabel, ' ', this.stateTime),
        h('div', { class: 'card-actions' }, this.stopButton, this.retryButton)),
      this.waitLine, this.warning, this.errorBox, this.body, this.foot);
    this.render();
  }

  // #append adds streamed text, keeping the scroll at the end only when the reader was near
  // it: someone who scrolled up to read stays where they are.
  #append(kind, piece) {
    const b = this.body;
    const follow = b.scrollHeight - b.scrollTop - b.clientHeight <= nearBottom;
    if (kind === 'reasoning') {
      this.reasoningText.appendData(piece);
      this.reasoningBox.hidden = false;
    } else {
      this.answerText.appendData(piece);
    }
    b.hidden = false;
    if (follow) b.scrollTop = b.scrollHeight;
  }

  // render redraws everything but the streamed text from the run's state.
  render() {
    const r = this.run;
    if (r.text === '' && this.answerText.length > 0) this.answerText.data = ''; // a fresh start
    if (r.reasoning === '' && this.reasoningText.length > 0) {
      this.reasoningText.data = '';
      this.reasoningBox.hidden = true;
    }
    this.body.hidden = r.text === '' && r.reasoning === '';
    this.el.dataset.state = r.state;
    this.el.dataset.retries = String(r.retries);
    this.el.dataset.queueMs = String(r.queueMs);
    this.stateLabel.textContent = r.state === 'idle' ? '' : t(`state.${r.state}`);
    this.stopButton.textContent = t('card.stop');
    this.stopButton.setAttribute('aria-label', t('card.stopLabel', { m: this.title }));
    this.stopButton.disabled = !r.active;
    this.retryButton.textContent = t('card.retry');
    this.retryButton.setAttribute('aria-label', t('card.retryLabel', { m: this.title }));
    this.retryButton.disabled = r.active || r.state === 'idle';
    this.reasoningSummary.textContent = t('card.reasoning');

    const waited = r.startedAt !== null && r.queueMs > queueLineAfter;
    this.waitLine.hidden = !waited;
    this.waitLine.textContent = waited ? t('card.waited', { s: seconds(r.queueMs) }) : '';

    const truncated = r.state === 'truncated';
    this.warning.hidden = !truncated;
    this.warning.textContent = truncated ? t('card.truncatedWarning', { n: integer(r.opts.maxTokens) }) : '';

    const e = r.error;
    this.errorBox.hidden = !e;
    this.errorCode.textContent = e ? e.code : '';
    this.errorMessage.textContent = e ? (e.key ? t(e.key, e.vars) : e.message || t('error.http', { status: e.status })) : '';

    this.foot.textContent = this.#footer();
    this.tick();
    schedule(this, r.active);
  }

  // tick redraws the live time beside the state.
  tick() {
    const r = this.run;
    const now = performance.now();
    let text = '';
    switch (r.state) {
      case 'queued': text = seconds(now - r.sentAt); break;
      case 'generating': text = seconds(now - r.startedAt); break;
      case 'busy': text = t('card.retryIn', { n: r.retries, max: maxRetries, s: seconds(r.retryAt - now) }); break;
    }
    this.stateTime.textContent = text;
  }

  #footer() {
    const r = this.run;
    if (r.active || r.state === 'idle') return '';
    const parts = [];
    if (r.startedAt !== null) parts.push(seconds(r.endedAt - r.startedAt));
    if (r.finish) parts.push(t('card.finish', { r: r.finish }));
    if (r.usage) {
      parts.push(t('card.tokens', { in: integer(r.usage.prompt_tokens ?? 0), out: integer(r.usage.completion_tokens ?? 0) }));
    } else if (r.state === 'done' || r.state === 'truncated') {
      parts.push(t('card.noTokens'));
    }
    if (r.retries > 0) parts.push(plural('card.retries', r.retries));
    return parts.join(' · ');
  }
}
