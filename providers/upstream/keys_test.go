package upstream

import (
	"slices"
	"sync"
	"testing"
)

func TestKeyRing(t *testing.T) {
	tests := []struct {
		name      string
		keys      []string
		modelKeys map[string][]string
		model     string // "" with listing set: ForListing
		listing   bool
		want      []string // keys of successive calls
	}{
		{name: "no keys", want: []string{"", ""}},
		{name: "one key", keys: []string{"k1"}, model: "m", want: []string{"k1", "k1"}},
		{name: "round robin", keys: []string{"k1", "k2", "k3"}, model: "m", want: []string{"k1", "k2", "k3", "k1"}},
		{name: "model override", keys: []string{"k1"}, modelKeys: map[string][]string{"m": {"m1", "m2"}},
			model: "m", want: []string{"m1", "m2", "m1"}},
		{name: "other model uses the default", keys: []string{"k1", "k2"}, modelKeys: map[string][]string{"m": {"m1"}},
			model: "x", want: []string{"k1", "k2"}},
		{name: "empty override is ignored", keys: []string{"k1"}, modelKeys: map[string][]string{"m": {}},
			model: "m", want: []string{"k1"}},
		{name: "listing uses the default", keys: []string{"k1"}, modelKeys: map[string][]string{"m": {"m1"}},
			listing: true, want: []string{"k1", "k1"}},
		{name: "listing borrows the first model's keys", modelKeys: map[string][]string{"b": {"b1"}, "a": {"a1", "a2"}},
			listing: true, want: []string{"a1", "a2", "a1"}},
		{name: "listing with nothing", listing: true, want: []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewKeyRing(tt.keys, tt.modelKeys)
			var got []string
			for range tt.want {
				if tt.listing {
					got = append(got, r.ForListing())
				} else {
					got = append(got, r.For(tt.model))
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("keys = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestKeyRingCopiesAndCollectsSecrets(t *testing.T) {
	keys := []string{"k1", "k2"}
	r := NewKeyRing(keys, map[string][]string{"m": {"m1"}})
	keys[0] = "changed"
	if got := r.For(""); got != "k1" {
		t.Errorf("first key = %q after the caller changed its slice", got)
	}
	s := slices.Sorted(slices.Values(r.Secrets()))
	if !slices.Equal(s, []string{"k1", "k2", "m1"}) {
		t.Errorf("Secrets = %q", s)
	}
}

// TestKeyRingConcurrent: concurrent calls spread evenly over the keys (run with -race).
func TestKeyRingConcurrent(t *testing.T) {
	r := NewKeyRing([]string{"a", "b"}, nil)
	var mu sync.Mutex
	count := map[string]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				k := r.For("m")
				mu.Lock()
				count[k]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if count["a"] != 400 || count["b"] != 400 {
		t.Errorf("spread = %v, want 400 each", count)
	}
}
