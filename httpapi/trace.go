package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/providers/llm"
)

// Traces (SPEC §15). A model request is one server span named by the OpenTelemetry GenAI
// conventions ("chat MODEL"), continuing the client's trace when it sent a traceparent. Its
// children are the wait for admission ("queue", recorded once Start has answered, from the
// wait it reports) and, made by the backend's tracing wrapper below Gateway.Start, one
// client span per backend attempt, which is what reaches the backend's traceparent.

// Attribute keys: the GenAI and HTTP semantic conventions (semconv v1.41, the last release
// of the Go module that still carries the GenAI ones) and Tollgate's own.
const (
	attrOperation     = semconv.GenAIOperationNameKey
	attrRequestModel  = semconv.GenAIRequestModelKey
	attrResponseModel = semconv.GenAIResponseModelKey
	attrMaxTokens     = semconv.GenAIRequestMaxTokensKey
	attrTemperature   = semconv.GenAIRequestTemperatureKey
	attrTopP          = semconv.GenAIRequestTopPKey
	attrInputTokens   = semconv.GenAIUsageInputTokensKey
	attrOutputTokens  = semconv.GenAIUsageOutputTokensKey
	attrInputMessages = semconv.GenAIInputMessagesKey
	attrErrorType     = semconv.ErrorTypeKey
	attrMethod        = semconv.HTTPRequestMethodKey
	attrRoute         = semconv.HTTPRouteKey
	attrStatus        = semconv.HTTPResponseStatusCodeKey
	attrProvider      = attribute.Key("tollgate.provider")
	attrPriority      = attribute.Key("tollgate.priority")
	attrRequestID     = attribute.Key("tollgate.request_id")
	attrAttempts      = attribute.Key("tollgate.attempts")
	attrClientGone    = attribute.Key("tollgate.client_disconnect")
)

// startSpan begins a model request's span on r's context, continuing the trace of the
// client's traceparent (the global propagator reads it). Without a tracer r is returned
// unchanged with a nil span.
func (s *Server) startSpan(r *http.Request, route string) (*http.Request, trace.Span) {
	if s.opts.Tracer == nil {
		return r, nil
	}
	ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := s.opts.Tracer.Start(ctx, r.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attrOperation.String("chat"), attrMethod.String(r.Method), attrRoute.String(route),
			attrRequestID.String(requestID(r.Context()))))
	return r.WithContext(ctx), span
}

// describeRequest names the span after the model asked for and records the request's
// parameters; its messages only when TraceContent is set.
func (s *Server) describeRequest(span trace.Span, req *llm.Request, prio llm.Priority) {
	if span == nil || !span.IsRecording() {
		return // a request the sampler left out: its attributes would be built for nothing
	}
	span.SetName("chat " + req.Model)
	span.SetAttributes(attrRequestModel.String(req.Model), attrPriority.String(prio.String()))
	if n := req.OutputLimit(); n > 0 {
		span.SetAttributes(attrMaxTokens.Int(n))
	}
	if req.Temperature != nil {
		span.SetAttributes(attrTemperature.Float64(*req.Temperature))
	}
	if req.TopP != nil {
		span.SetAttributes(attrTopP.Float64(*req.TopP))
	}
	if s.opts.TraceContent {
		span.SetAttributes(attrInputMessages.String(inputMessages(req.Messages)))
	}
}

// queueSpan records the wait for admission as a child of the request's span: from when
// Start was called to when the call started or was turned away.
func (s *Server) queueSpan(ctx context.Context, from time.Time, sv *llm.Served, err error) {
	if s.opts.Tracer == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return // no tracer, or the request's span was sampled out: so would its child be
	}
	_, span := s.opts.Tracer.Start(ctx, "queue", trace.WithTimestamp(from),
		trace.WithAttributes(attrProvider.String(sv.Provider), attrRequestModel.String(sv.Model)))
	if err != nil && sv.Attempts == 0 {
		span.SetAttributes(attrErrorType.String(llm.KindOf(err).String()))
	}
	span.End(trace.WithTimestamp(from.Add(sv.QueueWait)))
}

// endSpan completes a model request's span from its log record. Only 5xx answers mark the
// server span as failed (the HTTP conventions); every error answer carries its SPEC §4 code
// as error.type.
func endSpan(span trace.Span, r *record, status int) {
	if span == nil {
		return
	}
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(attrStatus.Int(status), attrAttempts.Int(r.attempts))
	if r.provider != "" {
		span.SetAttributes(attrProvider.String(r.provider))
	}
	if r.servedBy != "" {
		span.SetAttributes(attrResponseModel.String(r.servedBy))
	}
	if r.usage.PromptTokens > 0 || r.usage.CompletionTokens > 0 {
		span.SetAttributes(attrInputTokens.Int(r.usage.PromptTokens), attrOutputTokens.Int(r.usage.CompletionTokens))
	}
	if r.code != "" {
		span.SetAttributes(attrErrorType.String(r.code))
	}
	if r.clientGone {
		span.SetAttributes(attrClientGone.Bool(true))
	}
	if status >= 500 {
		span.SetStatus(codes.Error, r.code)
	}
	span.End()
}

// inputMessages renders messages as gen_ai.input.messages: role and text parts; other parts
// (images) by their type only.
func inputMessages(msgs []llm.Message) string {
	type part struct {
		Type    string `json:"type"`
		Content string `json:"content,omitempty"`
	}
	type message struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	}
	out := make([]message, 0, len(msgs))
	for _, m := range msgs {
		msg := message{Role: m.Role, Parts: []part{}}
		switch {
		case m.Content.Parts == nil && m.Content.Text != "":
			msg.Parts = append(msg.Parts, part{Type: "text", Content: m.Content.Text})
		default:
			for _, p := range m.Content.Parts {
				if p.Type == "text" {
					msg.Parts = append(msg.Parts, part{Type: "text", Content: p.Text})
				} else {
					msg.Parts = append(msg.Parts, part{Type: p.Type})
				}
			}
		}
		out = append(out, msg)
	}
	b, _ := json.Marshal(out)
	return string(b)
}
