package httpapi

import (
	"net/http"

	"github.com/julienschmidt/httprouter"
)

// HealthGateway is the optional capability of a gateway that can fail as a whole or lose
// single providers; /healthz and /readyz report both when the Gateway has it.
type HealthGateway interface {
	// Failed returns why the gateway admits nothing any more, or nil.
	Failed() error
	// OutOfService names the providers taken out of service and counts those still serving.
	OutOfService() (down []string, serving int)
}

// probe is the body of /healthz and /readyz.
type probe struct {
	Status string `json:"status"` // ok, ready, draining, failed, unavailable
	// Degraded names the providers out of service while the gateway still serves.
	Degraded []string `json:"degraded,omitempty"`
}

// healthz is the liveness probe: 503 "failed" once the gateway can admit nothing until its
// process is started afresh (cmd/tollgate exits then, too); 200 "ok" otherwise, degraded
// providers included, since a restart is not what they need first.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	if hg, ok := s.opts.Gateway.(HealthGateway); ok && hg.Failed() != nil {
		writeJSON(w, http.StatusServiceUnavailable, probe{Status: "failed"})
		return
	}
	writeJSON(w, http.StatusOK, probe{Status: "ok"})
}

// Unready makes /readyz answer 503 "draining" from now on, while every other route is served
// as before: the first step of a drain, so a load balancer stops sending before the gateway
// stops admitting.
func (s *Server) Unready() { s.unready.Store(true) }

// Stopping tells the server that the drain is stopping every call still running (the end of
// drain_grace): from now on an answer that cannot reach its client was lost to the drain,
// whose connections close once the final events had their time, not to a client that left.
// Such a request is logged and counted as drained (503 gateway_draining), not as a client
// disconnect (499): the client that reads nothing stays connected, and its connection is
// closed by the gateway.
func (s *Server) Stopping() { s.stopping.Store(true) }

// readyz is the readiness probe. 503 when sending it calls is pointless: "failed", "draining",
// or "unavailable" when every provider is out of service. 200 "ready" otherwise, listing under
// "degraded" the providers out of service: the others still serve.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	hg, _ := s.opts.Gateway.(HealthGateway)
	var down []string
	serving := 1
	if hg != nil {
		if hg.Failed() != nil {
			writeJSON(w, http.StatusServiceUnavailable, probe{Status: "failed"})
			return
		}
		down, serving = hg.OutOfService()
	}
	switch {
	case s.unready.Load() || s.opts.Gateway.Draining():
		writeJSON(w, http.StatusServiceUnavailable, probe{Status: "draining", Degraded: down})
	case len(down) > 0 && serving == 0:
		writeJSON(w, http.StatusServiceUnavailable, probe{Status: "unavailable", Degraded: down})
	default:
		writeJSON(w, http.StatusOK, probe{Status: "ready", Degraded: down})
	}
}
