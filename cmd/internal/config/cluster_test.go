package config

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestClusterSection: SPEC §17's shape parses, lease_ttl and replica take their defaults,
// and the password stays out of the summary.
func TestClusterSection(t *testing.T) {
	base := "providers: [{name: demo, kind: fake, models: [{id: echo}]}]\nlisten: 127.0.0.1:9090\n"
	cfg, err := Parse("c.yaml", []byte(base+`cluster: {redis: {addr: "127.0.0.1:6379", password: "${SECRET_A}", db: 2, tls: true}}`), testEnv)
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Cluster
	if c == nil || c.Redis != (Redis{Addr: "127.0.0.1:6379", Password: secretA, DB: 2, TLS: true}) || c.Outage != OutageShare || c.LeaseTTL.D() != 10*time.Second {
		t.Fatalf("cluster %+v", c)
	}
	host, _ := os.Hostname()
	if got := cfg.ReplicaName(); got != host+":9090" {
		t.Errorf("default replica %q, want %q", got, host+":9090")
	}
	summary := strings.Join(cfg.Summary(), "\n")
	if strings.Contains(summary, secretA) || !strings.Contains(summary, "cluster: redis 127.0.0.1:6379 db 2 tls, password set, lease_ttl 10s") {
		t.Errorf("summary:\n%s", summary)
	}

	any0 := strings.Replace(base, "127.0.0.1:9090", "127.0.0.1:0", 1)
	if cfg, err := Parse("c.yaml", []byte(any0+"cluster: {redis: {addr: \"r:6379\"}}"), testEnv); err != nil ||
		cfg.ReplicaName() != fmt.Sprintf("%s:pid%d", host, os.Getpid()) {
		t.Errorf("replica of a gateway on any free port: %q, %v", cfg.ReplicaName(), err)
	}

	cfg, err = Parse("c.yaml", []byte(base+"cluster: {redis: {addr: \"redis:6379\"}, lease_ttl: 30s, replica: gw-a}"), testEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cluster.LeaseTTL.D() != 30*time.Second || cfg.ReplicaName() != "gw-a" {
		t.Errorf("explicit values: %+v, %s", cfg.Cluster, cfg.ReplicaName())
	}
	if _, err := Parse("c.yaml", []byte(base+"cluster: {lease_ttl: 10s}"), testEnv); err == nil ||
		!strings.Contains(err.Error(), "cluster.redis.addr: required") {
		t.Errorf("cluster without redis.addr: %v", err)
	}
	cfg, err = Parse("c.yaml", []byte(base), testEnv)
	if err != nil || cfg.Cluster != nil {
		t.Errorf("without cluster: %+v, %v", cfg.Cluster, err)
	}
}

// TestClusterNeedsRestart: a reload that changes cluster: keeps the section in force (the
// engine connects once, at start) and says a restart applies it, without showing the
// password.
func TestClusterNeedsRestart(t *testing.T) {
	base := "providers: [{name: demo, kind: fake, models: [{id: echo}]}]\n"
	old, err := Parse("c.yaml", []byte(base+`cluster: {redis: {addr: "127.0.0.1:6379", password: "${SECRET_A}"}}`), testEnv)
	if err != nil {
		t.Fatal(err)
	}
	next, err := Parse("c.yaml", []byte(base+`cluster: {redis: {addr: "127.0.0.1:6380"}, lease_ttl: 20s}`), testEnv)
	if err != nil {
		t.Fatal(err)
	}
	in, ch := Reloaded(old, next)
	if in.Cluster.Redis.Addr != "127.0.0.1:6379" || !slices.Contains(ch.Restart, "cluster") {
		t.Errorf("in force %+v, restart %v", in.Cluster, ch.Restart)
	}
	if strings.Contains(strings.Join(ch.Restart, " "), secretA) {
		t.Errorf("the password shown: %v", ch.Restart)
	}
	if _, ch := Reloaded(old, old); slices.Contains(ch.Restart, "cluster") {
		t.Errorf("an unchanged cluster: section needs a restart: %v", ch.Restart)
	}
}

// TestClusterOutageAndTimeout: cluster.outage defaults to share and takes strict;
// cluster.redis.timeout is 0 (the engine's default) or between 10ms and lease_ttl/2; a
// bad value is named with what it must be.
func TestClusterOutageAndTimeout(t *testing.T) {
	base := "providers: [{name: demo, kind: fake, models: [{id: echo}]}]\n"
	for _, tc := range []struct {
		section, outage, err string
		timeout              time.Duration
	}{
		{section: `{redis: {addr: "r:6379"}}`, outage: OutageShare},
		{section: `{redis: {addr: "r:6379"}, outage: strict}`, outage: OutageStrict},
		{section: `{redis: {addr: "r:6379", timeout: 1s}, lease_ttl: 3s}`, outage: OutageShare, timeout: time.Second},
		{section: `{redis: {addr: "r:6379", timeout: 1500ms}, lease_ttl: 3s}`, outage: OutageShare, timeout: 1500 * time.Millisecond},
		{section: `{redis: {addr: "r:6379"}, outage: lenient}`, err: `cluster.outage: must be "share" or "strict", got "lenient"`},
		{section: `{redis: {addr: "r:6379", timeout: 2s}, lease_ttl: 3s}`, err: "cluster.redis.timeout: must be 0 (lease_ttl/5) or between 10ms and lease_ttl/2 (1.5s), got 2s"},
		{section: `{redis: {addr: "r:6379", timeout: 5ms}}`, err: "cluster.redis.timeout: must be 0 (lease_ttl/5) or between 10ms and lease_ttl/2 (5s), got 5ms"},
	} {
		cfg, err := Parse("c.yaml", []byte(base+"cluster: "+tc.section), testEnv)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.section, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.section, err)
			continue
		}
		if c := cfg.Cluster; c.Outage != tc.outage || c.Redis.Timeout.D() != tc.timeout {
			t.Errorf("%s: outage %q timeout %s, want %q %s", tc.section, c.Outage, c.Redis.Timeout, tc.outage, tc.timeout)
		}
	}
}
