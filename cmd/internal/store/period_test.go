package store

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/tollgate/tollgate/httpapi"
)

// TestBudgetedPeriods: Budgeted lists the keys with a budget and their current periods
// (a revoked key no longer); Period is any known key's (a month without a budget).
func TestBudgetedPeriods(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	s := open(t, Options{SQLite: filepath.Join(t.TempDir(), "t.db")}, c)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	ctx := context.Background()
	if _, _, err := s.CreateKey(ctx, "bob", httpapi.KeyLimits{Weight: 1, Budget: &httpapi.KeyBudget{USD: 5, Period: "week"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateKey(ctx, "cy", httpapi.KeyLimits{Weight: 1}); err != nil {
		t.Fatal(err)
	}
	day, week := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	want := map[string]KeyPeriod{"alice": {"alice", day, day.AddDate(0, 0, 1)}, "bob": {"bob", week, week.AddDate(0, 0, 7)}}
	got := map[string]KeyPeriod{}
	for _, kp := range s.Budgeted(c.Now()) {
		got[kp.Name] = kp
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("budgeted %v, want %v", got, want)
	}
	month := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if p, ok := s.Period("cy", c.Now()); !ok || p != (KeyPeriod{"cy", month, month.AddDate(0, 1, 0)}) {
		t.Errorf("cy's period %v %v, want December", p, ok)
	}
	if _, ok := s.Period("nobody", c.Now()); ok {
		t.Error("a period for an unknown key")
	}
	if _, err := s.RevokeKey(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Budgeted(c.Now())); n != 1 {
		t.Errorf("%d budgeted keys after bob's revocation, want alice alone", n)
	}
}
