package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/actors/replicas"
)

// The multi-process tests run this test binary again as a replica (childMain, from
// TestMain), configured by environment variables.
const (
	childEnv     = "TOLLGATE_CLUSTER_CHILD" // "hammer" or "hold"
	childAddr    = "TOLLGATE_CLUSTER_ADDR"
	childReplica = "TOLLGATE_CLUSTER_REPLICA"
	childClaim   = "TOLLGATE_CLUSTER_CLAIM" // scopes "name:limit,..." then optionally ";bucket:perMinute:burst"
	childMeter   = "TOLLGATE_CLUSTER_METER" // the parent's meter URL (hammer)
	childFor     = "TOLLGATE_CLUSTER_FOR"   // how long to hammer
)

// childMain is a replica process: "hammer" claims and releases from 4 goroutines for
// TOLLGATE_CLUSTER_FOR, telling the parent's meter when each call starts and ends;
// "hold" takes the claim's full limit, says "held", and waits to be killed (it exits by
// itself after a minute, should the parent be gone).
func childMain() int {
	o := Options{Addr: os.Getenv(childAddr), Replica: os.Getenv(childReplica), LeaseTTL: testTTL,
		MaxRun: 2 * testTTL, Logger: zerolog.New(os.Stderr).Level(zerolog.WarnLevel)}
	e, err := New(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer e.Close()
	claim, err := parseChildClaim(os.Getenv(childClaim))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	switch os.Getenv(childEnv) {
	case "hold":
		for range claim.Scopes[0].Limit {
			if _, err := e.acquireOne(context.Background(), claim); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		fmt.Println("held")
		work(time.Minute)
		return 0
	case "hammer":
		d, _ := time.ParseDuration(os.Getenv(childFor))
		meter := os.Getenv(childMeter)
		scopes, _ := scopesOf(&claim)
		names := strings.Join(scopes, ",")
		end := time.Now().Add(d)
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(g)))
				for time.Now().Before(end) {
					l, err := e.acquireOne(context.Background(), claim)
					if err != nil {
						work(time.Millisecond)
						continue
					}
					get(meter + "/enter?s=" + names)
					work(time.Duration(r.IntN(3000)) * time.Microsecond)
					get(meter + "/leave?s=" + names)
					l.Release()
				}
			})
		}
		wg.Wait()
		return 0
	}
	return 2
}

func get(url string) {
	resp, err := http.Get(url)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}

func parseChildClaim(s string) (replicas.Claim, error) {
	var c replicas.Claim
	scopes, bucket, _ := strings.Cut(s, ";")
	for _, sc := range strings.Split(scopes, ",") {
		if sc == "" {
			continue
		}
		name, limit, _ := strings.Cut(sc, ":")
		n, err := strconv.Atoi(limit)
		if err != nil {
			return c, fmt.Errorf("claim %q: %w", s, err)
		}
		c.Scopes = append(c.Scopes, replicas.Scope{Name: name, Limit: n})
	}
	if bucket != "" {
		f := strings.Split(bucket, ":")
		if len(f) != 3 {
			return c, fmt.Errorf("bucket %q: want name:perMinute:burst", bucket)
		}
		pm, err1 := strconv.Atoi(f[1])
		burst, err2 := strconv.Atoi(f[2])
		if err := errors.Join(err1, err2); err != nil {
			return c, err
		}
		c.Buckets = append(c.Buckets, replicas.Bucket{Name: f[0], PerMinute: pm, Burst: burst, Cost: 1})
	}
	return c, nil
}

// child starts this test binary as a replica; it is killed when the test ends.
func child(t *testing.T, s *redisServer, mode, replica, claim string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, childAddr+"="+s.addr(), childReplica+"="+replica, childClaim+"="+claim)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// meterServer is the parent's meter as an HTTP backend the children call; it also keeps
// the time of every start.
func meterServer(t *testing.T, m *meter) (*httptest.Server, func() []time.Time) {
	var mu sync.Mutex
	var starts []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scopes := strings.Split(r.URL.Query().Get("s"), ",")
		switch r.URL.Path {
		case "/enter":
			m.enter(scopes)
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
		case "/leave":
			m.leave(scopes)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), starts...)
	}
}

// hammerProcesses runs three replica processes hammering claim for two seconds, and
// waits for them.
func hammerProcesses(t *testing.T, s *redisServer, meter, claim string) {
	t.Helper()
	var cmds []*exec.Cmd
	for i := range 3 {
		cmd := child(t, s, "hammer", fmt.Sprintf("proc%d", i), claim, childMeter+"="+meter, childFor+"=2s")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("replica process: %v", err)
		}
	}
}

// TestProcessesNeverExceed: three replica processes, four goroutines each, claiming the
// same scopes for two seconds: the backend (the meter) never sees more than a limit.
func TestProcessesNeverExceed(t *testing.T) {
	s := startRedis(t)
	limits := map[string]int{"gateway": 4, "p/x": 3, "m/x": 2}
	m := newMeter()
	m.limits = limits
	srv, _ := meterServer(t, m)
	hammerProcesses(t, s, srv.URL, "gateway:4,p/x:3,m/x:2")
	m.check(t, limits)
	if m.mostOf("m/x") < limits["m/x"] || m.started < 100 {
		t.Errorf("%d calls, at most %d on m/x: the processes did not contend", m.started, m.mostOf("m/x"))
	}
}

// TestProcessesShareABucket: three processes draw on one rpm bucket (600 a minute, burst
// 5) for two seconds: together they start no more than the burst plus the rate over the
// time they ran, and nearly that many.
func TestProcessesShareABucket(t *testing.T) {
	s := startRedis(t)
	m := newMeter()
	srv, starts := meterServer(t, m)
	hammerProcesses(t, s, srv.URL, ";rpm/p:600:5")
	got := starts()
	if len(got) < 2 {
		t.Fatalf("%d starts", len(got))
	}
	span := got[len(got)-1].Sub(got[0])
	most := 5 + int(span.Seconds()*10) + 1
	if len(got) > most {
		t.Errorf("%d starts over %s: more than burst 5 + 10/s (%d)", len(got), span, most)
	}
	if least := int(span.Seconds() * 10 * 0.8); len(got) < least {
		t.Errorf("%d starts over %s: the bucket let through less than 80%% of its rate (%d)", len(got), span, least)
	}
	t.Logf("%d starts over %s (at most %d)", len(got), span, most)
}

// TestKilledReplicaGivesBack: a replica process holding every slot of a scope is killed
// with SIGKILL; its slots come back to another replica within lease_ttl (plus the poll
// interval an actor would retry on), never before the leases expire, except its share:
// a replica silent since its heartbeat may be cut off and serving on it, so the share is
// kept free until lease_ttl + MaxRun after that heartbeat.
func TestKilledReplicaGivesBack(t *testing.T) {
	s := startRedis(t)
	e, ev := newEngine(t, s, "survivor")
	cmd := child(t, s, "hold", "doomed", "p/cli:2")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("child: %q, %v", line, err)
	}
	c := replicas.Claim{Scopes: []replicas.Scope{{Name: "p/cli", Limit: 2}}}
	var busy *replicas.Busy
	if _, err := e.acquireOne(context.Background(), c); !errors.As(err, &busy) {
		t.Fatalf("the other replica's slots were not counted: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	eventually(t, testTTL+time.Second, "the killed replica's slots back", func() bool {
		_, err := e.acquireOne(context.Background(), c)
		return err == nil
	})
	t.Logf("slots back %s after SIGKILL (lease_ttl %s)", time.Since(killed).Round(time.Millisecond), testTTL)
	if _, err := e.acquireOne(context.Background(), c); !errors.As(err, &busy) {
		t.Fatalf("the silent replica's share (1 of 2) was not kept free: %v", err)
	}
	eventually(t, testTTL+2*testTTL+time.Second, "the killed replica's share back", func() bool {
		_, err := e.acquireOne(context.Background(), c)
		return err == nil
	})
	if d := time.Since(killed); d < testTTL+2*testTTL-testTTL/2 {
		t.Errorf("its share came back %s after SIGKILL, before lease_ttl + MaxRun", d)
	}
	eventually(t, 5*time.Second, "the reclaim announced", func() bool {
		return ev.has(func(e Event) bool { return e.Kind == Freed && e.Scopes[0] == "p/cli" })
	})
}
