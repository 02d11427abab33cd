package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/actors/replicas"
	"github.com/tollgate/tollgate/cmd/internal/app"
	"github.com/tollgate/tollgate/cmd/internal/cluster/redistest"
	"github.com/tollgate/tollgate/cmd/internal/serve"
)

// clusterLoad is the cluster scenario (SPEC §17): three replicas in this process share one real
// redis-server and the multi setup's fake backends (so the call meter sees all three).
// A burst of 50 spread over them, then steady load with Redis stopped and restarted
// under it: no provider's lanes, model's lanes or max_running exceeded at any instant,
// counted at the backends. Without redis-server it reports that it did not run.
func clusterLoad(ctx context.Context, o runOpts) []*result {
	dir, err := os.MkdirTemp("", "tollgate-load-redis-")
	if err != nil {
		r := newResult("cluster", "three replicas")
		r.breach("temp dir: %v", err)
		return []*result{r}
	}
	defer os.RemoveAll(dir)
	rs, err := redistest.Launch(dir)
	if errors.Is(err, exec.ErrNotFound) {
		r := newResult("cluster", "three replicas (not run: redis-server is not installed)")
		r.Figures["not_run"] = 1
		return []*result{r}
	}
	if err != nil {
		r := newResult("cluster", "three replicas")
		r.breach("%v", err)
		return []*result{r}
	}
	defer rs.Stop()
	s := multi(20, 200, answer)
	for i := range s.providers {
		// Without Redis a replica counts what its last view showed the others holding
		// beyond their shares for the longest run_timeout after it saw them
		// (docs/architecture.md); the scenario's calls are short, and its outage brief.
		s.providers[i].runTimeout = 5 * time.Second
	}
	s.name = "multi, three replicas"
	s.cluster = clusterYAML(rs.Addr(), "r1")
	return []*result{runLocal(ctx, "cluster", s, 150, func(e *env, r *result) {
		reps, err := e.addReplicas(ctx, rs.Addr(), "r2", "r3")
		defer closeReplicas(reps) // before runLocal's goroutine check
		if err != nil {
			r.breach("%v", err)
			return
		}
		envs := []*env{e}
		for _, rp := range reps {
			envs = append(envs, rp.env)
		}
		if !allCluster(ctx, envs, 10*time.Second, func(c *replicas.Health) bool { return c.ReplicasAlive == 3 && c.Phase == "shared" }) {
			r.breach("the three replicas never all saw each other")
			return
		}
		clusterBurst(ctx, envs, r)
		clusterOutage(ctx, envs, rs, r)
		clusterQuietOutage(ctx, envs, rs, r)
	})}
}

func clusterYAML(addr, replica string) string {
	return fmt.Sprintf("cluster: {redis: {addr: %q}, lease_ttl: 1s, replica: %s}", addr, replica)
}

// replica is one more gateway of the setup, on the same backends and meter as e's.
type replica struct {
	env    *env
	app    *app.App
	server *serve.Server
	served chan struct{}
}

// addReplicas starts a gateway named each of names beside e's, sharing its Redis.
func (e *env) addReplicas(ctx context.Context, addr string, names ...string) ([]*replica, error) {
	var out []*replica
	for _, name := range names {
		s := e.setup
		s.cluster = clusterYAML(addr, name)
		var urls []string
		for _, b := range e.local.backends {
			urls = append(urls, b.http.URL)
		}
		cfg, err := parseSetup(s, urls)
		if err != nil {
			return out, err
		}
		backends, err := e.local.clients()
		if err != nil {
			return out, err
		}
		a, err := app.New(ctx, cfg, app.Options{Logger: zerolog.Nop(), Backends: backends, StateDir: filepath.Join(e.local.stateDir, name)})
		if err != nil {
			return out, fmt.Errorf("replica %s: %w", name, err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			_ = a.Drain(ctx)
			return out, fmt.Errorf("replica %s: listen: %w", name, err)
		}
		rp := &replica{env: &env{setup: e.setup, base: "http://" + ln.Addr().String(), client: e.client},
			app: a, server: a.Server(), served: make(chan struct{})}
		go func() { // exits when closeReplicas shuts the server down
			defer close(rp.served)
			_ = rp.server.Serve(ln)
		}()
		out = append(out, rp)
	}
	return out, nil
}

func closeReplicas(reps []*replica) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, rp := range reps {
		_ = rp.server.Shutdown(ctx)
		<-rp.served
		_ = rp.app.Drain(ctx)
	}
}

// allCluster polls every replica's /admin/state until cond holds for all of them.
func allCluster(ctx context.Context, envs []*env, within time.Duration, cond func(*replicas.Health) bool) bool {
	for _, e := range envs {
		if _, err := e.waitState(ctx, within, func(st actors.AdminState) bool { return st.Cluster != nil && cond(st.Cluster) }); err != nil {
			return false
		}
	}
	return true
}

// clusterBurst sends 50 calls at once, spread over the replicas: every one fits some
// replica's queue, so all must be served.
func clusterBurst(ctx context.Context, envs []*env, r *result) {
	ids := envs[0].setup.ids()
	var wg sync.WaitGroup
	outs := make([][]outcome, len(envs))
	for k, e := range envs {
		var calls []call
		for i := k; i < 50; i += len(envs) {
			calls = append(calls, call{model: ids[i%len(ids)], stream: i%2 == 0, tag: fmt.Sprintf("c%d", i)})
		}
		wg.Go(func() { outs[k] = fire(ctx, e, calls, nil) })
	}
	wg.Wait()
	var all []outcome
	for _, o := range outs {
		all = append(all, o...)
	}
	r.add(all)
	if n := count(all, ok); n != 50 {
		r.breach("burst over three replicas: %d of 50 served; all fit the replicas' queues", n)
	}
}

// clusterOutage keeps 12 clients busy on the replicas while Redis is stopped and started
// again: the replicas fall back to their shares and come back to shared leases, every call
// is served, and the meter (checked by runLocal) sees no cap exceeded.
func clusterOutage(ctx context.Context, envs []*env, rs *redistest.Server, r *result) {
	stop := busyReplicas(ctx, envs, 12)
	pause(ctx, 500*time.Millisecond)
	rs.Stop()
	lost := time.Now()
	if !allCluster(ctx, envs, 10*time.Second, func(c *replicas.Health) bool { return c.Redis == "down" }) {
		r.breach("the replicas never noticed Redis stopped")
	}
	r.Figures["outage_noticed_ms"] = ms(time.Since(lost))
	pause(ctx, 2*time.Second) // holding (lease_ttl), then the shares
	if err := rs.Restart(); err != nil {
		r.breach("restart redis-server: %v", err)
	}
	back := time.Now()
	if !allCluster(ctx, envs, 15*time.Second, func(c *replicas.Health) bool { return c.Phase == "shared" && c.ReplicasAlive == 3 }) {
		r.breach("the replicas never came back to shared leases")
	}
	r.Figures["shared_again_ms"] = ms(time.Since(back))
	pause(ctx, time.Second)
	outs, served := stop()
	r.add(outs)
	if n := count(outs, ok); n != len(outs) {
		r.breach("%d of %d calls served across the outage: they should wait in their queues, never be refused", n, len(outs))
	}
	total := 0
	for _, n := range served {
		total += n
	}
	// How far each replica's share of the served calls strays from an even third, with
	// equal clients on each: the cross-replica fairness drift.
	drift := 0.0
	for _, n := range served {
		if total > 0 {
			drift = max(drift, abs(float64(n)/float64(total)-1/float64(len(envs))))
		}
	}
	r.Figures["outage_calls_served"] = float64(total)
	r.Figures["fairness_drift"] = drift
}

// busyReplicas starts clients calling the replicas in turn, each one call after another. The
// function it returns stops them and returns every outcome, and how many calls each replica
// served, once the last call is answered.
func busyReplicas(ctx context.Context, envs []*env, clients int) (stop func() (outs []outcome, served []int)) {
	ids := envs[0].setup.ids()
	done := make(chan struct{})
	var mu sync.Mutex
	var outs []outcome
	served := make([]int, len(envs))
	var wg sync.WaitGroup
	for i := range clients {
		e := envs[i%len(envs)]
		wg.Go(func() { // exits when done closes
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				o := send(ctx, e.client, e.base, call{model: ids[(i+n)%len(ids)], tag: fmt.Sprintf("o%d-%d", i, n)})
				mu.Lock()
				outs = append(outs, o)
				if ok(o) {
					served[i%len(envs)]++
				}
				mu.Unlock()
			}
		})
	}
	return func() ([]outcome, []int) {
		close(done)
		wg.Wait()
		return outs, served
	}
}

// clusterQuietOutage stops Redis under idle replicas and sends each one call at once, to
// alpha/a1 (3 model lanes, so each of the three has a share of 1 of every scope it needs):
// each must serve it on its share within lease_ttl (1 s) + 1 s of the loss, not wait for
// Redis (SPEC §17: never a stall of the whole cluster). Redis is started again after.
//
// Idle means idle in every replica's view, which the outage rule starts from: Redis holds
// no lease, and each replica has had a heartbeat since. A view from the busy stage before
// would rightly hold a replica back until those calls' deadlines (run_timeout).
func clusterQuietOutage(ctx context.Context, envs []*env, rs *redistest.Server, r *result) {
	if !allCluster(ctx, envs, 10*time.Second, func(c *replicas.Health) bool {
		return c.Phase == "shared" && c.RunningCluster != nil && *c.RunningCluster == 0
	}) {
		r.breach("quiet outage: the replicas were not all on shared leases, with nothing running, before it")
		return
	}
	quiet := time.Now()
	if !allCluster(ctx, envs, 10*time.Second, func(c *replicas.Health) bool {
		return c.LastHeartbeat != nil && c.LastHeartbeat.After(quiet)
	}) {
		r.breach("quiet outage: a replica had no heartbeat after the cluster was quiet")
		return
	}
	rs.Stop()
	lost := time.Now()
	took := make([]time.Duration, len(envs))
	outs := make([]outcome, len(envs))
	var wg sync.WaitGroup
	for k, e := range envs {
		wg.Go(func() {
			outs[k] = send(ctx, e.client, e.base, call{model: "alpha/a1", tag: fmt.Sprintf("q%d", k)})
			took[k] = time.Since(lost)
		})
	}
	wg.Wait()
	r.add(outs)
	most := time.Duration(0)
	for k, o := range outs {
		most = max(most, took[k])
		if !ok(o) {
			r.breach("quiet outage: replica %d did not serve its call (status %d)", k+1, o.status)
		}
	}
	r.Figures["quiet_outage_served_ms"] = ms(most)
	if most > 2*time.Second {
		r.breach("quiet outage: the last replica served %s after Redis stopped, beyond lease_ttl + 1s", most.Round(time.Millisecond))
	}
	if err := rs.Restart(); err != nil {
		r.breach("restart redis-server: %v", err)
	}
	if !allCluster(ctx, envs, 15*time.Second, func(c *replicas.Health) bool { return c.Phase == "shared" && c.ReplicasAlive == 3 }) {
		r.breach("the replicas never came back to shared leases after the quiet outage")
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
