package httpapi

import (
	"net/http"

	"github.com/tollgate/tollgate/providers/llm"
)

// responsesAPI is POST /v1/responses. Its errors are OpenAI's error shape, as for chat.
var responsesAPI = &ingress{
	route:  "/v1/responses",
	format: llm.FormatResponses,
	parse:  readResponses,
	fail:   failOpenAI,
	relay:  (*Server).relayResponses,
}

// responsesTerminal are the events that end a Responses stream.
var responsesTerminal = map[string]bool{"response.completed": true, "response.incomplete": true, "response.failed": true}

func (s *Server) relayResponses(w http.ResponseWriter, r *http.Request, st llm.Stream, p *parsed, rec *record) {
	req := p.req
	a := newResponsesAnswer(rec.id, req.Model, s.opts.Now().Unix(), req, p.echo)
	if req.Stream {
		s.streamAnswer(w, r, st, rec, llm.FormatResponses, responsesTerminal, func(emit emitFunc) answerSink {
			a.emit = emit
			return a
		})
		return
	}
	s.wholeAnswer(w, r, st, rec, llm.FormatResponses, failOpenAI, a.add, func() any {
		_ = a.end() // without emit it only closes the items
		status := "completed"
		if a.incomplete() != nil {
			status = "incomplete"
		}
		return a.object(status, nil)
	})
}
