package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// How a conformance check is asserted: expectations on the values a script observed (by
// path into its JSON line) and on the requests the tap saw for the check.

// conformanceClient is one client library: its script and the checks it prints.
type conformanceClient struct {
	name   string // the checks' prefix, as the script names them
	script string // under testdata/conformance
	checks []conformanceCheck
}

// conformanceCheck is what one check must show.
type conformanceCheck struct {
	name  string
	wants []expect
	// tries is what the tap must have seen of the check's requests; nil: one request
	// answered 200 (a check that succeeds without a retry).
	tries *tries
	// extra asserts what wants cannot say (what the backend was sent); nil: nothing more.
	extra func(t *testing.T, obs map[string]any, env *conformanceEnv)
}

// expect is one expectation: the value at path in the check's observation satisfies match;
// why says what a user of the client loses when it does not.
type expect struct {
	path  string
	match matcher
	why   string
}

// matcher is a named predicate on a decoded JSON value (nil when the path is absent).
type matcher struct {
	desc string
	ok   func(v any) bool
}

// equals matches a value equal to v as JSON (numbers compare as float64).
func equals(v any) matcher {
	b, _ := json.Marshal(v)
	var norm any
	_ = json.Unmarshal(b, &norm)
	return matcher{"= " + string(b), func(got any) bool { return reflect.DeepEqual(got, norm) }}
}

// holds matches a string holding each of subs.
func holds(subs ...string) matcher {
	return matcher{fmt.Sprintf("a string containing %q", subs), func(got any) bool {
		s, ok := got.(string)
		if !ok {
			return false
		}
		for _, sub := range subs {
			if !strings.Contains(s, sub) {
				return false
			}
		}
		return true
	}}
}

// nonEmpty matches a value that is there: not null, not "", not an empty list or object.
var nonEmpty = matcher{"present (not null or empty)", func(got any) bool {
	switch v := got.(type) {
	case nil:
		return false
	case string:
		return v != ""
	case []any:
		return len(v) > 0
	case map[string]any:
		return len(v) > 0
	}
	return true
}}

// atLeast matches a number ≥ n.
func atLeast(n float64) matcher {
	return matcher{fmt.Sprintf("a number ≥ %g", n), func(got any) bool {
		f, ok := got.(float64)
		return ok && f >= n
	}}
}

// lookup returns the value at a dot path ("error.body.error.code", "content.0.type").
func lookup(v any, path string) (any, bool) {
	for _, key := range strings.Split(path, ".") {
		switch node := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = node[key]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(node) {
				return nil, false
			}
			v = node[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// tries is what the tap must see of a check's requests: the statuses the gateway answered,
// one per attempt in order, and the client's wait before each retry.
type tries struct {
	statuses []int
	gaps     []window
}

// window bounds one wait, measured at the gateway from one attempt's arrival to the next's
// (the wait plus the previous answer's round trip, a few milliseconds on loopback).
type window struct{ lo, hi time.Duration }

// The slack the upper bounds allow for a loaded machine's late timers, and the early firing
// a JavaScript timer is allowed (it rounds to the millisecond).
const (
	lateSlack  = 900 * time.Millisecond
	earlySlack = 5 * time.Millisecond
)

// waits is the window of a client that waits d (from a header) or a jittered backoff
// between lo and hi.
func waits(lo, hi time.Duration) window { return window{lo - earlySlack, hi + lateSlack} }

// assert checks the observation and the tap's records against the check.
func (c conformanceCheck) assert(t *testing.T, obs map[string]any, env *conformanceEnv) {
	t.Helper()
	failed := false
	for _, w := range c.wants {
		got, _ := lookup(obs, w.path)
		if !w.match.ok(got) {
			g, _ := json.Marshal(got)
			t.Errorf("%s: %s is %s, want %s: %s", c.name, w.path, g, w.match.desc, w.why)
			failed = true
		}
	}
	tr := c.tries
	if tr == nil {
		tr = once200
	}
	if !tr.check(t, c.name, env.tap.records(c.name)) {
		failed = true
	}
	if c.extra != nil {
		c.extra(t, obs, env)
	}
	if failed || t.Failed() {
		b, _ := json.MarshalIndent(obs, "", "  ")
		t.Logf("%s observed:\n%s", c.name, b)
	}
}

// check compares the tap's records of a check with tr.
func (tr *tries) check(t *testing.T, name string, recs []tapRecord) bool {
	t.Helper()
	statuses := make([]int, len(recs))
	for i, r := range recs {
		statuses[i] = r.status
	}
	if len(tr.gaps) > 0 { // what the client did, for the record (docs/conformance.md)
		t.Logf("%s: %s", name, describeRecords(recs))
	}
	ok := true
	if !slices.Equal(statuses, tr.statuses) {
		t.Errorf("%s: the gateway saw %d attempts answered %v, want %v (%s)", name, len(recs), statuses, tr.statuses, describeRecords(recs))
		ok = false
	}
	for i := 1; i < len(recs) && i-1 < len(tr.gaps); i++ {
		gap, w := recs[i].at.Sub(recs[i-1].at), tr.gaps[i-1]
		if gap < w.lo || gap > w.hi {
			t.Errorf("%s: retry %d came %s after the attempt before it, want between %s and %s (%s)",
				name, i, gap.Round(time.Millisecond), w.lo, w.hi, describeRecords(recs))
			ok = false
		}
	}
	return ok
}

// describeRecords says what the tap saw, for a failure message.
func describeRecords(recs []tapRecord) string {
	parts := make([]string, len(recs))
	for i, r := range recs {
		gap := ""
		if i > 0 {
			gap = fmt.Sprintf(" +%s", r.at.Sub(recs[i-1].at).Round(time.Millisecond))
		}
		parts[i] = fmt.Sprintf("%s %s → %d (retry-count %q, retry-after-ms %q, x-should-retry %q)%s",
			r.method, r.path, r.status, r.retryCount, r.header.Get("Retry-After-Ms"), r.header.Get("X-Should-Retry"), gap)
	}
	return strings.Join(parts, "; ")
}
