// The console's entry point: language, navigation between the views (by URL hash, so
// each has an address and Back works), and the key dialog shown when the gateway refuses a
// call for its key.

import { byId, say } from './dom.js';
import { t, lang, setLang, translate, onLangChange } from './i18n.js';
import { keys, unauthorizedEvent, models } from './api.js';
import { mountChat } from './chat.js';
import { mountParallel } from './parallel.js';
import { mountLanes } from './lanes.js';
import { mountModels } from './models.js';
import { mountKeys } from './keys.js';
import { mountUsage } from './usage.js';

const views = ['chat', 'parallel', 'lanes', 'models', 'keys', 'usage'];

const chat = mountChat();
const parallel = mountParallel();
const lanes = mountLanes();
const modelCards = mountModels();
const clientKeys = mountKeys();
const usage = mountUsage();
// onDemand are the views that load when they are shown (and again when a key is given).
const onDemand = { keys: clientKeys, usage };
let current = '';

// loadModels (re)reads /v1/models for every view that lists models.
function loadModels(reload = false) {
  if (reload) models({ reload: true }).catch(() => {}); // each view reports its own failure
  return Promise.all([chat.load(), parallel.load(), modelCards.load()]);
}

function route() {
  const want = location.hash.slice(1);
  const was = current;
  current = views.includes(want) ? want : views[0];
  for (const v of views) byId(`view-${v}`).hidden = v !== current;
  for (const a of document.querySelectorAll('nav a[data-view]')) {
    if (a.dataset.view === current) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (current === 'lanes') lanes.show();
  else lanes.hide();
  if (current !== was) onDemand[current]?.show();
  document.title = `${t(`nav.${current}`)} · ${t('app.title')}`;
}

// The key dialog. kind is "api" or "admin"; refused carries the code of a refused key.
const dialog = byId('key-dialog');
const keyInput = byId('key-input');
let asking = null;

function askKey(kind, refused) {
  asking = kind;
  byId('key-title').textContent = t(`key.title.${kind}`);
  byId('key-explain').textContent = t(refused === undefined ? 'key.explain.change' : `key.explain.${kind}`);
  say(byId('key-refused'), refused && keys.get(kind) ? t('key.refused', { code: refused }) : '');
  keyInput.value = '';
  if (!dialog.open) dialog.showModal();
  keyInput.focus();
}

byId('key-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const key = keyInput.value.trim();
  if (!key) return keyInput.focus();
  keys.set(asking, key);
  dialog.close();
  if (asking !== 'admin') loadModels(true);
  // /admin takes the API key too when the gateway has no admin keys.
  lanes.resume();
  onDemand[current]?.resume();
});
byId('key-cancel').addEventListener('click', () => dialog.close());
byId('key-forget').addEventListener('click', () => {
  keys.forget();
  dialog.close();
  say(byId('global-status'), t('key.forgotten'));
});
byId('keys-button').addEventListener('click', () => askKey('api'));

// A refused key asks for one of the same kind: /v1 wants an API key, /admin an admin key
// (which may be the API key when the gateway has no admin keys).
document.addEventListener(unauthorizedEvent, (ev) => askKey(ev.detail.kind, ev.detail.code));

const langSelect = byId('lang');
langSelect.value = lang();
langSelect.addEventListener('change', () => setLang(langSelect.value));
onLangChange(() => {
  langSelect.value = lang();
  translate();
  route();
});

translate();
window.addEventListener('hashchange', route);
route();
loadModels();
