package app

import (
	"reflect"
	"testing"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/cmd/internal/config"
	"github.com/tollgate/tollgate/providers/fake"
)

// A provider's settings have three shapes: config.Provider (what the YAML says), actors.Provider
// (what the gateway runs) and policy.ProviderSpec (what admission needs; actors' spec.go). They
// cannot be one type without an arrow the architecture forbids (config knows no actor code, the
// policy no config), so each mapping is one function, and these tests hold it to both shapes: a
// field added to either side that the mapping does not carry fails them.

// elsewhere are the config.Provider fields toProvider does not read, and where they go.
var elsewhere = map[string]string{
	"BaseURL":       "backendFor: the adapter's address",
	"Command":       "cliBackend",
	"Args":          "cliBackend",
	"Env":           "cliBackend",
	"Workdir":       "cliBackend",
	"KillGrace":     "cliBackend, and maxRun for the cluster's leases",
	"ModelLanes":    "modelsOf: each model's default model_lanes",
	"Models":        "modelsOf and backendFor: the models passed to toProvider",
	"Kind":          "backendFor; toProvider copies it too",
	"RefreshModels": "the model list's refresh (models.go)",
	"Discovered":    "config's own record of how discovery found it (not configuration)",
}

// fill sets every field of the struct v points to, recursively, to a value other than its zero.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		v.SetMapIndex(k, e)
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(3)
	case reflect.Uint8, reflect.Uint, reflect.Uint64:
		v.SetUint(3)
	case reflect.Float64:
		v.SetFloat(0.25)
	}
}

// TestToProviderMapsEveryField: from a config.Provider with every field set, toProvider sets
// every field of actors.Provider; and every config.Provider field either changes what
// toProvider makes or is listed in elsewhere with the place that reads it.
func TestToProviderMapsEveryField(t *testing.T) {
	var p config.Provider
	fill(reflect.ValueOf(&p).Elem())
	off := false
	p.AdaptiveLanes = &off // FixedLanes is its negation: true shows it carried
	var l config.Limits
	fill(reflect.ValueOf(&l).Elem())
	models := []actors.Model{{Name: "m"}}
	b := fake.New(fake.Config{Name: "x"})
	got := toProvider(&p, &l, models, b)
	gv := reflect.ValueOf(got)
	for i := range gv.NumField() {
		if f := gv.Type().Field(i); f.IsExported() && gv.Field(i).IsZero() {
			t.Errorf("actors.Provider.%s is not set by toProvider from a config with every field set", f.Name)
		}
	}
	pv := reflect.ValueOf(&p).Elem()
	for i := range pv.NumField() {
		name := pv.Type().Field(i).Name
		if _, ok := elsewhere[name]; ok {
			continue
		}
		q := p
		qv := reflect.ValueOf(&q).Elem().Field(i)
		qv.Set(reflect.Zero(qv.Type()))
		if reflect.DeepEqual(toProvider(&q, &l, models, b), got) {
			t.Errorf("config.Provider.%s changes nothing toProvider makes, and elsewhere does not say who reads it", name)
		}
	}
	for name := range elsewhere {
		if _, ok := pv.Type().FieldByName(name); !ok {
			t.Errorf("elsewhere names %s, which config.Provider no longer has", name)
		}
	}
}
