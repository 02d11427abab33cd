// The AI SDK (ai) with @ai-sdk/openai (Responses, its default) and @ai-sdk/anthropic against
// the gateway: generateText and streamText, plain and with a tool, a base URL without /v1,
// and the errors a call ends with after the SDK's own retries.
import { generateText, stepCountIs, streamText, tool } from 'ai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { z } from 'zod';
import { apiKey, check, checkHeaders, gatewayURL, toolDescription, toolMarker, toolName, toolTask } from './lib.mjs';

const providers = {
  openai: (name, opts = {}) => createOpenAI({ baseURL: gatewayURL + '/v1', apiKey, headers: checkHeaders(name), ...opts }),
  anthropic: (name, opts = {}) => createAnthropic({ baseURL: gatewayURL + '/v1', apiKey, headers: checkHeaders(name), ...opts }),
};
// native: the provider's own format relayed; translated: a Chat Completions backend.
const models = {
  openai: { native: 'oai/fake-model', translated: 'chat/fake-model', broken: 'oai/broken' },
  anthropic: { native: 'ant/fake-model', translated: 'chat/fake-model', broken: 'ant/broken' },
};

function tools(calls) {
  return {
    [toolName]: tool({
      description: toolDescription, inputSchema: z.object({ cmd: z.string() }),
      execute: async ({ cmd }) => { calls.push(cmd); return toolMarker; },
    }),
  };
}

for (const [p, make] of Object.entries(providers)) {
  for (const route of ['native', 'translated']) {
    const model = models[p][route];
    await check(`aisdk/${p}/generateText/${route}`, async (name) => {
      const res = await generateText({ model: make(name)(model), maxOutputTokens: 256, prompt: 'Say hello.' });
      return { text: res.text, finish_reason: res.finishReason, usage: res.usage };
    });

    await check(`aisdk/${p}/generateText.tool/${route}`, async (name) => {
      const calls = [];
      const res = await generateText({ model: make(name)(model), maxOutputTokens: 256, prompt: toolTask, tools: tools(calls), stopWhen: stepCountIs(3) });
      return { text: res.text, tool_calls: calls, steps: res.steps.length, finish_reason: res.finishReason };
    });

    await check(`aisdk/${p}/streamText.tool/${route}`, async (name) => {
      const calls = [];
      const errors = [];
      const res = streamText({
        model: make(name)(model), maxOutputTokens: 256, prompt: toolTask, tools: tools(calls), stopWhen: stepCountIs(3),
        onError: ({ error }) => errors.push(String(error?.message ?? error)),
      });
      let deltas = 0;
      for await (const _ of res.textStream) deltas++;
      return { text: await res.text, tool_calls: calls, deltas, steps: (await res.steps).length, errors };
    });
  }
}

// A base URL without /v1: the anthropic provider posts /messages, the openai one /responses.
for (const p of Object.keys(providers)) {
  await check(`aisdk/${p}/wrong-base-url`, async (name) => {
    await generateText({ model: providers[p](name, { baseURL: gatewayURL })(models[p].native), maxOutputTokens: 256, prompt: 'Say hello.', maxRetries: 0 });
    return {};
  });
}

// The failures a user meets, each with the SDK's default retries (2), all together.
await Promise.all(Object.entries(providers).flatMap(([p, make]) => [
  check(`aisdk/${p}/401`, async (name) => {
    await generateText({ model: make(name, { apiKey: 'wrong-key' })(models[p].native), maxOutputTokens: 256, prompt: 'Say hello.' });
    return {};
  }),
  check(`aisdk/${p}/429`, async (name) => {
    await generateText({ model: make(name)('busy/fake-model'), maxOutputTokens: 256, prompt: 'Say hello.' });
    return {};
  }),
  check(`aisdk/${p}/5xx`, async (name) => {
    await generateText({ model: make(name)(models[p].broken), maxOutputTokens: 256, prompt: 'Say hello.' });
    return {};
  }),
]));
