package cluster

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The scripts, one file each under lua/ (docs/architecture.md lists what each does). Each
// runs atomically in Redis; go-redis sends its SHA1 and the source only when Redis does
// not have it (after a restart).
var (
	//go:embed lua/acquire.lua
	acquireSrc string
	//go:embed lua/release.lua
	releaseSrc string
	//go:embed lua/heartbeat.lua
	heartbeatSrc string
	//go:embed lua/adjust.lua
	adjustSrc string
	//go:embed lua/cool.lua
	coolSrc string
	//go:embed lua/lanes.lua
	lanesSrc string
	//go:embed lua/occupancy.lua
	occupancySrc string
	//go:embed lua/spend.lua
	spendSrc string
	//go:embed lua/affinity_bind.lua
	affinityBindSrc string
	//go:embed lua/affinity_bound.lua
	affinityBoundSrc string
	//go:embed lua/affinity_count.lua
	affinityCountSrc string

	acquireScript   = redis.NewScript(acquireSrc)
	releaseScript   = redis.NewScript(releaseSrc)
	heartbeatScript = redis.NewScript(heartbeatSrc)
	adjustScript    = redis.NewScript(adjustSrc)
	coolScript      = redis.NewScript(coolSrc)
	lanesScript     = redis.NewScript(lanesSrc)
	occupancyScript = redis.NewScript(occupancySrc)
	spendScript     = redis.NewScript(spendSrc)
	affinityBind    = redis.NewScript(affinityBindSrc)
	affinityBound   = redis.NewScript(affinityBoundSrc)
	affinityCount   = redis.NewScript(affinityCountSrc)
)
