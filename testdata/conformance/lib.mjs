// What every conformance script shares: the gateway's address, the check runner and how an
// error is described. cmd/tollgate/conformance_test.go runs each script with node, reads one
// JSON line per check from stdout and asserts on it; the scripts only call and observe.

export const gatewayURL = mustEnv('TOLLGATE_URL');
export const apiKey = mustEnv('TOLLGATE_KEY');

// The tool every tool check offers: fakellm's tool-call mode asks for exec_command with
// {"cmd": "echo tollgate-tool-ok"}, then answers "The command printed tollgate-tool-ok."
// once the tool's output came back. The scripts never run a command: they answer the marker.
export const toolName = 'exec_command';
export const toolDescription = 'Runs a shell command and returns what it printed.';
export const toolMarker = 'tollgate-tool-ok';
export const toolSchema = {
  type: 'object',
  properties: { cmd: { type: 'string', description: 'The command line.' } },
  required: ['cmd'],
  additionalProperties: false,
};
export const toolTask = 'Run the check command and tell me what it printed.';

function mustEnv(name) {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set: run this script through cmd/tollgate/conformance_test.go`);
  }
  return v;
}

// checkHeaders names the check on every request it makes, so the test's tap in front of the
// gateway can count the check's attempts and time them.
export function checkHeaders(name) {
  return { 'x-conformance-check': name };
}

// check runs one check and prints its observation, or the error it threw, as one JSON line.
export async function check(name, fn) {
  const started = Date.now();
  let line;
  try {
    line = { check: name, ...(await fn(name)) };
  } catch (err) {
    line = { check: name, error: describeError(err) };
  }
  line.ms = Date.now() - started;
  process.stdout.write(JSON.stringify(line) + '\n');
}

// describeError is what a user of the client sees of an error: its class, status, message,
// the codes it carries and the headers the clients act on, whatever client threw it.
export function describeError(err, depth = 0) {
  if (err === null || typeof err !== 'object') {
    return { class: typeof err, message: String(err) };
  }
  const d = {
    class: err.constructor?.name ?? null,
    name: err.name ?? null,
    message: String(err.message ?? ''),
    status: err.status ?? err.statusCode ?? null,
    code: typeof err.code === 'string' ? err.code : null,
    type: typeof err.type === 'string' ? err.type : null,
    requestID: err.requestID ?? null,
    shouldRetry: header(err, 'x-should-retry'),
    retryAfterMs: header(err, 'retry-after-ms'),
    headerRequestID: header(err, 'request-id'),
    headerXRequestID: header(err, 'x-request-id'),
    body: err.error ?? err.data ?? null, // Stainless SDKs: parsed body; AI SDK: parsed data
    responseBody: typeof err.responseBody === 'string' ? err.responseBody.slice(0, 2000) : null,
    reason: err.reason ?? null, // AI SDK RetryError: maxRetriesExceeded, errorNotRetryable
    attempts: Array.isArray(err.errors) ? err.errors.length : null,
  };
  if (depth < 2) {
    if (err.lastError) d.lastError = describeError(err.lastError, depth + 1);
    if (err.cause && typeof err.cause === 'object') d.cause = describeError(err.cause, depth + 1);
    if (err.error instanceof Error) d.inner = describeError(err.error, depth + 1);
  }
  return d;
}

function header(err, name) {
  for (const h of [err.headers, err.responseHeaders, err.response?.headers]) {
    if (!h) continue;
    if (typeof h.get === 'function') {
      const v = h.get(name);
      if (v != null) return v;
      continue;
    }
    for (const [k, v] of Object.entries(h)) {
      if (k.toLowerCase() === name) return String(v);
    }
  }
  return null;
}
