package actors

// AdminState is the /admin/state document (SPEC §7).
type AdminState struct {
	Running     int             `json:"running"`
	Queued      int             `json:"queued"`
	MaxRunning  int             `json:"max_running"`
	MaxAdmitted int             `json:"max_admitted"`
	Providers   []ProviderState `json:"providers"`
}

// ProviderState is one provider's lanes and queue.
type ProviderState struct {
	Name           string       `json:"name"`
	Kind           string       `json:"kind"`
	Lanes          int          `json:"lanes"`
	EffectiveLanes int          `json:"effective_lanes"`
	Running        int          `json:"running"`
	Queued         int          `json:"queued"`
	QueueLength    int          `json:"queue_length"`
	Models         []ModelState `json:"models"`
}

// ModelState is one model's lanes.
type ModelState struct {
	ID         string `json:"id"`
	ModelLanes int    `json:"model_lanes"`
	Running    int    `json:"running"`
	Queued     int    `json:"queued"`
}

// State returns a snapshot of lanes and queues, taken by the supervisor between two messages.
func (g *Gateway) State() AdminState {
	reply := make(chan AdminState, 1)
	g.system.Root.Send(g.supervisor, &stateQuery{reply: reply})
	return <-reply
}
