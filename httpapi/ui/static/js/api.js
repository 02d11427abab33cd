// The console's calls to the gateway's public API, same origin. Keys live in sessionStorage:
// they last as long as the browser session and are sent to this origin only.

const store = window.sessionStorage;
const slot = { api: 'tollgate.api_key', admin: 'tollgate.admin_key' };

export const keys = {
  get(kind) { return store.getItem(slot[kind]) ?? ''; },
  set(kind, key) { store.setItem(slot[kind], key); },
  forget() { for (const s of Object.values(slot)) store.removeItem(s); },
};

// ApiError is a refused call: the HTTP status, the gateway's code and message (SPEC §4), and
// how long it advised to wait (ms; 0 when it gave no advice).
export class ApiError extends Error {
  constructor(status, code, message, retryAfterMs = 0) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfterMs = retryAfterMs;
  }
}

// Unauthorized is fired on document when a call is refused for its key; main.js asks for one.
export const unauthorizedEvent = 'tollgate:unauthorized';

// headers returns the request headers with the key of kind: "api" for /v1, "admin" for /admin
// (the admin key when one was given, else the API key, which /admin takes when the gateway has
// no admin keys).
export function headers(kind, extra = {}) {
  const key = kind === 'admin' ? keys.get('admin') || keys.get('api') : keys.get('api');
  return key ? { Authorization: `Bearer ${key}`, ...extra } : { ...extra };
}

// errorOf reads a refused response: the body's error when it has OpenAI's shape, else the
// status alone. A 401 also fires unauthorizedEvent.
export async function errorOf(res, kind = 'api') {
  let detail = {};
  try {
    const body = await res.json();
    if (body && typeof body.error === 'object' && body.error) detail = body.error;
  } catch { /* not JSON: the status says enough */ }
  const err = new ApiError(res.status, String(detail.code ?? `http_${res.status}`),
    String(detail.message ?? ''), retryAfterMs(res, detail));
  if (res.status === 401) {
    document.dispatchEvent(new CustomEvent(unauthorizedEvent, { detail: { kind, code: err.code } }));
  }
  return err;
}

// retryAfterMs is the gateway's advised wait: the body's retry_after_ms, else the
// retry-after-ms header, else Retry-After in seconds; 0 when none is given.
function retryAfterMs(res, detail) {
  const fromBody = Number(detail.retry_after_ms);
  if (Number.isFinite(fromBody) && fromBody > 0) return fromBody;
  const ms = Number(res.headers.get('retry-after-ms'));
  if (Number.isFinite(ms) && ms > 0) return ms;
  const s = Number(res.headers.get('Retry-After'));
  return Number.isFinite(s) && s > 0 ? s * 1000 : 0;
}

// getJSON fetches a JSON document, throwing ApiError when the gateway refuses.
export async function getJSON(path, { kind = 'api', signal } = {}) {
  const res = await fetch(path, { headers: headers(kind), signal, cache: 'no-store' });
  if (!res.ok) throw await errorOf(res, kind);
  return res.json();
}

// chat sends one chat completion request and returns the response as it arrives (the caller
// reads the body). Priority is an X-Gateway-Priority class.
export function chat({ model, messages, maxTokens, stream = true, priority = 'interactive', signal }) {
  const body = { model, messages, stream, max_tokens: maxTokens };
  if (stream) body.stream_options = { include_usage: true };
  return fetch('/v1/chat/completions', {
    method: 'POST',
    headers: headers('api', { 'Content-Type': 'application/json', 'X-Gateway-Priority': priority }),
    body: JSON.stringify(body),
    signal,
  });
}

// models is the gateway's model list (GET /v1/models), loaded once and again when keys change.
let modelsPromise = null;
export function models({ reload = false } = {}) {
  if (reload || !modelsPromise) {
    modelsPromise = getJSON('/v1/models').then((doc) => doc.data ?? []);
    modelsPromise.catch(() => { modelsPromise = null; }); // a failure is not remembered
  }
  return modelsPromise;
}

// admin sends one call to the admin API (SPEC §18) with the admin key and a JSON body (none
// when body is undefined), and returns the decoded answer, throwing ApiError when refused.
export async function admin(method, path, body) {
  const init = { method, headers: headers('admin'), cache: 'no-store' };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  if (!res.ok) throw await errorOf(res, 'admin');
  return res.json();
}
