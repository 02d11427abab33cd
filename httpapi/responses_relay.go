package httpapi

import "github.com/tollgate/tollgate/providers/llm"

// responsesAPI is POST /v1/responses. Its errors are OpenAI's error shape, as for chat.
var responsesAPI = &ingress{
	route:    "/v1/responses",
	native:   llm.FormatResponses,
	terminal: map[string]bool{"response.completed": true, "response.incomplete": true, "response.failed": true},
	parse:    readResponses,
	fail:     failOpenAI,
	answer: func(s *Server, p *parsed, rec *record) answerFormat {
		return newResponsesAnswer(rec.id, p.req.Model, s.opts.Now().Unix(), p.req, p.echo)
	},
}

// stream is the answer as Responses events.
func (a *responsesAnswer) stream(out *eventOut) streamSink {
	a.emit = out.emit
	return a
}

// whole is the answer as one response object.
func (a *responsesAnswer) whole() wholeSink { return a }

// build is the whole answer's response object once every chunk is in.
func (a *responsesAnswer) build() (any, error) {
	_ = a.end() // without emit it only closes the items
	status := "completed"
	if a.incomplete() != nil {
		status = "incomplete"
	}
	return a.object(status, nil), nil
}
