//go:build tollgate_faults

package actors

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/providers/llm"
)

// lossRow is one message type's line of the crash table: the actor kinds it is sent to,
// what its loss means, and how to crash each kind on it in a running gateway.
type lossRow struct {
	typ     string
	kinds   []string
	outcome string // "answered", "sent again" or "nothing"
	// sample is a message of the type, and whether what it carries has been answered.
	sample func() (message, func() bool)
	// e2e, when set, crashes each of kinds on the type through crashAndRecover.
	e2e *crashCase
}

// crashCase is how crashAndRecover makes an actor handle the message: trigger (see there),
// after the faults in before have fired (a rebuild's messages follow a first crash).
type crashCase struct {
	trigger string
	before  []Fault
}

func newCall() *call { return &call{reply: make(chan admitResult, 1)} }

func callSample[M message](mk func(*call) M) func() (message, func() bool) {
	return func() (message, func() bool) {
		c := newCall()
		return mk(c), c.answered.Load
	}
}

func plain(m func() message) func() (message, func() bool) {
	return func() (message, func() bool) { return m(), func() bool { return false } }
}

var (
	afterSupervisorCrash = []Fault{{Actor: "supervisor", On: "dispatchNow"}}
	afterProviderCrash   = []Fault{{Actor: "provider", On: "arrive"}}
)

// crashTable is every message type. TestCrashEveryMessageType checks it against the source
// (every type with a lost method is here) and against what lost does, and docs/architecture.md's
// crash table is rendered from it.
var crashTable = []lossRow{
	{"arrive", []string{"provider"}, "answered", callSample(func(c *call) *arrive { return &arrive{c: c} }), &crashCase{trigger: "arrival"}},
	{"unleased", []string{"provider"}, "answered", callSample(func(c *call) *unleased { return &unleased{c: c} }), nil},
	{"startCall", []string{"lane"}, "answered", callSample(func(c *call) *startCall { return &startCall{c: c} }), &crashCase{trigger: "release"}},
	{"retryAsk", []string{"provider"}, "answered", func() (message, func() bool) {
		m := &retryAsk{c: newCall(), reply: make(chan retryAnswer, 1)}
		return m, func() bool { return len(m.reply) == 1 }
	}, nil},
	{"addModel", []string{"provider"}, "answered", func() (message, func() bool) {
		m := &addModel{reply: make(chan error, 1)}
		return m, func() bool { return len(m.reply) == 1 }
	}, &crashCase{trigger: "add"}},
	{"stateQuery", []string{"provider"}, "answered", func() (message, func() bool) {
		m := &stateQuery{reply: make(chan statePart, 1)}
		return m, func() bool { return len(m.reply) == 1 }
	}, &crashCase{trigger: "state"}},
	{"startBatch", []string{"supervisor"}, "answered", func() (message, func() bool) {
		m := &startBatch{b: &batchCall{reply: make(chan error, 1)}}
		return m, func() bool { return len(m.b.reply) == 1 }
	}, nil},

	{"withdraw", []string{"provider"}, "sent again", callSample(func(c *call) *withdraw { return &withdraw{c: c} }), &crashCase{trigger: "withdraw"}},
	{"freed", []string{"provider"}, "sent again", callSample(func(c *call) *freed { return &freed{c: c} }), &crashCase{trigger: "release"}},
	{"drainAll", []string{"supervisor", "provider"}, "sent again", plain(func() message { return &drainAll{} }), &crashCase{trigger: "drain"}},
	{"resync", []string{"provider"}, "sent again", plain(func() message { return &resync{} }), &crashCase{trigger: "arrival", before: afterSupervisorCrash}},
	{"laneReport", []string{"provider"}, "sent again", plain(func() message { return &laneReport{} }), &crashCase{trigger: "arrival", before: afterProviderCrash}},
	{"failNow", []string{"provider"}, "sent again", plain(func() message { return &failNow{} }), &crashCase{trigger: "failed"}},
	{"reserve", []string{"provider"}, "sent again", plain(func() message { return &reserve{} }), nil},
	{"settle", []string{"provider"}, "sent again", plain(func() message { return &settle{} }), nil},
	{"reconfigureProvider", []string{"provider"}, "sent again", plain(func() message { return &reconfigureProvider{} }), nil},
	{"retire", []string{"provider"}, "sent again", plain(func() message { return &retire{} }), nil},
	{"retireCheck", []string{"provider"}, "sent again", plain(func() message { return &retireCheck{} }), &crashCase{trigger: "retire"}},
	{"leaseFreed", []string{"provider"}, "sent again", plain(func() message { return &leaseFreed{} }), nil},
	{"clientRoom", []string{"provider"}, "sent again", plain(func() message { return &clientRoom{} }), nil},
	{"keyCooled", []string{"provider"}, "sent again", plain(func() message { return &keyCooled{} }), &crashCase{trigger: "cooled"}},
	{"breakerShared", []string{"provider"}, "sent again", plain(func() message { return &breakerShared{} }), nil},
	{"lanesShared", []string{"provider"}, "sent again", plain(func() message { return &lanesShared{} }), &crashCase{trigger: "learned"}},
	{"lanesPublished", []string{"provider"}, "sent again", plain(func() message { return &lanesPublished{} }), nil},
	{"readShared", []string{"provider"}, "sent again", plain(func() message { return &readShared{} }), &crashCase{trigger: "read"}},
	{"released", []string{"lane"}, "sent again", callSample(func(c *call) *released { return &released{c: c} }), &crashCase{trigger: "release"}},
	{"reportRunning", []string{"lane"}, "sent again", plain(func() message { return &reportRunning{} }), &crashCase{trigger: "arrival", before: afterProviderCrash}},
	{"cancelAll", []string{"lane"}, "sent again", plain(func() message { return &cancelAll{} }), &crashCase{trigger: "drain"}},
	{"abort", []string{"lane"}, "sent again", callSample(func(c *call) *abort { return &abort{c: c} }), &crashCase{trigger: "release", before: []Fault{{Actor: "lane", On: "startCall"}}}},
	{"leased", []string{"lane"}, "sent again", callSample(func(c *call) *leased { return &leased{c: c} }), nil},
	{"providerIdle", []string{"supervisor"}, "sent again", plain(func() message { return &providerIdle{} }), &crashCase{trigger: "drain"}},
	{"reserved", []string{"supervisor"}, "sent again", plain(func() message { return &reserved{} }), nil},
	{"reconfigure", []string{"supervisor"}, "sent again", plain(func() message { return &reconfigure{} }), nil},
	{"revokeClient", []string{"provider"}, "sent again", plain(func() message { return &revokeClient{reply: make(chan revoked, 1)} }), nil},
	{"providerRetired", []string{"supervisor"}, "sent again", plain(func() message { return &providerRetired{} }), &crashCase{trigger: "retire"}},

	{"grants", []string{"provider"}, "nothing", plain(func() message { return &grants{} }), &crashCase{trigger: "release"}},
	{"recall", []string{"provider"}, "nothing", plain(func() message { return &recall{} }), nil},
	{"wake", []string{"provider"}, "nothing", plain(func() message { return &wake{} }), &crashCase{trigger: "wake"}},
	{"offerDue", []string{"provider"}, "nothing", plain(func() message { return offerDue{} }), nil},
	{"offer", []string{"supervisor"}, "nothing", plain(func() message { return &offer{} }), &crashCase{trigger: "release"}},
	{"dispatchNow", []string{"supervisor"}, "nothing", plain(func() message { return &dispatchNow{} }), &crashCase{trigger: "arrival"}},
	{"resyncTick", []string{"supervisor"}, "nothing", plain(func() message { return &resyncTick{} }), &crashCase{trigger: "arrival", before: afterSupervisorCrash}},
	{"clientGone", []string{"request"}, "nothing", plain(func() message { return &clientGone{} }), &crashCase{trigger: "hangup"}},
}

// crashedElsewhere names the test that crashes an actor on each type crashTable has no
// crashCase for: those need a batch, a reload or several replicas. The rest are only checked
// by calling their lost method (see the doc's table).
var crashedElsewhere = map[string]string{
	"unleased":            "TestCrashWithLeases (cmd/internal/app)",
	"leased":              "TestCrashWithLeases (cmd/internal/app)",
	"leaseFreed":          "TestCrashWithLeases (cmd/internal/app)",
	"breakerShared":       "TestCrashOnSharedBreaker (cmd/internal/app)",
	"retryAsk":            "TestCrashOnProbeRetryAskReopensBreaker",
	"startBatch":          "TestCrashBatch",
	"reserve":             "TestCrashBatch",
	"reserved":            "TestCrashBatch",
	"settle":              "TestCrashBatch",
	"reconfigure":         "TestCrashDuringReload",
	"reconfigureProvider": "TestCrashDuringReload",
	"retire":              "TestCrashDuringReload",
}

func TestCrashEveryMessageType(t *testing.T) {
	t.Run("table matches the source", testLossTableMatchesSource)
	t.Run("lost does what the table says", testLossOutcomes)
	t.Run("docs/architecture.md", testLossDoc)
	for _, r := range crashTable {
		if r.e2e == nil {
			continue
		}
		for _, kind := range r.kinds {
			t.Run(kind+"/"+r.typ, func(t *testing.T) {
				f := Fault{Actor: kind, On: r.typ}
				switch r.e2e.trigger {
				case "drain":
					crashOnDrain(t, f)
				case "retire":
					crashOnRetire(t, f)
				case "wake":
					crashOnWake(t, f)
				case "failed":
					crashOnGatewayFailed(t, f)
				default:
					crashAndRecover(t, f, r.e2e.trigger, r.e2e.before...)
				}
			})
		}
	}
}

// testLossTableMatchesSource parses the package: every type with a lost method is in the
// table and nothing else is, and no message reaches an actor except through send, which
// takes only a message.
func testLossTableMatchesSource(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var withLost []string
	for _, f := range pkgs["actors"].Files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if fd.Recv != nil && fd.Name.Name == "lost" {
				withLost = append(withLost, receiverType(fd.Recv.List[0].Type))
			}
			ast.Inspect(fd, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Send" && fd.Name.Name != "send" {
					t.Errorf("%s: a message sent with .Send, not send: its type need not say what its loss means", fset.Position(sel.Pos()))
				}
				return true
			})
		}
	}
	var listed []string
	for _, r := range crashTable {
		listed = append(listed, r.typ)
	}
	for _, typ := range withLost {
		if !slices.Contains(listed, typ) {
			t.Errorf("%s has a lost method but no row in crashTable: add one, and crash it if a test can make it", typ)
		}
	}
	for _, typ := range listed {
		if !slices.Contains(withLost, typ) {
			t.Errorf("crashTable lists %s, which has no lost method", typ)
		}
	}
	for typ := range crashedElsewhere {
		if !slices.Contains(listed, typ) {
			t.Errorf("crashedElsewhere names %s, which crashTable does not list", typ)
		}
	}
}

func receiverType(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	return e.(*ast.Ident).Name
}

// testLossOutcomes calls each sample's lost with a probe actor as the failed one and checks
// what it did: answered what it carries, sent itself to the probe again, or neither.
func testLossOutcomes(t *testing.T) {
	g := newTestGateway(t, 10, 16, testProvider("p", newHeld(), "m"))
	got := make(chan message, 16)
	probe := g.system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(message); ok {
			got <- m
		}
	}))
	lanes := &providerActor{g: g, pol: policy.NewProvider(policy.ProviderSpec{Name: "p", Lanes: 1,
		Models: []policy.ModelSpec{{Name: "m", Lanes: 1}}})}
	for _, r := range crashTable {
		m, answered := r.sample()
		l := &loss{g: g, kind: faultProvider, child: probe, p: 0, name: "p", lanes: lanes}
		m.lost(l)
		end := &providerIdle{p: -7} // sent after whatever lost sent, so it comes after it (not zero-sized: its pointer is its own)
		send(g.system.Root, probe, end)
		var again bool
		for done := false; !done; {
			select {
			case s := <-got:
				again = again || s == m
				done = s == message(end)
			case <-time.After(patience):
				t.Fatalf("%s: the probe got nothing", r.typ)
			}
		}
		outcome := "nothing"
		switch {
		case answered():
			outcome = "answered"
		case again:
			outcome = "sent again"
		}
		if outcome != r.outcome {
			t.Errorf("%s lost in a crash is %s, the table says %s", r.typ, outcome, r.outcome)
		}
	}
}

// lossDocTable renders the crash table as docs/architecture.md has it.
func lossDocTable() string {
	var b strings.Builder
	b.WriteString("| message | sent to | its loss in a crash | crashed by |\n|---|---|---|---|\n")
	for _, r := range crashTable {
		by := "TestCrashEveryMessageType"
		if r.e2e == nil {
			by = crashedElsewhere[r.typ]
		}
		if by == "" {
			by = "— (its `lost` only)"
		}
		b.WriteString("| `" + r.typ + "` | " + strings.Join(r.kinds, ", ") + " | " + r.outcome + " | " + by + " |\n")
	}
	return b.String()
}

func testLossDoc(t *testing.T) {
	doc, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := lossDocTable(); !strings.Contains(string(doc), want) {
		t.Errorf("docs/architecture.md does not hold the crash table by type; it should read\n%s", want)
	}
}

// crashOnDrain crashes an actor on a message of the drain, with a call running and one
// waiting: both clients are answered and the drain still ends, everything idle.
func crashOnDrain(t *testing.T, fault Fault) {
	b := newHeld()
	// Not newTestGateway: the gateway is shut down here, and only once.
	g, err := New(Options{MaxRunning: 10, MaxAdmitted: 16, Providers: []Provider{testProvider("p", b, "m")}, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	running := runCall(ctx, g, "p/m")
	b.next(t)
	waiting := runCall(ctx, g, "p/m")
	waitState(t, g, "one waiting", func(s AdminState) bool { return s.Queued == 1 })
	if err := g.InjectFault(fault); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	if err := g.Shutdown(sctx); err != nil {
		t.Errorf("the drain did not end: %v", err)
	}
	if n := g.FaultsFired(); n != 1 {
		t.Errorf("%d injected panics fired, want 1", n)
	}
	for _, ch := range []chan outcome{running, waiting} {
		if o := got(t, ch); o.err == nil || !clean(o.err) {
			t.Errorf("a call under the drain ended with %v, want a clean error", o.err)
		}
	}
	if n := b.active.Load(); n != 0 {
		t.Errorf("%d backend calls still open after the drain", n)
	}
}

// crashOnRetire crashes an actor on a message of a reload that removes a provider: the
// provider's actors still stop, and the one kept serves.
func crashOnRetire(t *testing.T, fault Fault) {
	b := newHeld()
	p := testProvider("p", b, "m")
	g := newTestGateway(t, 10, 16, p, testProvider("old", newHeld(), "m"))
	before := actorCount(g)
	if err := g.InjectFault(fault); err != nil {
		t.Fatal(err)
	}
	reload(t, g, 10, 16, p)
	waitFired(t, g, 1)
	// Gone from /admin/state once retired; its provider and lane actors stop only after
	// the retireCheck rounds and the supervisor's providerRetired.
	for deadline := time.Now().Add(patience); actorCount(g) > before-2; {
		if time.Now().After(deadline) {
			t.Fatalf("%d actors, want the removed provider's 2 stopped (%d)", actorCount(g), before-2)
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
	waitState(t, g, "all idle", idle)
	r := runCall(context.Background(), g, "p/m")
	close(b.next(t).release)
	if o := got(t, r); o.err != nil {
		t.Errorf("after the fault: %v", o.err)
	}
}

// crashOnWake crashes a provider on its queue-deadline timer: the rebuild arms it again, so
// the waiting call still times out, and the lane serves afterwards.
func crashOnWake(t *testing.T, fault Fault) {
	b := newHeld()
	p := testProvider("p", b, "m")
	p.QueueTimeout = 50 * time.Millisecond
	g := newTestGateway(t, 10, 16, p)
	ctx := context.Background()
	running := runCall(ctx, g, "p/m")
	c1 := b.next(t)
	if err := g.InjectFault(fault); err != nil {
		t.Fatal(err)
	}
	waiting := runCall(ctx, g, "p/m")
	if o := got(t, waiting); llm.KindOf(o.err) != llm.KindQueueTimeout {
		t.Errorf("the waiting call ended with %v, want its queue timeout", o.err)
	}
	waitFired(t, g, 1)
	close(c1.release)
	if o := got(t, running); o.err != nil {
		t.Errorf("the running call: %v", o.err)
	}
	waitState(t, g, "idle", idle)
	r := runCall(ctx, g, "p/m")
	close(b.next(t).release)
	if o := got(t, r); o.err != nil {
		t.Errorf("after the fault: %v", o.err)
	}
}

// crashOnGatewayFailed crashes an actor on a message sent once the supervisor has spent its
// restart budget: the providers still leave service, answering what waits and stopping what
// runs.
func crashOnGatewayFailed(t *testing.T, fault Fault) {
	b := newHeld()
	g := newTestGateway(t, 10, 16, testProvider("p", b, "m"))
	ctx := context.Background()
	running := runCall(ctx, g, "p/m")
	c := b.next(t)
	waiting := runCall(ctx, g, "p/m")
	waitState(t, g, "one waiting", func(s AdminState) bool { return s.Queued == 1 })
	for _, f := range []Fault{fault, {Actor: "supervisor", Times: -1}} {
		if err := g.InjectFault(f); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; g.Failed() == nil; i++ {
		if i == 50 {
			t.Fatalf("the gateway has not failed after %d supervisor panics", g.FaultsFired())
		}
		if o := got(t, runCall(ctx, g, "p/m")); !clean(o.err) {
			t.Fatalf("call %d: %v", i, o.err)
		}
	}
	for _, ch := range []chan outcome{waiting, running} {
		if o := got(t, ch); o.err == nil || !clean(o.err) {
			t.Errorf("a call when the gateway failed ended with %v, want a clean error", o.err)
		}
	}
	<-c.ctx.Done() // got above returned once the stream ended, which its cancellation makes it
	waitState(t, g, "idle", idle)
	g.faults.mu.Lock()
	defer g.faults.mu.Unlock()
	if left := g.faults.rules[0].left; left != 0 {
		t.Errorf("the fault on %s did not fire", fault.On)
	}
}
