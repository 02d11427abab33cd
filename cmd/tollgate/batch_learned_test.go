package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// TestBatchLearnedLanes (SPEC §5 with §11): a batch is judged "can never fit" against the
// configured lanes but "fits now" against the learned ones. A provider configured for 4 lanes
// learns from its backend's refusals that it takes 2; then a batch of 3 fits the
// configuration (no 400) but not the backend (429 batch_capacity_unavailable, naming the
// provider's learned lanes and why), a batch of 2 starts, and a batch of 5 can never start.
func TestBatchLearnedLanes(t *testing.T) {
	be := startRecorded(t, fakellm.Options{Reply: "served", Chunks: 1, Latency: 150 * time.Millisecond,
		MaxConcurrent: 2, BusyStyle: fakellm.BusyStated})
	g := startGateway(t, "providers:\n"+keyedProvider("oa", "openai", be.URL, []string{"k"},
		"    lanes: 4\n    model_lanes: 4\n    queue_length: 8\n",
		"{id: a}", "{id: b}", "{id: c}", "{id: d}", "{id: e}"), nil)
	ctx := context.Background()

	// Four calls at once: the backend refuses two, stating its limit; they go back to the
	// head of the queue and are served, and the provider has learned 2 lanes.
	var wg sync.WaitGroup
	results := make([]served, 4)
	for i := range results {
		wg.Go(func() { results[i] = chatSDK(ctx, g.URL, "oa/a", "hi") }) // exits when answered
	}
	wg.Wait()
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("call %d: %v", i, r.err)
		}
	}
	if st := be.fake.Stats(); st.Rejected == 0 {
		t.Fatalf("the backend refused nothing (%+v): the test did not reach its hidden limit", st)
	}
	p := waitProvider(t, g, "oa", "2 lanes learned, idle", func(p actors.ProviderState) bool {
		return p.EffectiveLanes == 2 && p.Running == 0 && p.Queued == 0
	})
	if p.EffectiveLanesReason != "stated_limit" {
		t.Fatalf("effective lanes %d for %q, want 2 for stated_limit", p.EffectiveLanes, p.EffectiveLanesReason)
	}

	a := postBatch(ctx, g.URL, batchBody(false, "oa/a", "oa/b", "oa/c"))
	checkBusy(t, a, "batch_capacity_unavailable")
	var e batchError
	if err := json.Unmarshal([]byte(a.body), &e); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"provider oa takes only 2 of its 4 configured lanes now", "stated_limit",
		"the batch's 3 members fit the configuration but not what the backend takes now"} {
		if !strings.Contains(e.Error.Message, want) {
			t.Errorf("message %q lacks %q", e.Error.Message, want)
		}
	}
	if n := len(be.arrivals()); n != 4+int(be.fake.Stats().Rejected) {
		t.Errorf("the backend saw %d calls: the refused batch called it", n)
	}

	if a := postBatch(ctx, g.URL, batchBody(false, "oa/a", "oa/b")); a.status != 200 {
		t.Errorf("a batch of 2 with 2 learned lanes: %d %s", a.status, a.body)
	}
	a = postBatch(ctx, g.URL, batchBody(false, "oa/a", "oa/b", "oa/c", "oa/d", "oa/e"))
	if err := json.Unmarshal([]byte(a.body), &e); err != nil || a.status != 400 || e.Error.Code != "batch_exceeds_provider_capacity" {
		t.Errorf("a batch of 5 with 4 configured lanes: %d %s", a.status, a.body)
	}
}
