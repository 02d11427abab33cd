// Keys: the client keys of the admin API (SPEC §18), for an admin. The list shows each key's
// limits, its spend this period against its budget and when it was last used; keys created
// here can be edited, rotated and revoked (a key from the configuration file is changed there).
// A new secret, from creating or rotating, is shown once in its own dialog with a copy button:
// the gateway keeps only its digest, and the console forgets it when the dialog closes.

import { byId, h, say } from './dom.js';
import { t, integer, usd, lang, onLangChange } from './i18n.js';
import { admin, ApiError } from './api.js';

// The number fields of the key form, by the admin API's names (rate_limit's under rl.).
const numbers = ['weight', 'max_running', 'max_queued', 'rl.rpm', 'rl.tpm', 'budget.usd'];

// limitsBody is the admin API body for the form's values (strings by field name). Creating,
// an empty field is left out (no cap of the key's own); editing, it is null, which clears it.
// It throws an Error naming the first field that is not a number of 0 or more (whole, but for
// the budget; a weight above 0).
export function limitsBody(v, editing) {
  const empty = editing ? null : undefined;
  const num = {};
  for (const f of numbers) {
    const s = String(v[f] ?? '').trim();
    if (s === '') { num[f] = empty; continue; }
    const n = Number(s);
    const integral = f !== 'budget.usd';
    if (!Number.isFinite(n) || n < 0 || (integral && !Number.isInteger(n)) || (f === 'weight' && n <= 0)) {
      throw Object.assign(new Error(f), { field: f });
    }
    num[f] = n;
  }
  const models = String(v.models ?? '').split(/[\s,]+/).filter(Boolean);
  const body = {
    weight: num.weight,
    max_running: num.max_running,
    max_queued: num.max_queued,
    rate_limit: num['rl.rpm'] == null && num['rl.tpm'] == null ? empty
      : Object.fromEntries([['rpm', num['rl.rpm']], ['tpm', num['rl.tpm']]].filter(([, x]) => x != null)),
    models: models.length ? models : empty,
    max_priority: v.max_priority ? v.max_priority : empty,
    budget: num['budget.usd'] == null ? empty : { usd: num['budget.usd'], period: v['budget.period'] || 'month' },
  };
  if (!editing) body.name = String(v.name ?? '').trim();
  for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
  return body;
}

// unset says a limit is not set: the admin API shows an unset cap as null or 0, and an unset
// priority as null or "".
export function unset(x) {
  return x === null || x === undefined || x === 0 || x === '';
}

// formValues is the form's fields of a key, as strings (the reverse of limitsBody).
function formValues(k) {
  const str = (x) => (unset(x) ? '' : String(x));
  return {
    name: k.name, weight: str(k.weight), max_running: str(k.max_running), max_queued: str(k.max_queued),
    'rl.rpm': str(k.rate_limit?.rpm), 'rl.tpm': str(k.rate_limit?.tpm), models: (k.models ?? []).join(' '),
    max_priority: str(k.max_priority), 'budget.usd': str(k.budget?.usd), 'budget.period': k.budget?.period ?? 'month',
  };
}

export function mountKeys() {
  const list = byId('keys-list');
  const error = byId('keys-error');
  const status = byId('keys-status');
  const form = byId('keyform');
  const formDialog = byId('keyform-dialog');
  const formError = byId('keyform-error');
  let keys = null;
  let editing = null; // the name of the key being edited; null while creating

  async function load() {
    try {
      const doc = await admin('GET', '/admin/keys');
      keys = doc.keys ?? [];
      say(error, '');
      render();
    } catch (e) {
      say(error, t('keys.error', { m: describe(e) }));
    }
  }

  function render() {
    if (!keys) return;
    if (keys.length === 0) {
      list.replaceChildren(h('p', { class: 'hint', text: t('keys.none') }));
      return;
    }
    const cols = ['name', 'weight', 'running', 'queued', 'rate', 'models', 'priority', 'spend', 'used', 'actions'];
    list.replaceChildren(h('table', { class: 'model-table keys-table' },
      h('caption', { class: 'visually-hidden', text: t('keys.caption') }),
      h('thead', {}, h('tr', {}, ...cols.map((c) => h('th', { scope: 'col', text: t(`keys.col.${c}`) })))),
      h('tbody', {}, ...keys.map(row))));
  }

  function row(k) {
    const none = t('keys.noCap');
    const cap = (n) => (unset(n) ? none : integer(n));
    const rl = k.rate_limit ?? {};
    const rate = [unset(rl.rpm) ? null : t('keys.rpm', { n: integer(rl.rpm) }),
      unset(rl.tpm) ? null : t('keys.tpm', { n: integer(rl.tpm) })].filter(Boolean).join(' · ') || none;
    const state = k.revoked ? 'revoked' : k.source;
    return h('tr', { dataset: { key: k.name, source: k.source, revoked: String(Boolean(k.revoked)) } },
      h('th', { scope: 'row' }, k.name, ' ', h('span', { class: `kind ${state}`, text: t(`keys.source.${state}`) })),
      h('td', { text: unset(k.weight) ? '1' : integer(k.weight) }),
      h('td', { text: cap(k.max_running) }),
      h('td', { text: cap(k.max_queued) }),
      h('td', { text: rate }),
      h('td', { class: 'models', text: k.models?.length ? k.models.join(', ') : t('keys.allModels') }),
      h('td', { text: unset(k.max_priority) ? none : k.max_priority }),
      h('td', {}, spend(k)),
      h('td', { class: 'when', text: k.last_used_at ? when(k.last_used_at) : t('keys.never'),
        title: t('keys.created', { t: when(k.created_at) }) }),
      h('td', { class: 'actions' }, ...actions(k)));
  }

  function spend(k) {
    const spent = Number(k.spend_usd) || 0;
    if (!k.budget) return h('span', { class: 'spend', text: usd(spent) });
    const label = t('keys.budget', { s: usd(spent), b: usd(k.budget.usd), p: t(`keys.period.${k.budget.period}`) });
    return h('span', { class: 'spend' },
      h('meter', { min: 0, max: k.budget.usd || 1, value: Math.min(spent, k.budget.usd), high: k.budget.usd * 0.8,
        optimum: 0, 'aria-label': label }), ' ', label);
  }

  function actions(k) {
    if (k.revoked) return [];
    if (k.source === 'config') return [h('span', { class: 'hint', text: t('keys.inConfig') })];
    const b = (action, fn) => h('button', { type: 'button', class: `small ${action === 'revoke' ? 'danger' : ''}`,
      dataset: { action }, text: t(`keys.${action}`), 'aria-label': t(`keys.${action}Label`, { k: k.name }), onclick: fn });
    return [b('edit', () => openForm(k)), b('rotate', () => rotate(k)), b('revoke', () => revoke(k))];
  }

  // openForm opens the key form, empty to create a key or filled to edit k's limits.
  function openForm(k) {
    editing = k ? k.name : null;
    const v = k ? formValues(k) : { 'budget.period': 'month' };
    for (const el of form.elements) if (el.name) el.value = v[el.name] ?? '';
    form.elements.namedItem('name').disabled = Boolean(k);
    byId('keyform-title').textContent = k ? t('keys.editTitle', { k: k.name }) : t('keys.newTitle');
    byId('keyform-save').textContent = t(k ? 'keys.save' : 'keys.createButton');
    say(formError, '');
    formDialog.showModal();
    form.elements.namedItem(k ? 'weight' : 'name').focus();
  }

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const v = Object.fromEntries([...form.elements].filter((el) => el.name).map((el) => [el.name, el.value]));
    let body;
    try {
      body = limitsBody(v, editing !== null);
    } catch (e) {
      say(formError, t('keys.badField', { f: t(`keys.field.${e.field}`) }));
      form.elements.namedItem(e.field)?.focus();
      return;
    }
    if (editing === null && !body.name) {
      say(formError, t('keys.needName'));
      return form.elements.namedItem('name').focus();
    }
    try {
      if (editing === null) {
        const res = await admin('POST', '/admin/keys', body);
        formDialog.close();
        showSecret(t('keys.createdTitle', { k: res.key.name }), res.secret);
      } else {
        await admin('PATCH', `/admin/keys/${encodeURIComponent(editing)}`, body);
        formDialog.close();
        say(status, t('keys.saved', { k: editing }));
      }
    } catch (e) {
      say(formError, describe(e));
      return;
    }
    load();
  });
  byId('keyform-cancel').addEventListener('click', () => formDialog.close());
  byId('keys-new').addEventListener('click', () => openForm(null));
  byId('keys-refresh').addEventListener('click', load);

  async function rotate(k) {
    const grace = await confirm('rotate', k.name);
    if (grace === null) return;
    try {
      const res = await admin('POST', `/admin/keys/${encodeURIComponent(k.name)}/rotate`, grace ? { grace } : {});
      showSecret(t('keys.rotatedTitle', { k: k.name }), res.secret);
    } catch (e) {
      say(error, describe(e));
    }
    load();
  }

  async function revoke(k) {
    if (await confirm('revoke', k.name) === null) return;
    try {
      await admin('DELETE', `/admin/keys/${encodeURIComponent(k.name)}`);
      say(status, t('keys.revoked', { k: k.name }));
    } catch (e) {
      say(error, describe(e));
    }
    load();
  }

  byId('secret-copy').addEventListener('click', copySecret);
  byId('secret-done').addEventListener('click', () => {
    byId('secret-value').value = '';
    byId('secret-dialog').close();
  });
  onLangChange(render);
  return { show: load, resume: load };
}

// confirm asks before rotating or revoking the key named k; it resolves to null when the
// admin cancels, else to the chosen grace ("" for none; rotating only).
function confirm(what, k) {
  const dialog = byId('confirm-dialog');
  byId('confirm-title').textContent = t(`keys.${what}Title`, { k });
  byId('confirm-text').textContent = t(`keys.${what}Text`, { k });
  byId('confirm-grace-row').hidden = what !== 'rotate';
  byId('confirm-grace').value = '';
  const ok = byId('confirm-ok');
  const cancel = byId('confirm-cancel');
  ok.textContent = t(`keys.${what}`);
  ok.className = what === 'revoke' ? 'danger' : 'primary';
  dialog.showModal();
  cancel.focus(); // the safe choice is the default
  // The ask settles by its own buttons or the Escape key (the dialog's cancel event), never
  // by a close event: that comes a task after close(), and the one of the ask before may
  // arrive after this one began.
  return new Promise((resolve) => {
    const finish = (v) => {
      ok.removeEventListener('click', okClick);
      cancel.removeEventListener('click', cancelClick);
      dialog.removeEventListener('cancel', cancelClick);
      dialog.close();
      resolve(v);
    };
    const okClick = () => finish(byId('confirm-grace').value);
    const cancelClick = () => finish(null);
    ok.addEventListener('click', okClick);
    cancel.addEventListener('click', cancelClick);
    dialog.addEventListener('cancel', cancelClick);
  });
}

// showSecret shows a new secret once, with a copy button; closing forgets it.
function showSecret(title, secret) {
  const dialog = byId('secret-dialog');
  const input = byId('secret-value');
  byId('secret-title').textContent = title;
  input.value = secret;
  say(byId('secret-copied'), '');
  dialog.addEventListener('close', () => { input.value = ''; }, { once: true });
  dialog.showModal();
  input.focus();
  input.select();
}

// copySecret copies the shown secret: the Clipboard API, else the selection's copy command.
async function copySecret() {
  const input = byId('secret-value');
  const out = byId('secret-copied');
  try {
    await navigator.clipboard.writeText(input.value);
    say(out, t('keys.copied'));
  } catch {
    input.select();
    say(out, t(document.execCommand('copy') ? 'keys.copied' : 'keys.copyByHand'));
  }
}

function when(s) {
  const d = new Date(s);
  return Number.isNaN(d.getTime()) ? String(s)
    : d.toLocaleString(lang(), { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}

function describe(e) {
  return e instanceof ApiError ? `${e.code}: ${e.message}` : e.message;
}
