// @openai/agents against the gateway: an agent with one tool, on the Chat Completions model and
// on the Responses model, run whole and streamed, and the errors a run ends with.
import OpenAI from 'openai';
import { Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, run, setTracingDisabled, tool } from '@openai/agents';
import { z } from 'zod';
import { apiKey, check, checkHeaders, gatewayURL, toolDescription, toolMarker, toolName, toolTask } from './lib.mjs';

setTracingDisabled(true); // the default exporter would send traces to api.openai.com

function client(name, opts = {}) {
  return new OpenAI({ baseURL: gatewayURL + '/v1', apiKey, defaultHeaders: checkHeaders(name), timeout: 20_000, ...opts });
}

const apis = {
  chat: (c, model) => new OpenAIChatCompletionsModel(c, model),
  responses: (c, model) => new OpenAIResponsesModel(c, model),
};
const models = { native: 'oai/fake-model', translated: 'chat/fake-model' };

// agent is an agent with the one tool; calls counts what the tool was asked.
function agent(model) {
  const calls = [];
  const execTool = tool({
    name: toolName, description: toolDescription,
    parameters: z.object({ cmd: z.string() }),
    execute: async ({ cmd }) => { calls.push(cmd); return toolMarker; },
  });
  return { calls, agent: new Agent({ name: 'conformance', instructions: 'Use the tool when asked.', model, tools: [execTool] }) };
}

for (const [api, make] of Object.entries(apis)) {
  for (const [route, model] of Object.entries(models)) {
    await check(`agents/${api}/tool/${route}`, async (name) => {
      const a = agent(make(client(name), model));
      const result = await run(a.agent, toolTask);
      return { final: result.finalOutput, tool_calls: a.calls };
    });
  }

  await check(`agents/${api}/tool.stream`, async (name) => {
    const a = agent(make(client(name), models.translated));
    const result = await run(a.agent, toolTask, { stream: true });
    let events = 0;
    for await (const _ of result) events++;
    await result.completed;
    return { final: result.finalOutput, tool_calls: a.calls, events };
  });

  // The failures a run meets, with the client's default retries (2), together.
  await Promise.all([
    check(`agents/${api}/401`, async (name) => {
      await run(agent(make(client(name, { apiKey: 'wrong-key' }), models.native)).agent, 'Say hello.');
      return {};
    }),
    check(`agents/${api}/429`, async (name) => {
      await run(agent(make(client(name), 'busy/fake-model')).agent, 'Say hello.');
      return {};
    }),
    check(`agents/${api}/5xx`, async (name) => {
      await run(agent(make(client(name), 'oai/broken')).agent, 'Say hello.');
      return {};
    }),
  ]);
}
