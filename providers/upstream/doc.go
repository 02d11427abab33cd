// Package upstream holds what every HTTP adapter needs to call a backend and read its failure
// the same way: the keys to send in turn (KeyRing), a pooled client that never follows
// redirects, its idle pool sized to the provider's lanes and HTTP/2 to TLS backends that offer
// it (NewHTTPClient), one call with a bounded wait for headers (Send) and its failure
// explained (TransportError), the wait a backend advises (RetryHint), what it says of its
// capacity and buckets while refusing (StatedLimit, ParseQuota, Annotate;
// docs/capacity-signals.md), the error kind its status means (KindForStatus), a capped read
// of its error body, a whole answer read without mistaking a cut-off one for complete
// (ReadAnswer, EndError) and scrubbing of keys from anything that may reach a client. Client
// puts these together as the HTTP skeleton of every HTTP adapter (Anthropic, Gemini and the
// OpenAI-compatible ones), which keep only what is the vendor's (Wire, Decoder; the OpenAI
// adapter reads its chat stream with a loop of its own, the relay's hot path). It
// depends on the standard library, providers/llm, providers/sse, providers/wirejson (its one
// JSON reader) and OpenTelemetry's propagation API (a call carries its trace context to the
// backend) only.
package upstream
