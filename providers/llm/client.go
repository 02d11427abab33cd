package llm

import "context"

// Client is who a call is for: a client key (SPEC §18) with the caps the gateway holds it
// to. The zero value is the anonymous client every call has when no client keys are
// configured; it has no caps of its own and weight 1.
type Client struct {
	Name       string // the key's name; "" is the anonymous client
	Weight     int    // its share of contended lanes against other clients; 0 counts as 1
	MaxRunning int    // its calls running at once, gateway-wide; 0: no cap of its own
	MaxQueued  int    // its calls waiting at once; 0: no cap of its own
	RPM, TPM   int    // its own request and token buckets per minute; 0: none
}

// Share is the client's weight for fair queuing: at least 1.
func (c Client) Share() int {
	if c.Weight < 1 {
		return 1
	}
	return c.Weight
}

type clientKey struct{}

// WithClient returns ctx carrying the client a call is for. The HTTP layer sets it once it
// knows the caller's key; the gateway reads it with ClientOf.
func WithClient(ctx context.Context, c Client) context.Context {
	return context.WithValue(ctx, clientKey{}, c)
}

// ClientOf returns the client ctx carries, or the anonymous client.
func ClientOf(ctx context.Context) Client {
	c, _ := ctx.Value(clientKey{}).(Client)
	return c
}
