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
  'key.explain.admin': 'This page needs an admin key. The console keeps it for this browser session only and sends it to this gateway alone.',
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

  'nav.keys': 'Client keys',
  'nav.usage': 'Usage',

  'keys.intro': 'Who may call this gateway, with their fair share and caps. Keys from the configuration file are changed there.',
  'keys.new': 'New key',
  'keys.error': 'Could not read /admin/keys: {m}',
  'keys.none': 'No client keys yet.',
  'keys.caption': 'Client keys and their limits',
  'keys.col.name': 'Name',
  'keys.col.weight': 'Weight',
  'keys.col.running': 'Running at once',
  'keys.col.queued': 'Waiting at once',
  'keys.col.rate': 'Rate limit',
  'keys.col.models': 'Models',
  'keys.col.priority': 'Highest priority',
  'keys.col.spend': 'Spend this period',
  'keys.col.used': 'Last used',
  'keys.col.actions': 'Actions',
  'keys.source.config': 'config',
  'keys.source.admin': 'admin',
  'keys.source.revoked': 'revoked',
  'keys.noCap': 'no cap',
  'keys.allModels': 'all',
  'keys.rpm': '{n}/min',
  'keys.tpm': '{n} tokens/min',
  'keys.never': 'never',
  'keys.created': 'created {t}',
  'keys.budget': '{s} of {b} {p}',
  'keys.period.day': 'today',
  'keys.period.week': 'this week',
  'keys.period.month': 'this month',
  'keys.inConfig': 'set in the config file',
  'keys.edit': 'Edit',
  'keys.rotate': 'Rotate',
  'keys.revoke': 'Revoke',
  'keys.editLabel': 'Edit the limits of {k}',
  'keys.rotateLabel': 'Rotate the secret of {k}',
  'keys.revokeLabel': 'Revoke {k}',
  'keys.newTitle': 'New client key',
  'keys.editTitle': 'Limits of {k}',
  'keys.createButton': 'Create key',
  'keys.save': 'Save limits',
  'keys.saved': 'Saved the limits of {k}; calls that enter from now on get them.',
  'keys.formHint': "Leave a field empty for no cap of the key's own; the provider's and the gateway's still hold.",
  'keys.modelsHint': 'Patterns, separated by spaces; empty allows every model.',
  'keys.field.name': 'Name',
  'keys.field.weight': 'Weight (fair share)',
  'keys.field.max_running': 'Running at once',
  'keys.field.max_queued': 'Waiting at once',
  'keys.field.rl.rpm': 'Requests per minute',
  'keys.field.rl.tpm': 'Tokens per minute',
  'keys.field.models': 'Models allowed',
  'keys.field.max_priority': 'Highest priority',
  'keys.field.budget.usd': 'Budget (USD)',
  'keys.field.budget.period': 'Budget period',
  'keys.per.day': 'a day',
  'keys.per.week': 'a week',
  'keys.per.month': 'a month',
  'keys.badField': '{f}: enter a whole number of 0 or more (a weight of 1 or more; a budget may have cents).',
  'keys.needName': 'Give the key a name.',
  'keys.createdTitle': 'Key {k} created',
  'keys.rotatedTitle': 'New secret for {k}',
  'keys.once': 'Copy this secret now: you will not see it again. The gateway keeps only its digest and cannot show it later.',
  'keys.secret': 'Secret',
  'keys.copy': 'Copy',
  'keys.copied': 'Copied to the clipboard.',
  'keys.copyByHand': 'The browser would not copy it: select the secret and copy it yourself.',
  'keys.done': 'I have copied it',
  'keys.rotateTitle': 'Rotate the secret of {k}?',
  'keys.rotateText': 'A new secret is made and shown once. Programs using the old one must be given the new one.',
  'keys.grace': 'The old secret keeps working for',
  'keys.grace.none': 'no time: it stops now',
  'keys.grace.10m': '10 minutes',
  'keys.grace.1h': '1 hour',
  'keys.grace.24h': '24 hours',
  'keys.revokeTitle': 'Revoke {k}?',
  'keys.revokeText': "{k} stops working at once: its calls waiting in a queue are answered 401 now, calls already running finish. This cannot be undone; its usage stays in the ledger.",
  'keys.revoked': 'Revoked {k}.',

  'usage.period': 'Period',
  'usage.period.7d': 'Last 7 days',
  'usage.period.30d': 'Last 30 days',
  'usage.period.90d': 'Last 90 days',
  'usage.period.month': 'This month',
  'usage.period.lastmonth': 'Last month',
  'usage.period.custom': 'Choose dates',
  'usage.from': 'From',
  'usage.to': 'To',
  'usage.show': 'Show',
  'usage.metric.spend': 'Spend',
  'usage.metric.tokens': 'Tokens',
  'usage.metric.requests': 'Requests',
  'usage.refresh': 'Refresh',
  'usage.csv': 'Download CSV',
  'usage.error': 'Could not read /admin/usage: {m}',
  'usage.badDates': 'Choose a first day on or before the last day.',
  'usage.empty': 'No calls were recorded in this period.',
  'usage.note': 'Days are UTC, as budgets are. Tokens are input plus output.',
  'usage.total.spend': 'Spend',
  'usage.total.requests': 'Requests',
  'usage.total.tokensIn': 'Tokens in',
  'usage.total.tokensOut': 'Tokens out',
  'usage.total.errors': 'Errors',
  'usage.chart.key.spend': 'Spend per key, by day',
  'usage.chart.key.tokens': 'Tokens per key, by day',
  'usage.chart.key.requests': 'Requests per key, by day',
  'usage.chart.model.spend': 'Spend per model, by day',
  'usage.chart.model.tokens': 'Tokens per model, by day',
  'usage.chart.model.requests': 'Requests per model, by day',
  'usage.chart.top.spend': 'Top keys by spend',
  'usage.chart.top.tokens': 'Top keys by tokens',
  'usage.chart.top.requests': 'Top keys by requests',
  'usage.others': 'others',
  'usage.share': '{k}: {v}, {p} of the period',
  'usage.asTable': 'Show as a table',
  'usage.col.day': 'Day (UTC)',
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
  'key.explain.admin': '이 페이지에는 관리자 키가 필요합니다. 콘솔은 키를 이 브라우저 세션에만 보관하고 이 게이트웨이에만 보냅니다.',
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

  'nav.keys': '클라이언트 키',
  'nav.usage': '사용량',

  'keys.intro': '이 게이트웨이를 호출할 수 있는 키와 각 키의 공정 몫, 한도입니다. 설정 파일의 키는 설정 파일에서 바꿉니다.',
  'keys.new': '새 키',
  'keys.error': '/admin/keys를 읽을 수 없습니다: {m}',
  'keys.none': '아직 클라이언트 키가 없습니다.',
  'keys.caption': '클라이언트 키와 한도',
  'keys.col.name': '이름',
  'keys.col.weight': '가중치',
  'keys.col.running': '동시 실행',
  'keys.col.queued': '동시 대기',
  'keys.col.rate': '속도 제한',
  'keys.col.models': '모델',
  'keys.col.priority': '최고 우선순위',
  'keys.col.spend': '이번 기간 지출',
  'keys.col.used': '마지막 사용',
  'keys.col.actions': '작업',
  'keys.source.config': '설정',
  'keys.source.admin': '관리자',
  'keys.source.revoked': '폐기됨',
  'keys.noCap': '제한 없음',
  'keys.allModels': '전체',
  'keys.rpm': '분당 {n}회',
  'keys.tpm': '분당 {n} 토큰',
  'keys.never': '사용 안 함',
  'keys.created': '{t} 생성',
  'keys.budget': '{p} {b} 중 {s}',
  'keys.period.day': '오늘',
  'keys.period.week': '이번 주',
  'keys.period.month': '이번 달',
  'keys.inConfig': '설정 파일에서 지정',
  'keys.edit': '편집',
  'keys.rotate': '교체',
  'keys.revoke': '폐기',
  'keys.editLabel': '{k}의 한도 편집',
  'keys.rotateLabel': '{k}의 비밀 키 교체',
  'keys.revokeLabel': '{k} 폐기',
  'keys.newTitle': '새 클라이언트 키',
  'keys.editTitle': '{k}의 한도',
  'keys.createButton': '키 만들기',
  'keys.save': '한도 저장',
  'keys.saved': '{k}의 한도를 저장했습니다. 지금부터 들어오는 호출에 적용됩니다.',
  'keys.formHint': '비워 둔 항목은 이 키만의 제한이 없습니다. 프로바이더와 게이트웨이의 제한은 그대로 적용됩니다.',
  'keys.modelsHint': '패턴을 공백으로 구분해 입력하세요. 비워 두면 모든 모델을 쓸 수 있습니다.',
  'keys.field.name': '이름',
  'keys.field.weight': '가중치 (공정 몫)',
  'keys.field.max_running': '동시 실행',
  'keys.field.max_queued': '동시 대기',
  'keys.field.rl.rpm': '분당 요청 수',
  'keys.field.rl.tpm': '분당 토큰 수',
  'keys.field.models': '허용 모델',
  'keys.field.max_priority': '최고 우선순위',
  'keys.field.budget.usd': '예산 (USD)',
  'keys.field.budget.period': '예산 기간',
  'keys.per.day': '하루',
  'keys.per.week': '한 주',
  'keys.per.month': '한 달',
  'keys.badField': '{f}: 0 이상의 정수를 입력하세요 (가중치는 1 이상, 예산은 센트 단위까지 가능).',
  'keys.needName': '키 이름을 입력하세요.',
  'keys.createdTitle': '키를 만들었습니다: {k}',
  'keys.rotatedTitle': '{k}의 새 비밀 키',
  'keys.once': '지금 이 비밀 키를 복사하세요. 다시는 볼 수 없습니다. 게이트웨이는 다이제스트만 보관하므로 나중에 보여 줄 수 없습니다.',
  'keys.secret': '비밀 키',
  'keys.copy': '복사',
  'keys.copied': '클립보드에 복사했습니다.',
  'keys.copyByHand': '브라우저가 복사하지 못했습니다. 비밀 키를 선택해 직접 복사하세요.',
  'keys.done': '복사했습니다',
  'keys.rotateTitle': '{k}의 비밀 키를 교체할까요?',
  'keys.rotateText': '새 비밀 키를 만들어 한 번만 보여 줍니다. 이전 키를 쓰는 프로그램에는 새 키를 알려 주어야 합니다.',
  'keys.grace': '이전 비밀 키를 계속 쓸 수 있는 시간',
  'keys.grace.none': '없음: 지금 중지',
  'keys.grace.10m': '10분',
  'keys.grace.1h': '1시간',
  'keys.grace.24h': '24시간',
  'keys.revokeTitle': '{k} 키를 폐기할까요?',
  'keys.revokeText': '{k} 키는 즉시 쓸 수 없게 됩니다. 대기열에서 기다리는 호출은 지금 401로 응답하고, 이미 실행 중인 호출은 끝까지 진행됩니다. 되돌릴 수 없으며 사용 기록은 장부에 남습니다.',
  'keys.revoked': '{k} 키를 폐기했습니다.',

  'usage.period': '기간',
  'usage.period.7d': '최근 7일',
  'usage.period.30d': '최근 30일',
  'usage.period.90d': '최근 90일',
  'usage.period.month': '이번 달',
  'usage.period.lastmonth': '지난달',
  'usage.period.custom': '날짜 선택',
  'usage.from': '시작',
  'usage.to': '끝',
  'usage.show': '표시',
  'usage.metric.spend': '지출',
  'usage.metric.tokens': '토큰',
  'usage.metric.requests': '요청',
  'usage.refresh': '새로 고침',
  'usage.csv': 'CSV 내려받기',
  'usage.error': '/admin/usage를 읽을 수 없습니다: {m}',
  'usage.badDates': '시작일을 종료일과 같거나 그 이전으로 고르세요.',
  'usage.empty': '이 기간에 기록된 호출이 없습니다.',
  'usage.note': '날짜는 예산과 같이 UTC 기준입니다. 토큰은 입력과 출력의 합입니다.',
  'usage.total.spend': '지출',
  'usage.total.requests': '요청',
  'usage.total.tokensIn': '입력 토큰',
  'usage.total.tokensOut': '출력 토큰',
  'usage.total.errors': '오류',
  'usage.chart.key.spend': '키별 일일 지출',
  'usage.chart.key.tokens': '키별 일일 토큰',
  'usage.chart.key.requests': '키별 일일 요청',
  'usage.chart.model.spend': '모델별 일일 지출',
  'usage.chart.model.tokens': '모델별 일일 토큰',
  'usage.chart.model.requests': '모델별 일일 요청',
  'usage.chart.top.spend': '지출 상위 키',
  'usage.chart.top.tokens': '토큰 상위 키',
  'usage.chart.top.requests': '요청 상위 키',
  'usage.others': '기타',
  'usage.share': '{k}: {v}, 기간 전체의 {p}',
  'usage.asTable': '표로 보기',
  'usage.col.day': '날짜 (UTC)',
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

// usd formats an amount in US dollars: cents from $1 up, three significant digits below (the
// cost of a few calls is often a fraction of a cent).
export function usd(v) {
  const small = v !== 0 && Math.abs(v) < 1;
  return new Intl.NumberFormat(current, small ? { style: 'currency', currency: 'USD', maximumSignificantDigits: 3 }
    : { style: 'currency', currency: 'USD', maximumFractionDigits: 2 }).format(v);
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
