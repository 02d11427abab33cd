package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/cmd/internal/config"
)

// startReloadable is an App whose reload reads *next.
func startReloadable(t *testing.T, yaml string, next *string) *App {
	t.Helper()
	parse := func(y string) (*config.Config, error) {
		return config.Parse("reload.yaml", []byte(y), func(string) (string, bool) { return "", false })
	}
	cfg, err := parse(yaml)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(context.Background(), cfg, Options{StateDir: t.TempDir(), Logger: zerolog.Nop(), DiscoveryTimeout: time.Second,
		Reload: func() (*config.Config, error) { return parse(*next) }})
	if err != nil {
		t.Fatal(err)
	}
	drainAtEnd(t, a)
	return a
}

// TestReloadKeepsAdaptersAndListedModels: a provider whose adapter settings stay keeps its
// adapter across a reload that changes its lanes; one whose keys change gets a new one; a
// backend whose listing fails at the reload keeps the models it listed before; an invalid
// file changes nothing.
func TestReloadKeepsAdaptersAndListedModels(t *testing.T) {
	b := newBackend(t, "listed-1")
	yaml := func(lanes int, key string) string {
		return fmt.Sprintf("providers:\n  - name: p\n    kind: openai\n    base_url: %s/v1\n    keys: [%s]\n    lanes: %d\n    models: [{id: own}]\n", b.URL, key, lanes)
	}
	next := yaml(2, "key-1")
	a := startReloadable(t, next, &next)
	first := a.backends["p"].backend
	if got := ids(a); !slices.Equal(got, []string{"p/listed-1", "p/own"}) {
		t.Fatalf("models at start: %v", got)
	}

	next = yaml(3, "key-1")
	b.mu.Lock()
	b.fail = true // the listing fails at this reload
	b.mu.Unlock()
	ch, err := a.Reload(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if a.backends["p"].backend != first {
		t.Error("a reload that changed only lanes built a new adapter")
	}
	if len(ch.Changed) != 1 || !slices.Contains(ch.Changed[0].Changes, "lanes: 2 → 3") {
		t.Errorf("changes: %+v", ch)
	}
	if got := ids(a); !slices.Equal(got, []string{"p/listed-1", "p/own"}) {
		t.Fatalf("a failed listing at the reload removed models: %v", got)
	}
	if st := a.Gateway.State(); st.Providers[0].Lanes != 3 {
		t.Fatalf("lanes: %+v", st.Providers[0])
	}

	next = yaml(3, "key-2")
	if _, err := a.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.backends["p"].backend == first {
		t.Error("a reload that replaced the key kept the adapter with the old key")
	}

	next = "providers: [{name: p, kind: openai, lanes: -3}]"
	_, err = a.Reload(context.Background())
	var bad *InvalidConfig
	if !errors.As(err, &bad) || len(bad.Problems()) == 0 {
		t.Fatalf("an invalid file: %v", err)
	}
	if st := a.Gateway.State(); st.Providers[0].Lanes != 3 || a.Config().Providers[0].Keys[0] != "key-2" {
		t.Fatalf("an invalid file changed the gateway: %+v", st.Providers[0])
	}
}
