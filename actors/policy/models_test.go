package policy

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func addModel(p int, name string, lanes, want int) step {
	return step{fmt.Sprintf("add model %s to p%d → %d", name, p, want), func(h *harness) error {
		if got := h.g.AddModel(p, ModelSpec{Name: name, Lanes: lanes}); got != want {
			return fmt.Errorf("AddModel = %d, want %d", got, want)
		}
		return nil
	}}
}

// lookup expects id to be known at provider p, model m, running or not.
func lookup(id ID, p, m int, running bool) step {
	return step{fmt.Sprintf("lookup %d → p%d m%d running %v", id, p, m, running), func(h *harness) error {
		in, ok := h.g.Lookup(id)
		if !ok || in.Provider != p || in.Model != m || in.Running != running {
			return fmt.Errorf("Lookup = %+v %v", in, ok)
		}
		return nil
	}}
}

// models expects provider p's model names and per-model running/queued counts in the snapshot.
func models(p int, want ...string) step {
	return step{fmt.Sprintf("p%d models %v", p, want), func(h *harness) error {
		var got []string
		for _, m := range h.g.Snapshot().Providers[p].Models {
			got = append(got, fmt.Sprintf("%s r%d q%d", m.Name, m.Running, m.Queued))
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("got %q", got)
		}
		return nil
	}}
}

func TestAddModel(t *testing.T) {
	two := []ProviderSpec{prov("a", 2, 4, 1, 1), prov("b", 2, 4, 1)}
	for _, s := range []script{
		{name: "unknown provider", limits: Limits{4, 8}, providers: two, steps: []step{
			addModel(-1, "x", 1, -1), addModel(2, "x", 1, -1), models(0, "a-m0 r0 q0", "a-m1 r0 q0"),
		}},
		{name: "admitted requests of every provider keep their models", limits: Limits{4, 8}, providers: two, steps: []step{
			arrive(1, 0, 0, I, "started"), arrive(2, 0, 0, I, "queued"),
			arrive(3, 1, 0, I, "started"), arrive(4, 1, 0, N, "queued"),
			// a-m1 comes before b-m0 in the gate's model slab; both shift.
			addModel(0, "a-new", 1, 2), addModel(1, "b-new", 2, 1),
			lookup(1, 0, 0, true), lookup(2, 0, 0, false), lookup(3, 1, 0, true), lookup(4, 1, 0, false),
			models(0, "a-m0 r1 q1", "a-m1 r0 q0", "a-new r0 q0"),
			models(1, "b-m0 r1 q1", "b-new r0 q0"),
			// The queued requests still start in their turn and on their own model.
			finishThen(1, 2), finishThen(3, 4), lookup(2, 0, 0, true), lookup(4, 1, 0, true),
			finish(2), finish(4), counts(0, 0),
		}},
		{name: "a new model takes requests within its own and its provider's lanes", limits: Limits{4, 8}, providers: two, steps: []step{
			arrive(1, 0, 0, I, "started"),
			addModel(0, "a-new", 1, 2),
			arrive(2, 0, 2, I, "started"), arrive(3, 0, 2, I, "queued"), // provider a: 2 lanes busy
			arrive(4, 0, 1, I, "queued"),
			models(0, "a-m0 r1 q0", "a-m1 r0 q1", "a-new r1 q1"),
		}},
		{name: "queued requests expire on time after a model was added", limits: Limits{1, 8}, providers: two, steps: []step{
			arrive(1, 1, 0, I, "started"), arrive(2, 1, 0, I, "queued"),
			addModel(0, "a-new", 1, 2),
			advance(10 * time.Second), expire(2), finishThen(1), counts(0, 0),
		}},
	} {
		s.run(t)
	}
}

// TestPropertiesAddingModels runs the property test with models added mid-sequence: every
// answer of the gate must still match the reference, which reads the grown specs.
func TestPropertiesAddingModels(t *testing.T) {
	seeds, steps := 200, 2000
	if testing.Short() {
		seeds, steps = 40, 800
	}
	stats := map[string]int{}
	for seed := range uint64(seeds) {
		src := randSource{rand.New(rand.NewPCG(seed, 0xadd))}
		d := newDriver(t, src, stats)
		d.addModels = true
		d.run(steps)
	}
	for _, c := range []string{"added model", "added model while admitted", "dispatched"} {
		if stats[c] == 0 {
			t.Errorf("no step exercised %q: %v", c, stats)
		}
	}
}

func FuzzGateAddingModels(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x02\x03\x01\x02\x00\x01\x01\x05\x14\x01\x00\x00\x00\x01\x00\x14\x00\x01\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := newDriver(t, &byteSource{b: data}, map[string]int{})
		d.addModels = true
		d.run(len(data))
	})
}

// addModel adds a model to a random provider of both the gate and the reference (whose
// specs are the driver's).
func (d *driver) addModel() {
	p := d.src.intn(len(d.specs))
	ms := ModelSpec{Name: fmt.Sprintf("p%d-m%d", p, len(d.specs[p].Models)), Lanes: rarelyZero(d.src, 2)}
	d.last = fmt.Sprintf("add model %s lanes %d", ms.Name, ms.Lanes)
	want := len(d.specs[p].Models)
	if got := d.g.AddModel(p, ms); got != want {
		d.fatalf("AddModel = %d, want %d", got, want)
	}
	d.specs[p].Models = append(d.specs[p].Models, ms)
	d.stats["added model"]++
	if d.g.Running()+d.g.Queued() > 0 {
		d.stats["added model while admitted"]++
	}
	d.started(d.ref.dispatch(d.now))
}
