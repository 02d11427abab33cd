package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// keyspace names every key the engine uses. All of them carry one hash tag ({prefix}), so
// a multi-key script works unchanged on a Redis Cluster, where every key of one script must
// live in one slot.
type keyspace struct{ tag string }

func newKeyspace(prefix string) keyspace { return keyspace{tag: "{" + prefix + "}"} }

func (k keyspace) scope(name string) string  { return k.tag + ":lease:" + name }
func (k keyspace) bucket(name string) string { return k.tag + ":bucket:" + name }
func (k keyspace) cool(name string) string   { return k.tag + ":cool:" + name }
func (k keyspace) lanes(name string) string  { return k.tag + ":lanes:" + name }
func (k keyspace) affinity() string          { return k.tag + ":affinity" }
func (k keyspace) affinityUsed() string      { return k.tag + ":affinity:used" }
func (k keyspace) affinityAt() string        { return k.tag + ":affinity:at:" }
func (k keyspace) replicas() string          { return k.tag + ":replicas" }
func (k keyspace) scopes() string            { return k.tag + ":scopes" }
func (k keyspace) scopePrefix() string       { return k.tag + ":lease:" }
func (k keyspace) incarnations() string      { return k.tag + ":incarnations" }
func (k keyspace) events() string            { return k.tag + ":events" }

// maxName bounds scope, bucket and cooldown names: they become Redis keys.
const maxName = 200

// checkName reports what is wrong with a scope, bucket, cooldown or replica name, or nil:
// 1 to 200 printable ASCII bytes without spaces or '|', which separates a lease's fields.
func checkName(what, name string) error {
	if name == "" || len(name) > maxName {
		return fmt.Errorf("%s name must be 1 to %d bytes, got %d", what, maxName, len(name))
	}
	for i := range len(name) {
		if c := name[i]; c <= ' ' || c > '~' || c == '|' {
			return fmt.Errorf("%s name %q: byte %d is not printable ASCII without spaces or '|'", what, name, i)
		}
	}
	return nil
}

// member is one lease's entry in each scope it holds: "replica|incarnation|seq". The
// incarnation (random per process) keeps a restarted replica's calls apart from its
// predecessor's, whose leases may not have expired yet.
func member(replica, incarnation string, seq uint64) string {
	return fmt.Sprintf("%s|%s|%d", replica, incarnation, seq)
}

// memberReplica is the replica that holds a lease entry, or "" when m is not one.
func memberReplica(m string) string {
	r, rest, ok := strings.Cut(m, "|")
	if !ok || !strings.Contains(rest, "|") {
		return ""
	}
	return r
}

// EventKind says what an Event reports.
type EventKind string

const (
	// Freed: lease slots came back in Scopes (a release, or expired leases reclaimed);
	// a replica with calls waiting for one of them should try its head of line again.
	Freed EventKind = "freed"
	// Cooled: the cooldown Name runs for For more (a key cooled on some replica).
	Cooled EventKind = "cooled"
	// Learned: a replica learned that scope Name takes Lanes lanes.
	Learned EventKind = "lanes"
	// Poll: nothing was heard, but a notice may have been lost (Redis away, a dropped
	// subscription): try the heads of line again anyway. Sent every poll interval.
	Poll EventKind = "poll"
	// Changed: this replica's phase changed (Status has the new one).
	Changed EventKind = "changed"
	// Resubscribed: this replica's subscription to the notices dropped and is made again
	// (Redis itself may never have been away): what was announced meanwhile was not
	// heard, so the shared state in force should be read.
	Resubscribed EventKind = "resubscribed"
)

// Event is one notice to the gateway. Freed, Cooled and Learned come from any replica
// through Redis pub/sub (and from this one at once); Poll, Changed and Resubscribed from
// this replica.
type Event struct {
	Kind    EventKind
	Replica string        // who sent it
	Scopes  []string      // Freed
	Name    string        // Cooled: the cooldown; Learned: the scope
	For     time.Duration // Cooled
	Lanes   int           // Learned
	Redis   bool          // Changed: Redis answers in the new phase (Status.Redis)
}

// wireEvent is an Event as the scripts publish it (lua/*.lua): JSON, durations in ms.
type wireEvent struct {
	Kind    EventKind `json:"kind"`
	Replica string    `json:"replica"`
	Scopes  []string  `json:"scopes,omitempty"`
	Name    string    `json:"name,omitempty"`
	ForMS   int64     `json:"for_ms,omitempty"`
	Lanes   int       `json:"lanes,omitempty"`
}

// maxEventBytes bounds a notice read from the channel: anyone who can write to the Redis
// can publish on it.
const maxEventBytes = 64 << 10

var errBadEvent = errors.New("cluster: bad event")

// decodeEvent parses one pub/sub payload; only the kinds replicas publish are accepted,
// each with the fields it needs.
func decodeEvent(payload string) (Event, error) {
	if len(payload) > maxEventBytes {
		return Event{}, fmt.Errorf("%w: %d bytes", errBadEvent, len(payload))
	}
	var w wireEvent
	if err := json.Unmarshal([]byte(payload), &w); err != nil {
		return Event{}, fmt.Errorf("%w: %v", errBadEvent, err)
	}
	if checkName("replica", w.Replica) != nil {
		return Event{}, fmt.Errorf("%w: bad replica", errBadEvent)
	}
	ev := Event{Kind: w.Kind, Replica: w.Replica, Name: w.Name, Lanes: w.Lanes}
	switch w.Kind {
	case Freed:
		if len(w.Scopes) == 0 {
			return Event{}, fmt.Errorf("%w: freed without scopes", errBadEvent)
		}
		for _, s := range w.Scopes {
			if checkName("scope", s) != nil {
				return Event{}, fmt.Errorf("%w: bad scope", errBadEvent)
			}
		}
		ev.Scopes = w.Scopes
	case Cooled:
		if checkName("cooldown", w.Name) != nil || w.ForMS <= 0 || w.ForMS > maxCoolMS {
			return Event{}, fmt.Errorf("%w: bad cooled", errBadEvent)
		}
		ev.For = time.Duration(w.ForMS) * time.Millisecond
	case Learned:
		if checkName("scope", w.Name) != nil || w.Lanes <= 0 {
			return Event{}, fmt.Errorf("%w: bad lanes", errBadEvent)
		}
	default:
		return Event{}, fmt.Errorf("%w: kind %q", errBadEvent, w.Kind)
	}
	return ev, nil
}

// maxCoolMS bounds a cooldown: a day, far beyond max_key_cooldown's useful range.
const maxCoolMS = 24 * 3600 * 1000
