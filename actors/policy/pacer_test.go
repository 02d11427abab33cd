package policy

import (
	"testing"
	"time"
)

// TestPacer drives a Pacer through the sequences its owner meets and checks each Pace.
func TestPacer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		name string
		do   func(p *Pacer) Pace
		want Pace
	}
	offer := func(waiting int, busy bool) func(p *Pacer) Pace {
		return func(p *Pacer) Pace { return p.Offer(waiting, busy) }
	}
	wake := func(now, next int) func(p *Pacer) Pace {
		return func(p *Pacer) Pace { return p.Wake(at(now), at(next), true) }
	}
	due := func(p *Pacer) Pace { p.Due(); return Pace{} }
	cases := []struct {
		name  string
		steps []step
	}{
		{"an empty mailbox offers at once", []step{
			{"offer", offer(1, false), Pace{Offer: true}},
			{"offer again", offer(1, false), Pace{Offer: true}},
		}},
		{"a busy mailbox queues one offer behind it", []step{
			{"first", offer(1, true), Pace{Queue: true}},
			{"second, still queued", offer(1, true), Pace{}},
			{"third, mailbox now empty but one queued", offer(1, false), Pace{}},
			{"its turn", due, Pace{}},
			{"next change", offer(1, true), Pace{Queue: true}},
		}},
		{"the timer is armed for the earliest wake-up only", []step{
			{"arm", wake(0, 500), Pace{Arm: true, In: 500 * time.Millisecond, Timer: 1}},
			{"later wake-up: the armed timer serves", wake(100, 800), Pace{}},
			{"same wake-up", wake(200, 500), Pace{}},
			{"earlier: re-armed", wake(300, 400), Pace{Stop: true, Arm: true, In: 100 * time.Millisecond, Timer: 2}},
			{"overdue fires at once", wake(300, 200), Pace{Stop: true, Arm: true, Timer: 3}},
		}},
		{"nothing waiting stops the timer", []step{
			{"arm", wake(0, 500), Pace{Arm: true, In: 500 * time.Millisecond, Timer: 1}},
			{"offer with the queue empty", offer(0, false), Pace{Stop: true, Offer: true}},
			{"again: no timer to stop", offer(0, false), Pace{Offer: true}},
		}},
		{"no next wake-up stops the timer", []step{
			{"arm", wake(0, 500), Pace{Arm: true, In: 500 * time.Millisecond, Timer: 1}},
			{"none", func(p *Pacer) Pace { return p.Wake(at(10), time.Time{}, false) }, Pace{Stop: true}},
			{"re-armed later", wake(20, 900), Pace{Arm: true, In: 880 * time.Millisecond, Timer: 2}},
		}},
		{"idle and reset stop the timer; reset drops a queued offer", []step{
			{"arm", wake(0, 500), Pace{Arm: true, In: 500 * time.Millisecond, Timer: 1}},
			{"queue an offer", offer(1, true), Pace{Queue: true}},
			{"idle", func(p *Pacer) Pace { return p.Idle() }, Pace{Stop: true}},
			{"still queued", offer(1, true), Pace{}},
			{"arm", wake(0, 500), Pace{Arm: true, In: 500 * time.Millisecond, Timer: 2}},
			{"reset", func(p *Pacer) Pace { return p.Reset() }, Pace{Stop: true}},
			{"offers afresh", offer(1, true), Pace{Queue: true}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var p Pacer
			for _, s := range tc.steps {
				if got := s.do(&p); got != s.want {
					t.Fatalf("%s: %+v, want %+v", s.name, got, s.want)
				}
			}
		})
	}
}

// TestPacerWoke: only the armed timer's wake-up counts; one stopped or superseded after it
// fired is told apart, and a fired timer no longer needs stopping.
func TestPacerWoke(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var p Pacer
	first := p.Wake(t0, t0.Add(time.Second), true).Timer
	second := p.Wake(t0, t0.Add(time.Millisecond), true).Timer
	if p.Woke(first) {
		t.Error("the superseded timer's wake-up counted")
	}
	if !p.Woke(second) {
		t.Fatal("the armed timer's wake-up did not count")
	}
	if p.Woke(second) {
		t.Error("the same wake-up counted twice")
	}
	if pc := p.Idle(); pc.Stop {
		t.Error("a fired timer was stopped again")
	}
	third := p.Wake(t0, t0.Add(time.Second), true).Timer
	p.Reset()
	if p.Woke(third) {
		t.Error("a stopped timer's wake-up counted")
	}
	if pc := p.Wake(t0, t0.Add(time.Second), true); !pc.Arm || pc.Stop {
		t.Errorf("after a stopped timer's wake-up: %+v, want a new timer and nothing to stop", pc)
	}
}
