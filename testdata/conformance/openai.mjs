// openai (Node) against the gateway: Chat Completions and Responses, whole and with the
// stream helpers, a tool round trip, a failure in the middle of a stream, the request ids,
// a base URL without /v1, and the errors a user meets.
import OpenAI from 'openai';
import { apiKey, check, checkHeaders, gatewayURL, toolDescription, toolMarker, toolName, toolSchema, toolTask } from './lib.mjs';

// native: relayed to an OpenAI backend; translated: to a Chat Completions backend (Responses
// translated); anthropic: translated to Messages.
const models = { native: 'oai/fake-model', translated: 'chat/fake-model' };

function client(name, opts = {}) {
  return new OpenAI({ baseURL: gatewayURL + '/v1', apiKey, defaultHeaders: checkHeaders(name), timeout: 20_000, ...opts });
}

const hello = [{ role: 'user', content: 'Say hello.' }];
const chatTools = [{ type: 'function', function: { name: toolName, description: toolDescription, parameters: toolSchema } }];
const responsesTools = [{ type: 'function', name: toolName, description: toolDescription, parameters: toolSchema, strict: false }];

for (const [route, model] of Object.entries(models)) {
  await check(`openai/chat/${route}`, async (name) => {
    const res = await client(name).chat.completions.create({ model, messages: hello });
    return { text: res.choices[0].message.content, finish_reason: res.choices[0].finish_reason, object: res.object, request_id: res._request_id ?? null, usage: res.usage };
  });

  await check(`openai/chat.stream/${route}`, async (name) => {
    const stream = client(name).chat.completions.stream({ model, messages: hello, stream_options: { include_usage: true } });
    const deltas = [];
    stream.on('content', (delta) => deltas.push(delta));
    const res = await stream.finalChatCompletion();
    return { text: res.choices[0].message.content, deltas: deltas.length, finish_reason: res.choices[0].finish_reason, usage: res.usage ?? null };
  });

  await check(`openai/responses/${route}`, async (name) => {
    const res = await client(name).responses.create({ model, input: 'Say hello.' });
    const msg = res.output.find((o) => o.type === 'message');
    return {
      text: res.output_text, status: res.status, object: res.object, request_id: res._request_id ?? null,
      message: msg ?? null, usage: res.usage ?? null,
    };
  });

  await check(`openai/responses.stream/${route}`, async (name) => {
    const stream = client(name).responses.stream({ model, input: 'Say hello.' });
    const deltas = [];
    stream.on('response.output_text.delta', (ev) => deltas.push(ev.delta));
    const res = await stream.finalResponse();
    return { text: res.output_text, deltas: deltas.length, streamed: deltas.join(''), status: res.status };
  });

  // A backend that fails after a few deltas: the user gets the failed response (the same
  // response, with what was streamed and the gateway's error), not a broken stream.
  await check(`openai/responses.stream.failure/${route}`, async (name) => {
    const stream = client(name).responses.stream({ model: route === 'native' ? 'oai/quirk-error-midstream' : 'chat/quirk-error-midstream', input: 'Say hello.' });
    return await observeFailure(stream);
  });
}

await check('openai/responses.stream.cut/native', async (name) => {
  const stream = client(name).responses.stream({ model: 'oai/quirk-drop', input: 'Say hello.' });
  return await observeFailure(stream);
});

async function observeFailure(stream) {
  const deltas = [];
  let created = null;
  stream.on('response.created', (ev) => { created = ev.response.id; });
  stream.on('response.output_text.delta', (ev) => deltas.push(ev.delta));
  try {
    const res = await stream.finalResponse();
    return { created_id: created, streamed: deltas.join(''), id: res.id, status: res.status, error: res.error ?? null, output_text: res.output_text };
  } catch (err) {
    return { created_id: created, streamed: deltas.join(''), thrown: { class: err.constructor?.name, message: String(err.message) } };
  }
}

await check('openai/chat.stream.failure', async (name) => {
  const stream = await client(name).chat.completions.create({ model: 'oai/quirk-error-midstream', messages: hello, stream: true });
  let text = '';
  try {
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  } catch (err) {
    return { streamed: text, thrown: { class: err.constructor?.name, message: String(err.message), code: err.code ?? null } };
  }
  return { streamed: text, thrown: null };
});

// Tools, with parallel_tool_calls false: the anthropic route's backend must be told
// disable_parallel_tool_use (the test reads what it was sent).
// Each API has its own anthropic model, so the test can tell their backend requests apart.
const toolModels = {
  native: { chat: models.native, responses: models.native },
  translated: { chat: models.translated, responses: models.translated },
  anthropic: { chat: 'ant/parallel-chat', responses: 'ant/parallel-responses' },
};
for (const [route, byAPI] of Object.entries(toolModels)) {
  await check(`openai/chat.tools/${route}`, async (name) => {
    const model = byAPI.chat;
    const c = client(name);
    const messages = [{ role: 'user', content: toolTask }];
    const first = await c.chat.completions.create({ model, messages, tools: chatTools, parallel_tool_calls: false });
    const call = first.choices[0].message.tool_calls?.[0] ?? null;
    if (!call) return { finish_reason: first.choices[0].finish_reason, call: null };
    messages.push(first.choices[0].message, { role: 'tool', tool_call_id: call.id, content: toolMarker });
    const second = await c.chat.completions.create({ model, messages, tools: chatTools, parallel_tool_calls: false });
    return {
      finish_reason: first.choices[0].finish_reason, call: { name: call.function.name, arguments: JSON.parse(call.function.arguments) },
      text: second.choices[0].message.content,
    };
  });

  await check(`openai/responses.tools/${route}`, async (name) => {
    const model = byAPI.responses;
    const c = client(name);
    const first = await c.responses.create({ model, input: toolTask, tools: responsesTools, parallel_tool_calls: false });
    const call = first.output.find((o) => o.type === 'function_call') ?? null;
    if (!call) return { call: null, text: first.output_text };
    const second = await c.responses.create({
      model, tools: responsesTools, parallel_tool_calls: false,
      input: [{ role: 'user', content: toolTask }, call, { type: 'function_call_output', call_id: call.call_id, output: toolMarker }],
    });
    return { call: { name: call.name, arguments: JSON.parse(call.arguments) }, text: second.output_text };
  });
}

// The list keeps OpenAI's shape for OpenAI's clients (Anthropic's clients get theirs).
await check('openai/models.list', async (name) => {
  const page = await client(name).models.list();
  return { count: page.data.length, first: page.data[0] ?? null };
});

await check('openai/unknown-model', async (name) => {
  await client(name).chat.completions.create({ model: 'nope/x', messages: hello });
  return {};
});

// A base URL without /v1 (a common slip): the SDK posts /chat/completions.
await check('openai/wrong-base-url', async (name) => {
  await client(name, { baseURL: gatewayURL }).chat.completions.create({ model: models.native, messages: hello });
  return {};
});

// The failures a user meets, each with the SDK's default retries (2), together.
await Promise.all([
  check('openai/401', async (name) => {
    await client(name, { apiKey: 'wrong-key' }).chat.completions.create({ model: models.native, messages: hello });
    return {};
  }),
  check('openai/429', async (name) => {
    await client(name).chat.completions.create({ model: 'busy/fake-model', messages: hello });
    return {};
  }),
  check('openai/5xx', async (name) => {
    await client(name).responses.create({ model: 'oai/broken', input: 'Say hello.' });
    return {};
  }),
]);
