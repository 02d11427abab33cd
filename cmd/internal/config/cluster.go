package config

import (
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Cluster makes the replicas that name the same Redis share their limits (SPEC §17):
// max_running, every provider's lanes and rate_limit and every model's model lanes, in
// Redis (cmd/internal/cluster; docs/replicas.md says what is not shared). Nil (no cluster: in the
// file): the gateway is alone, and nothing changes.
type Cluster struct {
	Redis Redis `yaml:"redis"`
	// LeaseTTL is how long a lease lives unrenewed: a replica that dies gives its lanes
	// back within it; leases are renewed every fifth of it. Omitted → 10s; between 1s and
	// 5m.
	LeaseTTL Duration `yaml:"lease_ttl"`
	// Outage is the rule a replica runs on while Redis does not answer it: "share" (its
	// share of every limit at once, less what its last view of the cluster showed the
	// others holding beyond theirs) or "strict" (only the slots it holds for lease_ttl,
	// then min(share, held) until the longest run_timeout has passed, then its share).
	// Omitted → "share".
	Outage string `yaml:"outage"`
	// Replica names this gateway among the replicas: printable ASCII without spaces or
	// '|', at most 200 bytes, and unique among them. "" → ReplicaName's default, the host
	// name and the listen port (known only once --listen has been applied).
	Replica string `yaml:"replica"`
}

// Redis is the server the replicas share.
type Redis struct {
	// Addr is its host:port. Required.
	Addr string `yaml:"addr"`
	// Password is sent with AUTH; "" sends none. Like a key, it never appears in an error,
	// the summary or a log line.
	Password string `yaml:"password"`
	// DB is the database to select; 0 (Redis's default) when omitted; 0 or more.
	DB int `yaml:"db"`
	// Timeout bounds one round trip to Redis: a Redis that answers slower is taken for an
	// absent one (the outage rule). Omitted or 0 → lease_ttl/5, at most 2s; otherwise
	// between 10ms and lease_ttl/2.
	Timeout Duration `yaml:"timeout"`
	// TLS connects with TLS (the engine takes the tls.Config; the default one verifies the
	// server against the system's roots).
	TLS bool `yaml:"tls"`
}

// Defaults and bounds of SPEC §17 owned here.
const (
	defaultLeaseTTL = 10 * time.Second
	minLeaseTTL     = time.Second
	maxLeaseTTL     = 5 * time.Minute
	maxReplicaName  = 200
	minRedisTimeout = 10 * time.Millisecond
)

// The values of cluster.outage.
const (
	OutageShare  = "share"
	OutageStrict = "strict"
)

func clusterDefaults(c *Cluster, omitted func(path string, zero bool) bool) {
	if omitted("cluster.lease_ttl", c.LeaseTTL == 0) {
		c.LeaseTTL = Duration(defaultLeaseTTL)
	}
	if omitted("cluster.outage", c.Outage == "") {
		c.Outage = OutageShare
	}
}

func validateCluster(c *Cluster, p *problems) {
	if c.Redis.Addr == "" {
		p.add("cluster.redis.addr", "required: the Redis the replicas share, as host:port")
	} else if host, port, err := net.SplitHostPort(c.Redis.Addr); err != nil || host == "" || port == "" {
		p.add("cluster.redis.addr", "must be host:port, e.g. 127.0.0.1:6379, got %q", c.Redis.Addr)
	}
	if c.Redis.DB < 0 {
		p.add("cluster.redis.db", "must be 0 or more, got %d", c.Redis.DB)
	}
	if c.LeaseTTL.D() < minLeaseTTL || c.LeaseTTL.D() > maxLeaseTTL {
		p.add("cluster.lease_ttl", "must be between %s and %s, got %s", minLeaseTTL, maxLeaseTTL, c.LeaseTTL)
	}
	if t := c.Redis.Timeout.D(); t != 0 && (t < minRedisTimeout || t > c.LeaseTTL.D()/2) {
		p.add("cluster.redis.timeout", "must be 0 (lease_ttl/5) or between %s and lease_ttl/2 (%s), got %s",
			minRedisTimeout, c.LeaseTTL.D()/2, c.Redis.Timeout)
	}
	if c.Outage != OutageShare && c.Outage != OutageStrict {
		p.add("cluster.outage", "must be %q or %q, got %q", OutageShare, OutageStrict, c.Outage)
	}
	if msg := replicaProblem(c.Replica); c.Replica != "" && msg != "" {
		p.add("cluster.replica", "%s", msg)
	}
}

// replicaProblem says what is wrong with a replica name, or "".
func replicaProblem(name string) string {
	if len(name) > maxReplicaName {
		return "at most 200 bytes"
	}
	for i := range len(name) {
		if c := name[i]; c <= ' ' || c > '~' || c == '|' {
			return "may contain only printable ASCII without spaces or '|'"
		}
	}
	return ""
}

// ReplicaName is cluster.replica, or by default the host name and the port of Listen
// ("gw-1:8080"): unique among replicas on different hosts, and among replicas of one host
// on different ports. A listen port of 0 (any free port) is no name: the process id
// stands in for it ("gw-1:pid4242"), unique on one host while the process lives.
func (c *Config) ReplicaName() string {
	if c.Cluster != nil && c.Cluster.Replica != "" {
		return c.Cluster.Replica
	}
	host, err := os.Hostname()
	if err != nil || replicaProblem(host) != "" || host == "" {
		host = "localhost"
	}
	_, port, err := net.SplitHostPort(c.Listen)
	if err != nil || port == "0" {
		port = "pid" + strconv.Itoa(os.Getpid())
	}
	return host + ":" + port
}

func (c *Cluster) summary() string {
	var b strings.Builder
	b.WriteString("cluster: redis " + c.Redis.Addr)
	if c.Redis.DB != 0 {
		b.WriteString(" db " + strconv.Itoa(c.Redis.DB))
	}
	if c.Redis.TLS {
		b.WriteString(" tls")
	}
	if c.Redis.Password != "" {
		b.WriteString(", password set")
	}
	b.WriteString(", lease_ttl " + c.LeaseTTL.String())
	if c.Redis.Timeout != 0 {
		b.WriteString(", timeout " + c.Redis.Timeout.String())
	}
	if c.Outage == OutageStrict {
		b.WriteString(", outage strict")
	}
	return b.String()
}
