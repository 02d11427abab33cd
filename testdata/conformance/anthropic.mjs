// @anthropic-ai/sdk against the gateway's Messages routes: create, the stream helpers, a tool
// round trip, count_tokens, models.list, the request ids, and the errors a user meets.
import Anthropic from '@anthropic-ai/sdk';
import { apiKey, check, checkHeaders, gatewayURL, toolDescription, toolMarker, toolName, toolSchema, toolTask } from './lib.mjs';

const models = { native: 'ant/fake-model', translated: 'chat/fake-model' };

function client(name, opts = {}) {
  return new Anthropic({ baseURL: gatewayURL, apiKey, defaultHeaders: checkHeaders(name), timeout: 20_000, ...opts });
}

const hello = [{ role: 'user', content: 'Say hello.' }];
const tools = [{ name: toolName, description: toolDescription, input_schema: toolSchema }];

function textOf(msg) {
  return msg.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
}

for (const [route, model] of Object.entries(models)) {
  await check(`anthropic/messages.create/${route}`, async (name) => {
    const { data: msg, response, request_id } = await client(name).messages.create({ model, max_tokens: 256, messages: hello }).withResponse();
    return {
      text: textOf(msg), type: msg.type, role: msg.role, stop_reason: msg.stop_reason, id: msg.id,
      usage: msg.usage, request_id: msg._request_id ?? null, with_response_request_id: request_id ?? null,
      header_request_id: response.headers.get('request-id'), header_x_request_id: response.headers.get('x-request-id'),
    };
  });

  await check(`anthropic/messages.stream/${route}`, async (name) => {
    const stream = client(name).messages.stream({ model, max_tokens: 256, messages: hello });
    const deltas = [];
    stream.on('text', (t) => deltas.push(t));
    const msg = await stream.finalMessage();
    return {
      text: textOf(msg), deltas: deltas.length, streamed: deltas.join(''), stop_reason: msg.stop_reason,
      request_id: stream.request_id ?? null, usage: msg.usage,
    };
  });

  await check(`anthropic/tools/${route}`, async (name) => {
    const c = client(name);
    const first = await c.messages.create({ model, max_tokens: 256, tools, messages: [{ role: 'user', content: toolTask }] });
    const use = first.content.find((b) => b.type === 'tool_use');
    if (!use) return { stop_reason: first.stop_reason, text: textOf(first), tool_use: null };
    const second = await c.messages.create({
      model, max_tokens: 256, tools,
      messages: [
        { role: 'user', content: toolTask },
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: toolMarker }] },
      ],
    });
    return { stop_reason: first.stop_reason, tool_use: { name: use.name, input: use.input, id: use.id }, text: textOf(second), final_stop_reason: second.stop_reason };
  });

  await check(`anthropic/stream.tools/${route}`, async (name) => {
    const stream = client(name).messages.stream({ model, max_tokens: 256, tools, messages: [{ role: 'user', content: toolTask }] });
    let inputJSON = '';
    stream.on('inputJson', (partial) => { inputJSON += partial; });
    const msg = await stream.finalMessage();
    const use = msg.content.find((b) => b.type === 'tool_use');
    return { stop_reason: msg.stop_reason, tool_use: use ? { name: use.name, input: use.input } : null, input_json: inputJSON };
  });
}

await check('anthropic/count_tokens', async (name) => {
  const { data, response } = await client(name).messages.countTokens({ model: models.native, messages: hello }).withResponse();
  return { input_tokens: data.input_tokens, header_request_id: response.headers.get('request-id') };
});

await check('anthropic/count_tokens/unknown-model', async (name) => {
  const data = await client(name).messages.countTokens({ model: 'nope/x', messages: hello });
  return { input_tokens: data.input_tokens };
});

await check('anthropic/models.list', async (name) => {
  const page = await client(name).models.list();
  const first = page.data[0] ?? null;
  return {
    count: page.data.length, first,
    has_more: page.has_more ?? null, first_id: page.first_id ?? null, last_id: page.last_id ?? null,
  };
});

await check('anthropic/unknown-model', async (name) => {
  await client(name).messages.create({ model: 'nope/x', max_tokens: 16, messages: hello });
  return {};
});

// The failures a user meets, each with the SDK's default retries (2): a wrong gateway key, a
// busy provider (the gateway's own 429) and a backend that fails (the gateway's 502). They
// run together; the tap tells their attempts apart by the check header.
await Promise.all([
  check('anthropic/401', async (name) => {
    await client(name, { apiKey: 'wrong-key' }).messages.create({ model: models.native, max_tokens: 16, messages: hello });
    return {};
  }),
  check('anthropic/429', async (name) => {
    await client(name).messages.create({ model: 'busy/fake-model', max_tokens: 16, messages: hello });
    return {};
  }),
  check('anthropic/5xx', async (name) => {
    await client(name).messages.create({ model: 'ant/broken', max_tokens: 16, messages: hello });
    return {};
  }),
]);
