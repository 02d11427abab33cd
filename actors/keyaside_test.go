package actors

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/providers/llm"
)

// refusingBackend is a backend with keys that answers a call with refuse's error for its
// key and model (nil: served), and records every call.
type refusingBackend struct {
	keys   int
	mu     sync.Mutex
	refuse func(n, key int, model string) *llm.Error // n: the call's number, from 1
	calls  []string                                  // "key/model"
}

func (b *refusingBackend) Keys(string) int { return b.keys }

func (b *refusingBackend) Open(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	return b.OpenWithKey(ctx, req, 0)
}

func (b *refusingBackend) OpenWithKey(_ context.Context, req *llm.Request, key int) (llm.Stream, error) {
	b.mu.Lock()
	b.calls = append(b.calls, fmt.Sprintf("%d/%s", key, req.Model))
	n := len(b.calls)
	b.mu.Unlock()
	if e := b.refuse(n, key, req.Model); e != nil { // refuse may block: not under mu
		out := *e
		out.Key = key
		return nil, &out
	}
	return &okStream{}, nil
}

func (b *refusingBackend) seen() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.calls)
}

// testClock is a clock the test moves by hand (Options.Now).
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// keyObserver records what the actors tell of keys set aside and restored.
type keyObserver struct {
	mu     sync.Mutex
	events []string
}

func (o *keyObserver) Retried(string)                   {}
func (o *keyObserver) FellBack(string, string)          {}
func (o *keyObserver) BreakerChanged(string, bool)      {}
func (o *keyObserver) LanesLearned(string, int, string) {}
func (o *keyObserver) KeySetAside(provider, scope string) {
	o.add("set aside " + provider + " " + scope)
}
func (o *keyObserver) KeyRestored(provider, scope, by string) {
	o.add("restored " + provider + " " + scope + " by " + by)
}
func (o *keyObserver) add(e string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, e)
}
func (o *keyObserver) seen() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.events)
}

// keyGateway is a gateway of one provider p with keys, its models a and b, on clock and
// observer.
func keyGateway(t *testing.T, b *refusingBackend, clock *testClock, o Observer) *Gateway {
	t.Helper()
	p := testProvider("p", b, "a", "b")
	p.Keys, p.Lanes, p.MaxKeyCooldown = b.keys, 2, time.Minute
	return gatewayOf(t, Options{MaxRunning: 4, MaxAdmitted: 16, Providers: []Provider{p}, Logger: zerolog.Nop(), Now: clock.Now, Observer: o})
}

// served makes one call to model and reports whether it was served; an error that is not
// 502 upstream_auth_failed fails the test.
func served(t *testing.T, g *Gateway, model string) bool {
	t.Helper()
	r := recv(t, startAsync(context.Background(), g, model, llm.Interactive))
	if r.err != nil {
		if llm.KindOf(r.err) != llm.KindUpstreamAuth {
			t.Fatalf("%s: %v, want served or 502 upstream_auth_failed", model, r.err)
		}
		return false
	}
	if _, err := drain(t, r.stream); err != nil {
		t.Fatalf("%s: %v", model, err)
	}
	return true
}

var (
	forbiddenModel = &llm.Error{Kind: llm.KindUpstreamAuth, Provider: "p", UpstreamStatus: 403, UpstreamCode: "Model.AccessDenied", Message: "Model access denied."}
	disabledKey    = &llm.Error{Kind: llm.KindUpstreamAuth, Provider: "p", UpstreamStatus: 403, UpstreamCode: "AccessDenied", Message: "This API key has been disabled.", KeyInvalid: true}
	invalidKey     = &llm.Error{Kind: llm.KindUpstreamAuth, Provider: "p", UpstreamStatus: 401, UpstreamCode: "invalid_api_key", Message: "Incorrect API key provided."}
)

// TestRefusalScope: a 403 for model a sets aside only (key, a): b's calls go on on the same
// key while a's are answered 502 without a backend call; a 401, or a 403 saying the key
// itself is disabled, sets the key aside for both. Before, any 401/403 set the key aside
// for every model until a reload.
func TestRefusalScope(t *testing.T) {
	tests := []struct {
		name      string
		refusal   *llm.Error
		bServed   bool
		wantCalls []string // after a, b, a, b
		state     string   // key 0's own state
		models    []string // the models key 0 is set aside for alone
		metric    string
	}{
		{"403 for the model", forbiddenModel, true, []string{"0/a", "0/b", "0/b"}, "ready", []string{"p/a"}, "set aside p model"},
		{"403 saying the key is disabled", disabledKey, false, []string{"0/a"}, "set_aside", nil, "set aside p key"},
		{"401", invalidKey, false, []string{"0/a"}, "set_aside", nil, "set aside p key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock, o := &testClock{now: time.Unix(1000, 0)}, &keyObserver{}
			b := &refusingBackend{keys: 1, refuse: func(_, _ int, model string) *llm.Error {
				if model == "a" {
					return tt.refusal
				}
				return nil
			}}
			g := keyGateway(t, b, clock, o)
			for i, m := range []string{"a", "b", "a", "b"} {
				if got, want := served(t, g, "p/"+m), m == "b" && tt.bServed; got != want {
					t.Fatalf("call %d to %s: served %v, want %v", i, m, got, want)
				}
			}
			if got := b.seen(); !slices.Equal(got, tt.wantCalls) {
				t.Errorf("backend saw %v, want %v", got, tt.wantCalls)
			}
			k := waitState(t, g, "idle", idle).Providers[0].Keys[0]
			var models []string
			for _, m := range k.Models {
				models = append(models, m.Name)
				if !strings.Contains(m.Reason, "Model access denied") || !m.ReprobeAt.Equal(clock.Now().Add(time.Minute)) {
					t.Errorf("model set-aside %+v: want the backend's reason and a re-probe after max_key_cooldown", m)
				}
			}
			if k.State != tt.state || !slices.Equal(models, tt.models) {
				t.Errorf("key 0: state %q, set aside for %v; want %q, %v", k.State, models, tt.state, tt.models)
			}
			if tt.state == "set_aside" && (k.SetAside == nil || !k.SetAside.ReprobeAt.Equal(clock.Now().Add(time.Minute)) ||
				!strings.Contains(k.SetAside.Reason, tt.refusal.Message) || k.SetAside.ReprobeInMs != 60000) {
				t.Errorf("key 0's set-aside %+v: want why and until when", k.SetAside)
			}
			if got := o.seen(); !slices.Equal(got, []string{tt.metric}) {
				t.Errorf("observer told %v, want [%s]", got, tt.metric)
			}
		})
	}
}

// TestRefusedKeyReprobed: a key refused (a blip of refusals) is not used until its re-probe
// time, max_key_cooldown after the refusal; then one call probes it, and the calls that
// come while it is out wait for its verdict. A refused probe sets it aside again for twice
// the wait; a probe served restores it, and the calls after it are served. Before, the key
// stayed set aside until a reload.
func TestRefusedKeyReprobed(t *testing.T) {
	tests := []struct {
		name     string
		refusals int             // the backend's first calls refused
		waits    []time.Duration // the waits before each probe, the last one served
	}{
		{"one refusal", 1, []time.Duration{time.Minute}},
		{"the first probe refused too", 2, []time.Duration{time.Minute, 2 * time.Minute}},
		{"three refusals", 3, []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock, o := &testClock{now: time.Unix(1000, 0)}, &keyObserver{}
			b := &refusingBackend{keys: 1, refuse: func(n, _ int, _ string) *llm.Error {
				if n <= tt.refusals {
					return invalidKey
				}
				return nil
			}}
			g := keyGateway(t, b, clock, o)
			if served(t, g, "p/a") {
				t.Fatal("the refused call was served")
			}
			for i, w := range tt.waits {
				clock.advance(w - time.Millisecond)
				if served(t, g, "p/b") || len(b.seen()) != i+1 {
					t.Fatalf("probe %d: a call before the re-probe time reached the backend: %v", i, b.seen())
				}
				k := waitState(t, g, "idle", idle).Providers[0].Keys[0]
				if k.State != "set_aside" || k.SetAside.ReprobeInMs != 1 || k.SetAside.WaitMs != w.Milliseconds() {
					t.Fatalf("probe %d: key %+v %+v, want set aside, re-probed in 1 ms after a wait of %v", i, k, k.SetAside, w)
				}
				clock.advance(time.Millisecond)
				ok := served(t, g, "p/b")
				if last := i == len(tt.waits)-1; ok != last || len(b.seen()) != i+2 {
					t.Fatalf("probe %d: served %v, backend saw %v", i, ok, b.seen())
				}
			}
			for range 2 {
				if !served(t, g, "p/a") {
					t.Fatalf("a call after the key was restored was refused: backend saw %v, key %+v", b.seen(), g.State().Providers[0].Keys[0])
				}
			}
			if k := waitState(t, g, "idle", idle).Providers[0].Keys[0]; k.State != "ready" || k.SetAside != nil {
				t.Errorf("key after its probe succeeded: %+v", k)
			}
			if got, want := o.seen(), []string{"set aside p key", "restored p key by probe"}; !slices.Equal(got, want) {
				t.Errorf("observer told %v, want %v", got, want)
			}
		})
	}
}

// TestReloadRestoresSetAsideKeys: a reload restores the keys and pairs set aside, even one
// that changes nothing else, and counts them restored "by reload".
func TestReloadRestoresSetAsideKeys(t *testing.T) {
	clock, o := &testClock{now: time.Unix(1000, 0)}, &keyObserver{}
	b := &refusingBackend{keys: 2, refuse: func(_, key int, model string) *llm.Error {
		switch {
		case key == 0:
			return invalidKey
		case model == "a":
			return forbiddenModel
		}
		return nil
	}}
	g := keyGateway(t, b, clock, o)
	served(t, g, "p/a") // key 0 refused (401)
	served(t, g, "p/a") // key 1 refused for a (403)
	served(t, g, "p/b")
	ks := waitState(t, g, "idle", idle).Providers[0].Keys
	if ks[0].State != "set_aside" || len(ks[1].Models) != 1 {
		t.Fatalf("keys before the reload: %+v", ks)
	}
	opts := g.opts
	opts.Providers = slices.Clone(g.opts.Providers)
	if _, err := g.Reconfigure(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	ks = waitState(t, g, "idle", idle).Providers[0].Keys
	if ks[0].State != "ready" || ks[0].SetAside != nil || len(ks[1].Models) != 0 {
		t.Errorf("keys after the reload: %+v", ks)
	}
	want := []string{"set aside p key", "set aside p model", "restored p key by reload", "restored p model by reload"}
	if got := o.seen(); !slices.Equal(got, want) {
		t.Errorf("observer told %v, want %v", got, want)
	}
}

// TestCallsWaitForTheProbe: while the probe of the only key is out, a new call waits in the
// queue for its verdict instead of 502, and is served once the probe is.
func TestCallsWaitForTheProbe(t *testing.T) {
	clock := &testClock{now: time.Unix(1000, 0)}
	gate := make(chan struct{})
	b := &refusingBackend{keys: 1, refuse: func(n, _ int, _ string) *llm.Error {
		switch n {
		case 1:
			return invalidKey
		case 2:
			<-gate // the probe: held before it answers
		}
		return nil
	}}
	g := keyGateway(t, b, clock, nil)
	if served(t, g, "p/a") {
		t.Fatal("the refused call was served")
	}
	waitState(t, g, "idle", idle) // the refusal recorded
	clock.advance(time.Minute)
	probe := startAsync(context.Background(), g, "p/a", llm.Interactive)
	waitState(t, g, "the probe at the backend", func(AdminState) bool { return len(b.seen()) == 2 })
	waiting := startAsync(context.Background(), g, "p/b", llm.Interactive)
	waitState(t, g, "the next call queued", func(s AdminState) bool { return s.Queued == 1 })
	close(gate)
	for _, r := range []chan result{probe, waiting} {
		res := recv(t, r)
		if res.err != nil {
			t.Fatalf("%v: the probe and the call that waited for it are served", res.err)
		}
		if _, err := drain(t, res.stream); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.seen(); len(got) != 3 {
		t.Errorf("backend saw %v, want the refusal, the probe and the call that waited", got)
	}
}
