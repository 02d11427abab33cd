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
	// back within it; leases are renewed every third of it. Omitted → 10s; between 1s and
	// 5m.
	LeaseTTL Duration `yaml:"lease_ttl"`
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
)

func clusterDefaults(c *Cluster, omitted func(path string, zero bool) bool) {
	if omitted("cluster.lease_ttl", c.LeaseTTL == 0) {
		c.LeaseTTL = Duration(defaultLeaseTTL)
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
	return b.String()
}
