package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// FuzzParseLimits: whatever body an admin sends to POST or PATCH /admin/keys, the limits
// decoder never panics; a refusal is a 400 naming the field it refuses (param) with a
// message; limits it accepts are limits the gateway can apply: weight at least 1, no
// negative cap or rate, a budget above 0 with a known period, a known max_priority; and
// the accepted limits, sent again as JSON, are accepted as the same limits.
func FuzzParseLimits(f *testing.F) {
	for _, s := range []string{`{}`, `{"weight":2,"max_running":4,"max_queued":20}`,
		`{"rate_limit":{"rpm":60,"tpm":200000},"models":["local/*"],"max_priority":"normal"}`,
		`{"budget":{"usd":50,"period":"month"}}`, `{"budget":{"usd":0}}`, `{"weight":0}`, `{"rate_limit":null}`,
		`{"max_running":-1}`, `{"models":"x"}`, `{"rate_limit":{"rpm":1.5}}`, `{"nope":1}`, `{"max_priority":"urgent"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fields := map[string]json.RawMessage{}
		if json.Unmarshal(body, &fields) != nil {
			return // keyBody refuses it before the limits are read
		}
		p, aerr := parseLimits(fields)
		if aerr != nil {
			if aerr.status != http.StatusBadRequest || strings.HasPrefix(aerr.message, ":") || aerr.message == "" ||
				aerr.param == "" && !strings.HasPrefix(aerr.message, `"":`) {
				t.Fatalf("refusal %+v of %s: want a 400 naming the field", aerr, body)
			}
			return
		}
		l := p.Limits
		if p.Set["weight"] && l.Weight < 1 || l.MaxRunning < 0 || l.MaxQueued < 0 || l.RateLimit.RPM < 0 || l.RateLimit.TPM < 0 {
			t.Fatalf("accepted %+v from %s", l, body)
		}
		if b := l.Budget; b != nil && (b.USD <= 0 || !slices.Contains([]string{"day", "week", "month"}, b.Period)) {
			t.Fatalf("accepted budget %+v from %s", b, body)
		}
		if l.MaxPriority != "" && !slices.Contains([]string{"interactive", "normal", "background"}, l.MaxPriority) {
			t.Fatalf("accepted max_priority %q from %s", l.MaxPriority, body)
		}
		all := map[string]json.RawMessage{} // the limits by their JSON names, which are the body's
		if err := json.Unmarshal([]byte(mustJSON(t, l)), &all); err != nil {
			t.Fatal(err)
		}
		again := map[string]json.RawMessage{}
		for f := range p.Set {
			if v, ok := all[f]; ok {
				again[f] = v
			}
		}
		raw, err := json.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		fields2 := map[string]json.RawMessage{}
		if err := json.Unmarshal(raw, &fields2); err != nil {
			t.Fatal(err)
		}
		p2, aerr := parseLimits(fields2)
		if aerr != nil {
			t.Fatalf("the accepted limits %s, sent again, refused: %s", raw, aerr.message)
		}
		if a, b := mustJSON(t, p.Limits), mustJSON(t, p2.Limits); a != b {
			t.Fatalf("limits %s came back as %s", a, b)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
