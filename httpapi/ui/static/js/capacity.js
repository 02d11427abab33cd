// overflow finds what a parallel send would queue before it is sent (SPEC §14): a provider
// picked more times than its lanes, or one model more times than its model lanes. The lanes
// come from the spec cards of /v1/models. It returns one entry per scope that overflows:
// {scope: 'provider'|'model', name, picked, lanes, extra}, providers first, in pick order.
export function overflow(picks, specOf) {
  const providers = new Map(); // name → {picked, lanes}
  const models = new Map(); // id → {picked, lanes}
  for (const id of picks) {
    const spec = specOf(id);
    if (!spec) continue;
    const p = providers.get(spec.provider) ?? { picked: 0, lanes: spec.lanes };
    p.picked++;
    providers.set(spec.provider, p);
    const m = models.get(id) ?? { picked: 0, lanes: spec.model_lanes };
    m.picked++;
    models.set(id, m);
  }
  const out = [];
  for (const [scope, counts] of [['provider', providers], ['model', models]]) {
    for (const [name, { picked, lanes }] of counts) {
      if (lanes > 0 && picked > lanes) out.push({ scope, name, picked, lanes, extra: picked - lanes });
    }
  }
  return out;
}
