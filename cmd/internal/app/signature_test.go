package app

import (
	"reflect"
	"testing"

	"github.com/tollgate/tollgate/cmd/internal/config"
)

// The fields of config.Provider and config.Model that a reload applies without a new
// adapter (the gateway's: admission, resilience, routing, prices); every other field is
// what the adapter is built from. A field added to either type fails
// TestSignatureClassifiesEveryField until it is listed here or in backendFields.
var (
	gatewayFields = map[string]bool{
		"Lanes": true, "ModelLanes": true, "QueueLength": true, "QueueTimeout": true, "RunTimeout": true,
		"RateLimit": true, "KeyRateLimit": true, "KeyCooldown": true, "MaxKeyCooldown": true, "Retries": true,
		"AdaptiveLanes": true, "LanesProbe": true, "Breaker": true, "RefreshModels": true, "Aliases": true,
		"Discovered": true, "Fallbacks": true, "FallbackOn": true, "Price": true,
	}
	backendFields = map[string]bool{
		"Name": true, "Kind": true, "BaseURL": true, "Keys": true, "Models": true, "Command": true, "Args": true,
		"Env": true, "Workdir": true, "KillGrace": true,
		// a model's: its id, its own keys, its card, the fake backend's script
		"ID": true, "Type": true, "ContextWindow": true, "MaxOutputTokens": true, "Reasoning": true, "Tools": true,
		"Vision": true, "Reply": true, "ReasoningText": true, "FirstTokenDelay": true, "TokensPerSecond": true, "Fail": true,
	}
)

// TestSignatureClassifiesEveryField: changing one field of a provider, or of its model, keeps
// the adapter's signature exactly when the field is the gateway's.
func TestSignatureClassifiesEveryField(t *testing.T) {
	limits := &config.Limits{MaxEventBytes: 1 << 20}
	base := config.Provider{Name: "p", Kind: "fake", Models: []config.Model{{ID: "m"}}}
	check := func(typ reflect.Type, field func(*config.Provider) reflect.Value) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			gateway, backend := gatewayFields[f.Name], backendFields[f.Name]
			if gateway == backend {
				t.Errorf("%s.%s: list it in gatewayFields or backendFields (once)", typ.Name(), f.Name)
				continue
			}
			if f.Name == "Models" {
				continue // each model's fields are checked below
			}
			p := base
			p.Models = []config.Model{base.Models[0]}
			setNonZero(field(&p).Field(i))
			if kept := signature(&p, limits).equal(signature(&base, limits)); kept != gateway {
				t.Errorf("%s.%s changed: adapter kept %v, want %v", typ.Name(), f.Name, kept, gateway)
			}
		}
	}
	check(reflect.TypeFor[config.Provider](), func(p *config.Provider) reflect.Value { return reflect.ValueOf(p).Elem() })
	check(reflect.TypeFor[config.Model](), func(p *config.Provider) reflect.Value { return reflect.ValueOf(&p.Models[0]).Elem() })
}

// setNonZero sets v to a value other than its zero value.
func setNonZero(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1.5)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		setNonZero(p.Elem())
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		setNonZero(s.Index(0))
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		setNonZero(k)
		setNonZero(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				setNonZero(v.Field(i))
				return
			}
		}
	}
}
