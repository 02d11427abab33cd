package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/internal/cluster/redistest"
	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// clusterClient waits longer than rawClient: a call may queue while Redis is away.
var clusterClient = &http.Client{Timeout: 30 * time.Second}

// clusterConfig is one replica's config: provider fast (3 lanes) and slow (2 lanes), each
// in front of its own fakellm, which counts its own concurrency. run_timeout is short:
// after lease_ttl without Redis, a replica runs min(share, what it held) for the longest
// run_timeout before its full share (docs/architecture.md), and the test wants the share.
func clusterConfig(fast, slow, redis, replica string) string {
	return fmt.Sprintf(`listen: 127.0.0.1:0
limits: {max_running: 8, max_admitted: 200}
providers:
  - {name: fast, kind: openai, base_url: %s/v1, keys: [test-key], lanes: 3, queue_length: 100, queue_timeout: 60s, run_timeout: 5s, models: [{id: m}]}
  - {name: slow, kind: openai, base_url: %s/v1, keys: [test-key], lanes: 2, queue_length: 10, queue_timeout: 60s, run_timeout: 5s, models: [{id: m}]}
cluster: {redis: {addr: %q}, lease_ttl: 1s, replica: %s}
`, fast, slow, redis, replica)
}

// chatStatus makes one non-streaming chat call and returns its status.
func chatStatus(url, model string) (int, error) {
	res, err := clusterClient.Post(url+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, err = io.Copy(io.Discard, res.Body)
	return res.StatusCode, err
}

// clusterHealth is /admin/state's cluster object.
type clusterHealth struct {
	Replica       string `json:"replica"`
	ReplicasAlive int    `json:"replicas_alive"`
	Redis         string `json:"redis"`
	Phase         string `json:"phase"`
}

func adminCluster(t *testing.T, url string) clusterHealth {
	t.Helper()
	res, err := rawClient.Get(url + "/admin/state")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var st struct{ Cluster *clusterHealth }
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil || st.Cluster == nil {
		t.Fatalf("/admin/state: %v, cluster %v", err, st.Cluster)
	}
	return *st.Cluster
}

// checkMetrics fails the test for each series line /metrics lacks.
func checkMetrics(t *testing.T, url string, want ...string) {
	t.Helper()
	res, err := rawClient.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, w := range want {
		if !strings.Contains(string(body), w) {
			t.Errorf("%s/metrics lacks %q", url, w)
		}
	}
}

func pollUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: still not %s", within, what)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}

// TestReplicasShareLimits shows SPEC §17's sharing with real processes: three tollgate
// replicas share one redis-server and two backends that count their own concurrency. A
// burst of 50 spread over the replicas never runs more than the provider's lanes at once; a
// SIGKILLed replica's lanes come back within lease_ttl + 1s; Redis stopped under load puts
// the replicas on their shares and restarted brings them back to shared leases, with no cap
// exceeded at any instant; /admin/state and /metrics show it.
func TestReplicasShareLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three gateways and a redis-server")
	}
	redis := redistest.Start(t)
	fast := fakellm.New(fakellm.Options{Latency: 40 * time.Millisecond, Models: []string{"m"}})
	slow := fakellm.New(fakellm.Options{Latency: 25 * time.Second, Models: []string{"m"}})
	fastSrv, slowSrv := httptest.NewServer(fast), httptest.NewServer(slow)
	t.Cleanup(fastSrv.Close)
	t.Cleanup(slowSrv.Close)
	var ps []*process
	for i := range 3 {
		ps = append(ps, startProcess(t, clusterConfig(fastSrv.URL, slowSrv.URL, redis.Addr(), fmt.Sprintf("r%d", i+1))))
	}
	pollUntil(t, 10*time.Second, "every replica seeing the three", func() bool {
		for _, p := range ps {
			if c := adminCluster(t, p.url); c.ReplicasAlive != 3 || c.Redis != "ok" || c.Phase != "shared" {
				return false
			}
		}
		return true
	})

	// A burst of 50 over the three replicas.
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			if code, err := chatStatus(ps[i%3].url, "fast/m"); code != http.StatusOK {
				t.Errorf("burst call %d: %d %v", i, code, err)
			}
		})
	}
	wg.Wait()
	if st := fast.Stats(); st.MaxConcurrent != 3 || st.Completed != 50 {
		t.Errorf("burst: the backend ran %d at once (3 lanes shared) and completed %d of 50", st.MaxConcurrent, st.Completed)
	}
	checkMetrics(t, ps[0].url, "tollgate_cluster_redis_up 1", "tollgate_cluster_replicas_alive 3", `tollgate_cluster_phase{phase="shared"} 1`)

	// r1 holds both of slow's lanes; r2 queues a third call; r1 is killed.
	for range 2 {
		go func() { _, _ = chatStatus(ps[0].url, "slow/m") }() // ends when r1 dies
	}
	pollUntil(t, 10*time.Second, "r1 running both slow lanes", func() bool { return slow.Stats().Concurrent == 2 })
	var waited atomic.Int64
	go func() { _, _ = chatStatus(ps[1].url, "slow/m") }() // ends when the test's servers close
	pollUntil(t, 10*time.Second, "the third slow call queued on r2", func() bool {
		res, err := rawClient.Get(ps[1].url + "/admin/state")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		var st struct{ Queued int }
		return json.NewDecoder(res.Body).Decode(&st) == nil && st.Queued == 1
	})
	killed := time.Now()
	if err := ps[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-ps[0].exited
	pollUntil(t, 5*time.Second, "r2's call started on a lane the killed replica held", func() bool {
		if slow.Stats().Requests == 3 {
			waited.Store(int64(time.Since(killed)))
			return true
		}
		return false
	})
	t.Logf("a SIGKILLed replica's lanes came back after %s (lease_ttl 1s)", time.Duration(waited.Load()).Round(time.Millisecond))
	if d := time.Duration(waited.Load()); d > 2*time.Second {
		t.Errorf("the killed replica's lanes came back after %s, want within lease_ttl + 1s", d)
	}
	if st := slow.Stats(); st.MaxConcurrent > 2 {
		t.Errorf("slow ran %d at once with 2 shared lanes", st.MaxConcurrent)
	}

	// Redis stopped and restarted under load on the two replicas left.
	fast.ResetStats()
	stop := make(chan struct{})
	var load sync.WaitGroup
	var served, refused atomic.Int32
	for i := range 6 {
		load.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if code, _ := chatStatus(ps[1+i%2].url, "fast/m"); code == http.StatusOK {
					served.Add(1)
				} else {
					refused.Add(1)
				}
			}
		})
	}
	pollUntil(t, 10*time.Second, "load running", func() bool { return fast.Stats().Completed > 10 })
	redis.Stop()
	pollUntil(t, 10*time.Second, "both replicas on their shares", func() bool {
		return adminCluster(t, ps[1].url).Redis == "down" && adminCluster(t, ps[2].url).Redis == "down"
	})
	checkMetrics(t, ps[1].url, "tollgate_cluster_redis_up 0", "tollgate_cluster_outages_total 1")
	during := fast.Stats().Completed
	pollUntil(t, 20*time.Second, "calls served while Redis is away", func() bool { return fast.Stats().Completed > during+5 })
	redis.Start()
	pollUntil(t, 15*time.Second, "both replicas on shared leases again", func() bool {
		a, b := adminCluster(t, ps[1].url), adminCluster(t, ps[2].url)
		return a.Phase == "shared" && b.Phase == "shared" && a.ReplicasAlive == 2
	})
	after := fast.Stats().Completed
	pollUntil(t, 10*time.Second, "calls served after the switch back", func() bool { return fast.Stats().Completed > after+10 })
	close(stop)
	load.Wait()
	if st := fast.Stats(); st.MaxConcurrent > 3 {
		t.Errorf("across the outage the backend ran %d at once, with 3 lanes shared", st.MaxConcurrent)
	}
	t.Logf("outage load: %d served, %d refused; the backend ran at most %d at once", served.Load(), refused.Load(), fast.Stats().MaxConcurrent)
	if refused.Load() > 0 {
		t.Errorf("%d calls refused across the outage: they should have waited in their queues", refused.Load())
	}
}
