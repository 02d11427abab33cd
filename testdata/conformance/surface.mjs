// openai (Node) against the gateway's embeddings and legacy completions (SPEC §19):
// embeddings.create (the SDK asks for base64 and decodes it) and completions.create, whole
// and streamed, for every kind TOLLGATE_SURFACE names, and the 400 a chat model answers.
import OpenAI from 'openai';
import { apiKey, check, checkHeaders, gatewayURL } from './lib.mjs';

const embeddings = (process.env.TOLLGATE_EMBEDDINGS ?? '').split(',').filter(Boolean);
const completions = (process.env.TOLLGATE_COMPLETIONS ?? '').split(',').filter(Boolean);

function client(name) {
  return new OpenAI({ baseURL: gatewayURL + '/v1', apiKey, defaultHeaders: checkHeaders(name), timeout: 20_000, maxRetries: 0 });
}

for (const kind of embeddings) {
  await check(`surface/embeddings/${kind}`, async (name) => {
    const res = await client(name).embeddings.create({ model: `${kind}/embed-model`, input: ['alpha', 'beta', 'alpha'] });
    const v = res.data.map((d) => Array.from(d.embedding));
    return { vectors: v.length, dims: v[0].length, same: JSON.stringify(v[0]) === JSON.stringify(v[2]),
      differ: JSON.stringify(v[0]) !== JSON.stringify(v[1]), object: res.object };
  });
}

for (const kind of completions) {
  await check(`surface/completions/${kind}`, async (name) => {
    const params = { model: `${kind}/fake-model`, prompt: 'def add(a, b):\n    ', suffix: '\n', max_tokens: 64 };
    const whole = await client(name).completions.create(params);
    const stream = await client(name).completions.create({ ...params, stream: true });
    let text = '';
    for await (const chunk of stream) {
      for (const c of chunk.choices) text += c.text;
    }
    return { whole: whole.choices[0].text, finish_reason: whole.choices[0].finish_reason, streamed: text };
  });
}

await check('surface/embeddings/chat-model', async (name) => {
  await client(name).embeddings.create({ model: 'openai/fake-model', input: 'x' });
  return { error: null };
});
