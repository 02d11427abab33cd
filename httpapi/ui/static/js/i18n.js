// The console's text in English and Korean. The language comes from the browser's preferred
// languages until the reader picks one, which is then remembered (localStorage: it is a
// preference, not a secret).

const en = {
  'skip': 'Skip to content',
  'app.title': 'Tollgate console',
  'nav.label': 'Console',
  'nav.chat': 'Chat',
  'nav.parallel': 'Parallel chat',
  'nav.lanes': 'Lanes',
  'nav.models': 'Models',
  'lang.label': 'Language',

  'key.button': 'Keys',
  'key.title.api': 'API key',
  'key.title.admin': 'Admin key',
  'key.explain.api': 'This gateway needs an API key. The console keeps it for this browser session only and sends it to this gateway alone.',
  'key.explain.admin': 'The lanes dashboard needs an admin key. The console keeps it for this browser session only and sends it to this gateway alone.',
  'key.explain.change': 'Enter the API key this gateway gave you. It is kept for this browser session only.',
  'key.refused': 'The gateway refused that key ({code}).',
  'key.label': 'Key',
  'key.save': 'Use this key',
  'key.cancel': 'Cancel',
  'key.forget': 'Forget keys',
  'key.forgotten': 'Keys forgotten.',

  'seconds': '{n} s',
  'minutes': '{n} min',
  'sample.button': 'Sample prompt',
  'sample.prompt': 'Introduce yourself in one sentence.',
  'options.maxTokens': 'max_tokens',

  'state.queued': 'queued in the gateway',
  'state.generating': 'generating',
  'state.done': 'done',
  'state.truncated': 'done · truncated',
  'state.failed': 'failed',
  'state.stopped': 'stopped',
  'state.busy': 'busy · retrying',

  'card.retryIn': 'retry {n} of {max} in {s}',
  'card.waited': 'started after {s} in the queue',
  'card.truncatedWarning': 'The answer was cut off at max_tokens ({n}). Raise max_tokens to get the rest.',
  'card.reasoning': 'Reasoning',
  'card.stop': 'Stop',
  'card.retry': 'Retry',
  'card.stopLabel': 'Stop {m}',
  'card.retryLabel': 'Retry {m}',
  'card.finish': 'finish: {r}',
  'card.tokens': '{in} in · {out} out tokens',
  'card.noTokens': 'tokens not reported',
  'card.retries.one': 'after {n} retry',
  'card.retries.other': 'after {n} retries',
  'card.copy': '{m} · #{n}',

  'error.network': 'Could not reach the gateway: {m}',
  'error.incomplete': 'The stream ended before the answer was complete.',
  'error.badEvent': 'The gateway sent an event that is not a JSON object.',
  'error.http': 'The gateway answered HTTP {status}.',

  'parallel.models': 'Models',
  'parallel.picked.zero': 'none picked (2–10)',
  'parallel.picked': '{n} picked (2–10)',
  'parallel.clearPicks': 'Clear',
  'parallel.add': 'Add one {m}',
  'parallel.remove': 'Remove one {m}',
  'parallel.prompt': 'Prompt',
  'parallel.placeholder': 'One prompt, sent to every picked model',
  'parallel.send': 'Send to {n} models',
  'parallel.stopAll': 'Stop all',
  'parallel.needModels': 'Pick 2 to 10 models (you picked {n}).',
  'parallel.needPrompt': 'Write a prompt first.',
  'notice.title': 'Some will wait their turn',
  'notice.provider': '{p} runs {lanes} at a time: {n} picked, so {extra} will wait their turn.',
  'notice.model': '{m} runs {lanes} at a time: picked {n} times, so {extra} will wait.',

  'chat.model': 'Model',
  'chat.message': 'Message',
  'chat.placeholder': 'Ask something',
  'chat.send': 'Send',
  'chat.stop': 'Stop',
  'chat.clear': 'New chat',
  'chat.you': 'You',
  'chat.empty': 'Pick a model and say something.',
  'chat.needPrompt': 'Write a message first.',
  'chat.needModel': 'Pick a model first.',

  'lanes.summary': '{r} of {max} running · {q} queued · {a} of {maxA} admitted',
  'lanes.updated': 'updated {t}',
  'lanes.lanes': '{r} of {l} lanes busy',
  'lanes.effective': 'learned: {e} of {l} lanes usable',
  'lanes.queue': 'queue {q} of {len}',
  'lanes.col.model': 'Model',
  'lanes.col.modelLanes': 'Model lanes',
  'lanes.col.running': 'Running',
  'lanes.col.queued': 'Queued',
  'lanes.error': 'Could not read /admin/state: {m}',
  'lanes.empty': 'No providers configured.',

  'models.filter': 'Filter models',
  'models.loadError': 'Could not load /v1/models: {m}',
  'models.none': 'The gateway serves no models.',
  'models.test': 'Test model',
  'models.testLabel': 'Test {m}',
  'models.testing': 'testing…',
  'models.testOk': 'answered in {s}',
  'models.testFailed': 'failed',
  'spec.provider': 'Provider',
  'spec.kind': 'Kind',
  'spec.context_window': 'Context window',
  'spec.max_output_tokens': 'Max output tokens',
  'spec.reasoning': 'Reasoning',
  'spec.tools': 'Tools',
  'spec.vision': 'Vision',
  'spec.lanes': 'Lanes',
  'spec.model_lanes': 'Model lanes',
  'spec.run_timeout_ms': 'Run timeout',
  'spec.priority_default': 'Default priority',
  'spec.fallbacks': 'Fallbacks',
  'value.yes': 'yes',
  'value.no': 'no',
  'value.unknown': 'unknown',
  'value.none': 'none',
};

const ko = {
  'skip': '본문으로 건너뛰기',
  'app.title': 'Tollgate 콘솔',
  'nav.label': '콘솔',
  'nav.chat': '채팅',
  'nav.parallel': '병렬 채팅',
  'nav.lanes': '레인',
  'nav.models': '모델',
  'lang.label': '언어',

  'key.button': '키',
  'key.title.api': 'API 키',
  'key.title.admin': '관리자 키',
  'key.explain.api': '이 게이트웨이는 API 키가 필요합니다. 콘솔은 키를 이 브라우저 세션에만 보관하고 이 게이트웨이에만 보냅니다.',
  'key.explain.admin': '레인 대시보드에는 관리자 키가 필요합니다. 콘솔은 키를 이 브라우저 세션에만 보관하고 이 게이트웨이에만 보냅니다.',
  'key.explain.change': '이 게이트웨이에서 받은 API 키를 입력하세요. 이 브라우저 세션에만 보관됩니다.',
  'key.refused': '게이트웨이가 이 키를 거부했습니다 ({code}).',
  'key.label': '키',
  'key.save': '이 키 사용',
  'key.cancel': '취소',
  'key.forget': '키 지우기',
  'key.forgotten': '키를 지웠습니다.',

  'seconds': '{n}초',
  'minutes': '{n}분',
  'sample.button': '예시 프롬프트',
  'sample.prompt': '한 문장으로 자기소개를 해 주세요.',
  'options.maxTokens': '최대 토큰 (max_tokens)',

  'state.queued': '게이트웨이 대기열에서 대기 중',
  'state.generating': '생성 중',
  'state.done': '완료',
  'state.truncated': '완료 · 잘림',
  'state.failed': '실패',
  'state.stopped': '중지됨',
  'state.busy': '혼잡 · 재시도 중',

  'card.retryIn': '{s} 후 재시도 ({n}/{max})',
  'card.waited': '대기열에서 {s} 기다린 뒤 시작됨',
  'card.truncatedWarning': '답변이 max_tokens({n})에서 잘렸습니다. 나머지를 받으려면 max_tokens를 늘리세요.',
  'card.reasoning': '추론 과정',
  'card.stop': '중지',
  'card.retry': '다시 시도',
  'card.stopLabel': '{m} 중지',
  'card.retryLabel': '{m} 다시 시도',
  'card.finish': '종료 사유: {r}',
  'card.tokens': '토큰 입력 {in} · 출력 {out}',
  'card.noTokens': '토큰 정보 없음',
  'card.retries.one': '{n}회 재시도 후',
  'card.retries.other': '{n}회 재시도 후',
  'card.copy': '{m} · #{n}',

  'error.network': '게이트웨이에 연결할 수 없습니다: {m}',
  'error.incomplete': '답변이 끝나기 전에 스트림이 끊어졌습니다.',
  'error.badEvent': '게이트웨이가 JSON 객체가 아닌 이벤트를 보냈습니다.',
  'error.http': '게이트웨이가 HTTP {status}로 응답했습니다.',

  'parallel.models': '모델',
  'parallel.picked.zero': '선택 없음 (2–10개)',
  'parallel.picked': '{n}개 선택됨 (2–10개)',
  'parallel.clearPicks': '선택 해제',
  'parallel.add': '{m} 하나 추가',
  'parallel.remove': '{m} 하나 빼기',
  'parallel.prompt': '프롬프트',
  'parallel.placeholder': '선택한 모든 모델에 보낼 프롬프트',
  'parallel.send': '{n}개 모델에 보내기',
  'parallel.stopAll': '모두 중지',
  'parallel.needModels': '모델을 2–10개 선택하세요 (지금 {n}개).',
  'parallel.needPrompt': '먼저 프롬프트를 입력하세요.',
  'notice.title': '일부는 차례를 기다립니다',
  'notice.provider': '{p}은(는) 한 번에 {lanes}개만 실행합니다. {n}개를 골랐으므로 {extra}개는 차례를 기다립니다.',
  'notice.model': '{m}은(는) 한 번에 {lanes}개만 실행합니다. {n}번 골랐으므로 {extra}개는 기다립니다.',

  'chat.model': '모델',
  'chat.message': '메시지',
  'chat.placeholder': '무엇이든 물어보세요',
  'chat.send': '보내기',
  'chat.stop': '중지',
  'chat.clear': '새 대화',
  'chat.you': '나',
  'chat.empty': '모델을 고르고 메시지를 보내 보세요.',
  'chat.needPrompt': '먼저 메시지를 입력하세요.',
  'chat.needModel': '먼저 모델을 고르세요.',

  'lanes.summary': '실행 중 {r}/{max} · 대기 {q} · 수용 {a}/{maxA}',
  'lanes.updated': '{t} 갱신',
  'lanes.lanes': '레인 {l}개 중 {r}개 사용 중',
  'lanes.effective': '학습된 값: 레인 {l}개 중 {e}개 사용 가능',
  'lanes.queue': '대기열 {q}/{len}',
  'lanes.col.model': '모델',
  'lanes.col.modelLanes': '모델 레인',
  'lanes.col.running': '실행 중',
  'lanes.col.queued': '대기 중',
  'lanes.error': '/admin/state를 읽을 수 없습니다: {m}',
  'lanes.empty': '설정된 프로바이더가 없습니다.',

  'models.filter': '모델 검색',
  'models.loadError': '/v1/models를 불러올 수 없습니다: {m}',
  'models.none': '이 게이트웨이가 제공하는 모델이 없습니다.',
  'models.test': '모델 테스트',
  'models.testLabel': '{m} 테스트',
  'models.testing': '테스트 중…',
  'models.testOk': '{s} 만에 응답',
  'models.testFailed': '실패',
  'spec.provider': '프로바이더',
  'spec.kind': '종류',
  'spec.context_window': '컨텍스트 길이',
  'spec.max_output_tokens': '최대 출력 토큰',
  'spec.reasoning': '추론',
  'spec.tools': '도구 호출',
  'spec.vision': '비전',
  'spec.lanes': '레인',
  'spec.model_lanes': '모델 레인',
  'spec.run_timeout_ms': '실행 제한 시간',
  'spec.priority_default': '기본 우선순위',
  'spec.fallbacks': '대체 모델',
  'value.yes': '예',
  'value.no': '아니요',
  'value.unknown': '알 수 없음',
  'value.none': '없음',
};

export const dictionaries = { en, ko };
export const languages = Object.keys(dictionaries);

const storageKey = 'tollgate.lang';
const listeners = new Set();
let current = pick();

// pick chooses the remembered language, else the first of the browser's languages we have.
function pick() {
  let saved = null;
  try { saved = localStorage.getItem(storageKey); } catch { /* storage disabled */ }
  if (saved && dictionaries[saved]) return saved;
  for (const tag of navigator.languages ?? [navigator.language]) {
    const base = String(tag).toLowerCase().split('-')[0];
    if (dictionaries[base]) return base;
  }
  return 'en';
}

export function lang() { return current; }

// setLang switches the language, remembers it, and tells every listener to redraw.
export function setLang(l) {
  if (!dictionaries[l] || l === current) return;
  current = l;
  try { localStorage.setItem(storageKey, l); } catch { /* storage disabled */ }
  for (const fn of listeners) fn(l);
}

// onLangChange runs fn after every switch; it returns a function that stops that.
export function onLangChange(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

// t returns the text of key in the current language with {name} placeholders filled from vars.
// A key missing from a dictionary is a bug: it is reported on the console (the browser tests
// fail on any console error) and the English text is used.
export function t(key, vars = {}) {
  let s = dictionaries[current][key];
  if (s === undefined) {
    console.error(`i18n: no "${current}" text for ${key}`);
    s = en[key] ?? key;
  }
  return s.replace(/\{(\w+)\}/g, (m, name) => (name in vars ? String(vars[name]) : m));
}

// plural picks key.one or key.other for n by the language's plural rules.
export function plural(key, n, vars = {}) {
  const form = new Intl.PluralRules(current).select(n) === 'one' ? 'one' : 'other';
  return t(`${key}.${form}`, { n, ...vars });
}

// seconds formats a duration in milliseconds as seconds with one decimal ("1.5 s", "1.5초").
export function seconds(ms) {
  const n = new Intl.NumberFormat(current, { minimumFractionDigits: 1, maximumFractionDigits: 1 })
    .format(Math.max(0, ms) / 1000);
  return t('seconds', { n });
}

// integer formats a count with the language's grouping.
export function integer(n) {
  return new Intl.NumberFormat(current).format(n);
}

// translate fills every element under root that names a key: data-i18n (its text),
// data-i18n-placeholder and data-i18n-aria-label (those attributes).
export function translate(root = document) {
  document.documentElement.lang = current;
  for (const el of root.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
  for (const el of root.querySelectorAll('[data-i18n-placeholder]')) el.placeholder = t(el.dataset.i18nPlaceholder);
  for (const el of root.querySelectorAll('[data-i18n-aria-label]')) el.setAttribute('aria-label', t(el.dataset.i18nAriaLabel));
}
