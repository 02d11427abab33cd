// Run is one model's answer to one conversation: an ordinary streaming chat request with its
// own abort, and the small state machine a card shows (SPEC §14):
//
//   queued ──headers──▶ generating ──[DONE]──▶ done | truncated (finish_reason "length")
//     │                    └──error event / broken stream──▶ failed
//     ├──provider_queue_full, gateway_overloaded (at most twice)──▶ busy ──timer──▶ queued
//     └──any other refusal──▶ failed
//   stop() from queued, generating or busy ──▶ stopped
//
// "queued" lasts until the response headers arrive: the gateway sends them when the call
// leaves its queue and starts on a lane, with X-Gateway-Queue-Ms. The generation time is
// counted from then, never including the queue wait.

import { chat, errorOf } from './api.js';
import { events } from './sse.js';
import { shouldRetry, retryDelay } from './retry.js';

const activeStates = new Set(['queued', 'generating', 'busy']);

export class Run {
  state = 'idle';
  text = '';
  reasoning = '';
  finish = null; // the finish_reason of the last choice that had one
  usage = null; // the usage chunk, when the gateway sent one
  error = null; // {code, message, status} or {code, key, vars} for the console's own errors
  queueMs = 0; // X-Gateway-Queue-Ms of the last answer
  sentAt = 0; // performance.now() of the current attempt's request
  startedAt = null; // when generation started (headers arrived)
  endedAt = null;
  retries = 0; // automatic retries made
  retryAt = null; // when the pending retry fires

  #ctrl = null;
  #timer = 0;
  #gen = 0; // bumped by start and stop: callbacks of an older generation do nothing

  // opts: model, messages, maxTokens, priority; onChange() after every state change,
  // onText(kind, piece) for every piece of "content" or "reasoning".
  constructor(opts) {
    this.opts = { priority: 'interactive', onChange() {}, onText() {}, ...opts };
  }

  get model() { return this.opts.model; }
  get active() { return activeStates.has(this.state); }

  // start sends the request afresh, forgetting any earlier answer.
  start() {
    this.#halt();
    Object.assign(this, { text: '', reasoning: '', finish: null, usage: null, error: null,
      queueMs: 0, startedAt: null, endedAt: null, retries: 0, retryAt: null });
    this.#attempt(this.#gen);
  }

  // stop aborts the request (the gateway then cancels the backend call or drops the queued
  // one) or the pending retry, keeping what has arrived.
  stop() {
    if (!this.active) return;
    this.#halt();
    this.#set({ state: 'stopped', endedAt: performance.now(), retryAt: null });
  }

  #halt() {
    this.#gen++;
    this.#ctrl?.abort();
    this.#ctrl = null;
    clearTimeout(this.#timer);
  }

  #set(fields) {
    Object.assign(this, fields);
    this.opts.onChange();
  }

  async #attempt(gen) {
    const ctrl = new AbortController();
    this.#ctrl = ctrl;
    this.#set({ state: 'queued', sentAt: performance.now(), retryAt: null, error: null });
    const { model, messages, maxTokens, priority } = this.opts;
    let res;
    try {
      res = await chat({ model, messages, maxTokens, priority, signal: ctrl.signal });
    } catch (e) {
      if (gen === this.#gen) this.#fail({ code: 'network_error', key: 'error.network', vars: { m: e.message } });
      return;
    }
    if (gen !== this.#gen) return;
    this.queueMs = Number(res.headers.get('X-Gateway-Queue-Ms')) || 0;
    if (!res.ok) {
      const err = await errorOf(res);
      if (gen !== this.#gen) return;
      if (shouldRetry(err.code, this.retries)) {
        this.#retryLater(gen, err);
      } else {
        this.#fail({ code: err.code, message: err.message, status: err.status });
      }
      return;
    }
    this.#set({ state: 'generating', startedAt: performance.now() });
    await this.#read(gen, res.body);
  }

  // #read applies the stream's events. A failure to read is the network's (or the abort's);
  // a failure to apply an event is the console's own bug, reported as such.
  async #read(gen, body) {
    const stream = events(body);
    for (;;) {
      let step;
      try {
        step = await stream.next();
      } catch (e) {
        if (gen === this.#gen) this.#fail({ code: 'network_error', key: 'error.network', vars: { m: e.message } });
        return;
      }
      if (gen !== this.#gen) break; // stopped: the abort has ended the body
      if (step.done) {
        this.#fail({ code: 'stream_incomplete', key: 'error.incomplete' });
        return;
      }
      if (step.value === '[DONE]') {
        await stream.return(); // cancels whatever follows
        this.#set({ state: this.finish === 'length' ? 'truncated' : 'done', endedAt: performance.now() });
        return;
      }
      let more;
      try {
        more = this.#event(step.value);
      } catch (e) {
        console.error('console: applying an event', e);
        this.#fail({ code: 'console_error', message: String(e.message ?? e) });
        more = false;
      }
      if (!more) break;
    }
    await stream.return();
  }

  // #event applies one chunk; false when it ended the run (an error event, or not a JSON object).
  #event(data) {
    let msg;
    try {
      msg = JSON.parse(data);
    } catch {
      this.#fail({ code: 'bad_event', key: 'error.badEvent' });
      return false;
    }
    if (!msg || typeof msg !== 'object') {
      this.#fail({ code: 'bad_event', key: 'error.badEvent' });
      return false;
    }
    if (typeof msg.error === 'object' && msg.error) {
      this.#fail({ code: String(msg.error.code ?? 'upstream_error'), message: String(msg.error.message ?? '') });
      return false;
    }
    for (const choice of msg.choices ?? []) {
      const delta = choice.delta ?? {};
      if (delta.reasoning_content) {
        this.reasoning += delta.reasoning_content;
        this.opts.onText('reasoning', delta.reasoning_content);
      }
      if (delta.content) {
        this.text += delta.content;
        this.opts.onText('content', delta.content);
      }
      if (choice.finish_reason) this.finish = choice.finish_reason;
    }
    if (msg.usage) this.#set({ usage: msg.usage });
    return true;
  }

  #retryLater(gen, err) {
    const delay = retryDelay(this.retries + 1, err.retryAfterMs);
    this.#set({ state: 'busy', retries: this.retries + 1, retryAt: performance.now() + delay,
      error: { code: err.code, message: err.message, status: err.status } });
    this.#timer = setTimeout(() => {
      if (gen === this.#gen) this.#attempt(gen);
    }, delay);
  }

  #fail(error) {
    this.#ctrl?.abort(); // a stream that carried an error event is done: let it go
    this.#ctrl = null;
    this.#set({ state: 'failed', error, endedAt: performance.now() });
  }
}
