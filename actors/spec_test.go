package actors

import (
	"reflect"
	"testing"
	"time"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/actors/policy/keys"
)

// TestPolicySpecMapsEveryField: from a Provider whose admission settings are all set,
// policySpec sets every field of policy.ProviderSpec, of each ModelSpec and of each KeyPool;
// and each admission setting of Provider and Model changes what it makes. A field added to
// either shape that the mapping does not carry fails it.
func TestPolicySpecMapsEveryField(t *testing.T) {
	pv := Provider{Name: "p", Lanes: 3, QueueLength: 4, QueueTimeout: time.Second,
		RateLimit: RateLimit{RPM: 60, TPM: 600, Burst: 2}, KeyRateLimit: RateLimit{RPM: 6, TPM: 60, Burst: 1}}
	models := []Model{{Name: "a", Lanes: 2}, {Name: "b", Lanes: 1}}
	rings := []*keys.Ring{keys.New(1, keys.Config{}), keys.New(2, keys.Config{})}
	pool := map[int]int{1: 1}
	slots, shares := policy.NewSlots(nil), policy.NewShares()
	got := policySpec(&pv, models, rings, pool, slots, shares)
	nonZero := func(what string, v reflect.Value) {
		for i := range v.NumField() {
			if v.Field(i).IsZero() {
				t.Errorf("%s.%s is not set by policySpec", what, v.Type().Field(i).Name)
			}
		}
	}
	nonZero("ProviderSpec", reflect.ValueOf(got))
	nonZero("ModelSpec", reflect.ValueOf(got.Models[1])) // model b uses pool 1: every field set
	nonZero("KeyPool", reflect.ValueOf(got.Keys[1]))
	// The admission settings each change the spec (the others are the gateway's own).
	admission := map[string]func(p *Provider){
		"Name": func(p *Provider) { p.Name = "q" }, "Lanes": func(p *Provider) { p.Lanes = 1 },
		"QueueLength": func(p *Provider) { p.QueueLength = 0 }, "QueueTimeout": func(p *Provider) { p.QueueTimeout = time.Minute },
		"RateLimit": func(p *Provider) { p.RateLimit = RateLimit{} }, "KeyRateLimit": func(p *Provider) { p.KeyRateLimit = RateLimit{} },
	}
	for name, change := range admission {
		q := pv
		change(&q)
		if reflect.DeepEqual(policySpec(&q, models, rings, pool, slots, shares), got) {
			t.Errorf("Provider.%s changes nothing policySpec makes", name)
		}
	}
	for name, change := range map[string]func(m *Model){"Name": func(m *Model) { m.Name = "c" }, "Lanes": func(m *Model) { m.Lanes = 5 }} {
		ms := append([]Model(nil), models...)
		change(&ms[0])
		if reflect.DeepEqual(policySpec(&pv, ms, rings, pool, slots, shares), got) {
			t.Errorf("Model.%s changes nothing policySpec makes", name)
		}
	}
}
