package actors

import (
	"github.com/asynkron/protoactor-go/actor"
)

// Supervision is decided per actor kind (STYLE.md, practice 8):
//
//   - provider and lane actors always restart: their state is rebuilt from the configuration,
//     and the supervisor re-sends any call a failure lost. There is no retry budget after
//     which they stay stopped: a stopped provider would turn each later call into a hang.
//   - request actors stop: a request that failed cannot be resumed halfway through a stream;
//     stopping cancels its backend, so its client gets a clean error and its lanes come back.
//   - the supervisor holds the admission state and keeps it across a restart (its producer
//     returns the same instance), respawning its provider actors.

func providerStrategy() actor.SupervisorStrategy { return actor.NewRestartingStrategy() }

func laneStrategy() actor.SupervisorStrategy { return actor.NewRestartingStrategy() }

func requestStrategy() actor.SupervisorStrategy {
	return actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })
}
