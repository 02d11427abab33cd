// The console's automatic retry (SPEC §14): only the two answers that say the gateway is full
// right now, at most twice, after max(1.5 s, Retry-After) and then max(3 s, Retry-After), each
// plus a random extra of up to 20% so that cards refused together do not come back together.
// Everything else is shown as it is: waiting does not fix it, or the gateway already waited.

export const retryable = new Set(['provider_queue_full', 'gateway_overloaded']);
export const maxRetries = 2;
const floors = [1500, 3000];

// shouldRetry reports whether an answer with code may be retried after `made` retries.
export function shouldRetry(code, made) {
  return retryable.has(code) && made < maxRetries;
}

// retryDelay is the wait in ms before retry number n (1 or 2), given the gateway's
// Retry-After in ms (0 or null when it gave none) and random() in [0, 1).
export function retryDelay(n, retryAfterMs, random = Math.random) {
  const base = Math.max(floors[Math.min(n, floors.length) - 1], retryAfterMs || 0);
  return base * (1 + 0.2 * random());
}
