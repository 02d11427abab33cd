// @langchain/anthropic's ChatAnthropic against the gateway's Messages route: invoke, stream,
// a bound tool's round trip, and the errors a call ends with after LangChain's own retries.
import { ChatAnthropic } from '@langchain/anthropic';
import { HumanMessage, ToolMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { z } from 'zod';
import { apiKey, check, checkHeaders, gatewayURL, toolDescription, toolMarker, toolName, toolTask } from './lib.mjs';

const models = { native: 'ant/fake-model', translated: 'chat/fake-model' };

function chat(name, opts = {}) {
  return new ChatAnthropic({
    model: models.native, anthropicApiUrl: gatewayURL, apiKey, maxTokens: 256,
    clientOptions: { defaultHeaders: checkHeaders(name) }, ...opts,
  });
}

const execTool = tool(async () => toolMarker, { name: toolName, description: toolDescription, schema: z.object({ cmd: z.string() }) });

for (const [route, model] of Object.entries(models)) {
  await check(`langchain/invoke/${route}`, async (name) => {
    const res = await chat(name, { model }).invoke('Say hello.');
    return { text: res.text, stop_reason: res.response_metadata?.stop_reason ?? null, usage: res.usage_metadata ?? null };
  });

  await check(`langchain/stream/${route}`, async (name) => {
    let text = '';
    let chunks = 0;
    for await (const chunk of await chat(name, { model }).stream('Say hello.')) {
      text += chunk.text;
      chunks++;
    }
    return { text, chunks };
  });

  await check(`langchain/tools/${route}`, async (name) => {
    const llm = chat(name, { model }).bindTools([execTool]);
    const task = new HumanMessage(toolTask);
    const first = await llm.invoke([task]);
    const call = first.tool_calls?.[0] ?? null;
    if (!call) return { call: null, text: first.text };
    const second = await llm.invoke([task, first, new ToolMessage({ tool_call_id: call.id, content: toolMarker })]);
    return { call: { name: call.name, args: call.args }, text: second.text };
  });
}

// LangChain retries on its own (AsyncCaller, 6 retries by default, exponential backoff from
// 1 s with a 1–2× random factor, at least a 429's Retry-After); the SDK under it does not.
// The default is read, not run: six retries take a minute. The failures use maxRetries 1.
await check('langchain/defaults', async () => {
  const llm = chat('langchain/defaults');
  return { max_retries: llm.caller.maxRetries };
});

await Promise.all([
  check('langchain/401', async (name) => {
    await chat(name, { apiKey: 'wrong-key', maxRetries: 1 }).invoke('Say hello.');
    return {};
  }),
  check('langchain/429', async (name) => {
    await chat(name, { model: 'busy/fake-model', maxRetries: 1 }).invoke('Say hello.');
    return {};
  }),
  check('langchain/5xx', async (name) => {
    await chat(name, { model: 'ant/broken', maxRetries: 1 }).invoke('Say hello.');
    return {};
  }),
]);
