package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/cmd/internal/cluster"
	"github.com/tollgate/tollgate/cmd/internal/config"
)

// shared is this replica's lease engine (cmd/internal/cluster), which the gateway drives as
// its replicas.Shared, and the way its events reach the gateway: actors must not import a
// Redis client, and the engine knows no actor, so the events meet the gateway here.
type shared struct {
	e       *cluster.Engine
	replica string
	gw      atomic.Pointer[actors.Gateway] // set once the gateway runs; the engine's events go to it
	// redis is whether the engine's shared state answered at its last phase change: when
	// it answers again, the gateway reads what it missed.
	redis atomic.Bool
}

// newShared connects this replica to the cluster's Redis (SPEC §17). A Redis that does not
// answer is no error: the engine starts on its shares of every limit and joins when Redis
// answers (docs/architecture.md, the failure table).
func newShared(ctx context.Context, cfg *config.Config, log zerolog.Logger) (*shared, error) {
	c := cfg.Cluster
	o := cluster.Options{Addr: c.Redis.Addr, Password: c.Redis.Password, DB: c.Redis.DB,
		Replica: cfg.ReplicaName(), LeaseTTL: c.LeaseTTL.D(), MaxRun: maxRun(cfg), Logger: log,
		Timeout: c.Redis.Timeout.D(), Strict: c.Outage == config.OutageStrict}
	if c.Redis.TLS {
		host, _, _ := net.SplitHostPort(c.Redis.Addr) // validated by the config
		o.TLS = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	s := &shared{replica: o.Replica}
	o.Notify = s.notify
	e, err := cluster.New(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	s.e = e
	return s, nil
}

// maxRun is the longest one call can hold its leases: the longest run_timeout plus the
// kill grace of a CLI (the outage rule counts calls started before an outage this long).
func maxRun(cfg *config.Config) (d time.Duration) {
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		d = max(d, p.RunTimeout.D()+p.KillGrace.D())
	}
	return max(d, cfg.Cluster.LeaseTTL.D())
}

// notify hands an engine event to the gateway: every kind may mean a slot is free now. A
// replica's own cooldowns and learned lanes come back too; they are in force here already.
// Before the gateway is set, a phase change is left to setGateway, which reads once more if
// Redis answers by then.
func (s *shared) notify(ev cluster.Event) {
	g := s.gw.Load()
	if g == nil {
		return
	}
	if ev.Kind == cluster.Changed {
		if was := s.redis.Swap(ev.Redis); ev.Redis && !was {
			g.ReadShared() // back from an outage: what was announced meanwhile was not heard
		}
	}
	switch ev.Kind {
	case cluster.Freed:
		g.LeaseNotice(ev.Scopes)
	case cluster.Poll, cluster.Changed:
		g.LeaseNotice(nil)
	case cluster.Resubscribed:
		g.ReadShared() // the notices announced while the subscription was down were lost
		g.LeaseNotice(nil)
	case cluster.Cooled:
		if ev.Replica != s.replica {
			g.Cooled(ev.Name, ev.For)
		}
	case cluster.Learned:
		if ev.Replica != s.replica {
			g.LanesLearned(ev.Name, ev.Lanes, "replica "+ev.Replica)
		}
	}
}

// setGateway sends the engine's events to g from now on. A Redis that answered before
// (at the start, or back from an outage) was not seen by notify: if it answers now and was
// last seen away, g reads the shared state, as at a rejoin.
func (s *shared) setGateway(g *actors.Gateway) {
	s.gw.Store(g)
	if up := s.e.Status().Redis; up && !s.redis.Swap(true) {
		g.ReadShared()
	}
}
