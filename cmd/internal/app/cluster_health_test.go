package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/cmd/internal/cluster"
	"github.com/tollgate/tollgate/cmd/internal/cluster/redistest"
	"github.com/tollgate/tollgate/cmd/internal/fakellm"
	"github.com/tollgate/tollgate/providers/llm"
)

// What the replicas share beyond leases and the provider's buckets (actors/sharedhealth.go,
// actors/sharedbuckets.go): key rate limits, tpm corrected from usage, learned lanes, the
// breaker, and what a replica reads when it starts or rejoins.

// keyLog is a real fakellm behind a handler that records when each API key was sent.
type keyLog struct {
	mu   sync.Mutex
	sent map[string][]time.Time
}

func newKeyedFake(t *testing.T, o fakellm.Options) (*keyLog, *httptest.Server) {
	kl := &keyLog{sent: map[string][]time.Time{}}
	fake := fakellm.New(o)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			kl.mu.Lock()
			k := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			kl.sent[k] = append(kl.sent[k], time.Now())
			kl.mu.Unlock()
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return kl, srv
}

// TestReplicasShareKeyRateLimit: two replicas share each key's key_rate_limit (rpm 60,
// burst 1): across both, no key is sent twice within a second, though each replica's own
// limiter would send both keys at once on each; a key the shared bucket refuses rests, and
// the call takes the other key or waits, never refused by the backend.
func TestReplicasShareKeyRateLimit(t *testing.T) {
	kl, srv := newKeyedFake(t, fakellm.Options{Models: []string{"m"}})
	apps := replicasOf(t, 2, fmt.Sprintf("providers: [{name: o, kind: openai, base_url: %s/v1, keys: [k1, k2], key_rate_limit: {rpm: 60, burst: 1}, lanes: 4, queue_length: 10, queue_timeout: 30s, models: [{id: m}]}]\n", srv.URL), nil)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			if err := callModel(context.Background(), apps[i%2], "o/m"); err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	kl.mu.Lock()
	defer kl.mu.Unlock()
	if n := len(kl.sent["k1"]) + len(kl.sent["k2"]); n != 6 || len(kl.sent["k1"]) == 0 || len(kl.sent["k2"]) == 0 {
		t.Fatalf("the backend saw k1 %d and k2 %d times; want 6 calls over both keys", len(kl.sent["k1"]), len(kl.sent["k2"]))
	}
	// The buckets space the starts a second apart; the backend sees them later by the
	// time each takes to reach it, which a loaded machine stretches, hence the margin.
	// Without sharing, the replicas send each key at the same instant.
	for k, at := range kl.sent {
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); gap < 500*time.Millisecond {
				t.Errorf("key %s sent twice %s apart across the replicas; its key_rate_limit (rpm 60, burst 1) allows one a second", k, gap)
			}
		}
	}
}

// TestReplicasKeyLimitAnsweredHonestly: with its only key's shared key_rate_limit spent on
// the other replica for longer than the call could wait, a call is answered 429
// upstream_rate_limited at once, saying so, with the key's wait as Retry-After; it is never
// sent to be refused.
func TestReplicasKeyLimitAnsweredHonestly(t *testing.T) {
	kl, srv := newKeyedFake(t, fakellm.Options{Models: []string{"m"}})
	apps := replicasOf(t, 2, fmt.Sprintf("providers: [{name: o, kind: openai, base_url: %s/v1, keys: [k1], key_rate_limit: {rpm: 6, burst: 1}, lanes: 2, queue_length: 10, queue_timeout: 2s, models: [{id: m}]}]\n", srv.URL), nil)
	if err := callModel(context.Background(), apps[0], "o/m"); err != nil {
		t.Fatal(err)
	}
	err := callModel(context.Background(), apps[1], "o/m")
	le, ok := errors.AsType[*llm.Error](err)
	if !ok || le.Kind != llm.KindUpstreamRateLimited || le.RetryAfter < 5*time.Second ||
		!strings.Contains(le.Message, "key_rate_limit (rpm 6, tpm 0) shared by the replicas") {
		t.Fatalf("a call whose only key's shared bucket is spent for 10 s, with queue_timeout 2s: %v; want 429 upstream_rate_limited naming the shared key_rate_limit", err)
	}
	kl.mu.Lock()
	defer kl.mu.Unlock()
	if n := len(kl.sent["k1"]); n != 1 {
		t.Errorf("the backend saw k1 %d times, want once", n)
	}
}

// bucketDebt is how far shared bucket name's tokens are spent beyond full, on Redis's clock.
func bucketDebt(t *testing.T, rdb *redis.Client, name string) time.Duration {
	t.Helper()
	ctx := context.Background()
	tat, err := rdb.Get(ctx, "{tollgate}:bucket:"+name).Int64()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(tat-now.UnixMicro()) * time.Microsecond
}

// TestReplicasCorrectTPMFromUsage: a call's leases charge the shared tpm bucket at its
// estimate (its max_tokens); once its usage is known, the bucket holds what it used.
func TestReplicasCorrectTPMFromUsage(t *testing.T) {
	_, srv := newKeyedFake(t, fakellm.Options{Models: []string{"m"}, Chunks: 3})
	s := redistest.Start(t)
	apps := replicasOn(t, s, 2, fmt.Sprintf("providers: [{name: o, kind: openai, base_url: %s/v1, rate_limit: {tpm: 600000}, lanes: 2, queue_length: 10, queue_timeout: 30s, models: [{id: m}]}]\n", srv.URL), nil)
	rdb := s.Client()
	// 100,000 tokens at 600,000 a minute are 10 s of the bucket: its capacity (a tenth of a
	// minute), and debt while the estimate stands.
	maxTokens := 100000
	req := &llm.Request{Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: "hi"}}}, MaxTokens: &maxTokens}
	sv, err := apps[0].Gateway.Start(context.Background(), "o/m", llm.Interactive, req)
	if err != nil {
		t.Fatal(err)
	}
	if d := bucketDebt(t, rdb, "tpm/o"); d < 5*time.Second {
		t.Fatalf("while the call runs the shared tpm bucket holds %s of debt; the estimate of %d tokens is 10 s", d, maxTokens)
	}
	for {
		if _, err := sv.Stream.Next(); err != nil {
			break
		}
	}
	_ = sv.Stream.Close()
	waitFor(t, "the shared tpm bucket corrected from the usage", func() bool {
		return bucketDebt(t, rdb, "tpm/o") < time.Second
	})
}

// scriptedBackend answers each call with the next of its errors, then with a stream that
// ends at once; it counts the calls it saw.
type scriptedBackend struct {
	mu    sync.Mutex
	errs  []error
	calls int
}

func (b *scriptedBackend) Open(ctx context.Context, _ *llm.Request) (llm.Stream, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	if len(b.errs) > 0 {
		err := b.errs[0]
		b.errs = b.errs[1:]
		return nil, err
	}
	return &heldStream{b: &heldBackend{hold: time.Nanosecond}, ctx: ctx}, nil
}

func (b *scriptedBackend) seen() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls
}

// TestReplicasShareLearnedLanes: a backend that states it takes 2 calls teaches one
// replica; the other adopts it (reason "shared"), and a replica started afterwards reads
// it at its start.
func TestReplicasShareLearnedLanes(t *testing.T) {
	b := &scriptedBackend{errs: []error{&llm.Error{Kind: llm.KindUpstreamRateLimited, StatedLimit: 2, Message: "2 concurrent calls at most"}}}
	yaml := "providers: [{name: demo, kind: fake, lanes: 4, queue_length: 10, queue_timeout: 30s, models: [{id: echo}]}]\n"
	s := redistest.Start(t)
	apps := replicasOn(t, s, 2, yaml, map[string]llm.Backend{"demo": b})
	if err := call(context.Background(), apps[0]); err != nil {
		t.Fatalf("the call refused for capacity, then requeued: %v", err)
	}
	learned := func(a *App, reason string) func() bool {
		return func() bool {
			p := a.Gateway.State().Providers[0]
			return p.EffectiveLanes == 2 && p.EffectiveLanesReason == reason
		}
	}
	waitFor(t, "the first replica learning 2 lanes", learned(apps[0], "stated_limit"))
	waitFor(t, "the other replica adopting them", learned(apps[1], "shared"))
	late := startReplica(t, s.Addr(), "r3", yaml, map[string]llm.Backend{"demo": b})
	waitFor(t, "a replica started afterwards reading them", learned(late, "shared"))
}

// TestReplicasShareBreaker: a breaker that opens on one replica opens on the other until
// the same probe time: its calls are answered 503 provider_unavailable without reaching the
// backend; a replica started afterwards reads it open.
func TestReplicasShareBreaker(t *testing.T) {
	down := func() error { return &llm.Error{Kind: llm.KindUpstream, Message: "the backend is down"} }
	b := &scriptedBackend{errs: []error{down(), down()}}
	yaml := "providers: [{name: demo, kind: fake, lanes: 2, retries: 0, breaker: {failures: 2, open_for: 1m}, queue_length: 10, queue_timeout: 30s, models: [{id: echo}]}]\n"
	s := redistest.Start(t)
	apps := replicasOn(t, s, 2, yaml, map[string]llm.Backend{"demo": b})
	for range 2 {
		if err := call(context.Background(), apps[0]); err == nil {
			t.Fatal("a call to a backend that is down succeeded")
		}
	}
	open := func(a *App) func() bool {
		return func() bool {
			br := a.Gateway.State().Providers[0].Breaker
			return br != nil && br.State == "open" && br.RetryAfterMs > 50_000
		}
	}
	waitFor(t, "the first replica's breaker open", open(apps[0]))
	waitFor(t, "the other replica's breaker open", open(apps[1]))
	err := call(context.Background(), apps[1])
	if le, ok := errors.AsType[*llm.Error](err); !ok || le.Kind != llm.KindProviderUnavailable || le.RetryAfter < 50*time.Second {
		t.Fatalf("a call on the other replica: %v, want 503 provider_unavailable until the shared probe time", err)
	}
	if n := b.seen(); n != 2 {
		t.Errorf("the backend saw %d calls; want the 2 that opened the breaker", n)
	}
	late := startReplica(t, s.Addr(), "r3", yaml, map[string]llm.Backend{"demo": b})
	waitFor(t, "a replica started afterwards reading it open", open(late))
}

// TestRejoinReadsCooldowns: a replica whose shared state answers again after an outage
// reads the cooldowns in force, which it may not have heard announced meanwhile.
func TestRejoinReadsCooldowns(t *testing.T) {
	apps, _, cooling := unheardCooldown(t)
	sh := apps[0].shared
	sh.notify(cluster.Event{Kind: cluster.Changed, Redis: false}) // the outage, as the engine tells it
	sh.notify(cluster.Event{Kind: cluster.Changed, Redis: true})  // and the rejoin
	waitFor(t, "the rejoined replica reading the cooldown in force", cooling)
}

// TestReplicasChargeRetries: a retry keeps its lane but what it sends counts: a call
// answered on its second attempt has charged the shared rpm bucket two requests.
func TestReplicasChargeRetries(t *testing.T) {
	b := &scriptedBackend{errs: []error{&llm.Error{Kind: llm.KindUpstream, Message: "a passing failure"}}}
	s := redistest.Start(t)
	apps := replicasOn(t, s, 2, "providers: [{name: demo, kind: fake, lanes: 2, retries: 1, rate_limit: {rpm: 6, burst: 5}, queue_length: 10, queue_timeout: 30s, models: [{id: echo}]}]\n",
		map[string]llm.Backend{"demo": b})
	rdb := s.Client()
	if err := call(context.Background(), apps[0]); err != nil {
		t.Fatalf("a call whose retry succeeds: %v", err)
	}
	if n := b.seen(); n != 2 {
		t.Fatalf("the backend saw %d attempts, want 2", n)
	}
	// rpm 6: a request is 10 s of the bucket, so two are 20 s, less the time since.
	waitFor(t, "the retry charged to the shared rpm bucket", func() bool {
		return bucketDebt(t, rdb, "rpm/demo") > 15*time.Second
	})
}

// TestReplicasChargeBatchMembersKeys: a batch member's key is counted in its shared
// key_rate_limit bucket even when the provider has no rate_limit of its own (its claim then
// holds no bucket at all): else the other replicas send on the key as if it were unused.
func TestReplicasChargeBatchMembersKeys(t *testing.T) {
	_, srv := newKeyedFake(t, fakellm.Options{Models: []string{"m"}})
	s := redistest.Start(t)
	apps := replicasOn(t, s, 1, fmt.Sprintf("providers: [{name: o, kind: openai, base_url: %s/v1, keys: [k1], key_rate_limit: {rpm: 6, burst: 1}, lanes: 2, queue_length: 10, queue_timeout: 30s, models: [{id: m}]}]\n", srv.URL), nil)
	rdb := s.Client()
	members, err := apps[0].Gateway.StartBatch(context.Background(), []string{"o/m"}, llm.Interactive, &llm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if m.Err != nil {
			t.Fatalf("member: %v", m.Err)
		}
		for {
			if _, err := m.Stream.Next(); err != nil {
				break
			}
		}
		_ = m.Stream.Close()
	}
	// rpm 6 with a burst of 1: one request is 10 s of the key's bucket. The charge is a
	// round trip off the provider actor's goroutine (actors/sharedbuckets.go), as the
	// retry's above is: it may land after the member's stream ends, so wait for it.
	waitFor(t, "the batch member charged to its shared key bucket (one request is 10 s of it)", func() bool {
		return bucketDebt(t, rdb, "rpm/key/o/0/0") >= 5*time.Second
	})
}
