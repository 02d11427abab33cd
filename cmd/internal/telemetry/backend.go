package telemetry

import (
	"context"
	"errors"
	"io"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/providers/llm"
)

// attrProvider is Tollgate's own attribute: the configured provider's name. The others are
// the GenAI and error semantic conventions' (semconv v1.41), as in httpapi/trace.go.
const attrProvider = attribute.Key("tollgate.provider")

// genAISystem is gen_ai.provider.name for a provider kind: the conventions' well-known value
// where there is one, else the kind.
func genAISystem(kind string) string {
	switch kind {
	case "gemini":
		return "gcp.gemini"
	}
	return kind // openai, anthropic, deepseek are the conventions' own names too
}

// TraceBackend wraps b so that every Open, one backend attempt, is a client span named by the
// GenAI conventions ("chat MODEL"), a child of the span on the call's context, ending when
// the stream is closed. The span is on the context b sees, so an HTTP adapter's traceparent
// (providers/upstream.Send) names it. provider and kind are the configured provider's. An
// attempt of a request the sampler left out is made as it is, without a span (sampledOut).
//
// A backend that lets the gateway choose each call's key (llm.KeyedBackend) keeps that
// capability through the wrapper, and a stream's quota (llm.QuotaReporter) is passed on.
func TraceBackend(b llm.Backend, tracer trace.Tracer, provider, kind string) llm.Backend {
	tb := &tracedBackend{inner: b, tracer: tracer, provider: provider, system: genAISystem(kind)}
	if kb, ok := b.(llm.KeyedBackend); ok {
		return &tracedKeyed{tracedBackend: tb, keyed: kb}
	}
	return tb
}

type tracedBackend struct {
	inner            llm.Backend
	tracer           trace.Tracer
	provider, system string
}

// tracedKeyed is tracedBackend over a llm.KeyedBackend.
type tracedKeyed struct {
	*tracedBackend
	keyed llm.KeyedBackend
}

var _ llm.KeyedBackend = (*tracedKeyed)(nil)

func (b *tracedKeyed) Keys(model string) int { return b.keyed.Keys(model) }

func (b *tracedKeyed) OpenWithKey(ctx context.Context, req *llm.Request, key int) (llm.Stream, error) {
	if sampledOut(ctx) {
		return b.keyed.OpenWithKey(ctx, req, key)
	}
	ctx, span := b.start(ctx, req)
	st, err := b.keyed.OpenWithKey(ctx, req, key)
	return traced(span, st, err)
}

func (b *tracedBackend) Open(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	if sampledOut(ctx) {
		return b.inner.Open(ctx, req)
	}
	ctx, span := b.start(ctx, req)
	st, err := b.inner.Open(ctx, req)
	return traced(span, st, err)
}

// sampledOut says the call belongs to a request whose span the sampler left out. Its
// attempts get no span and no stream wrapper: no sampler OTEL_TRACES_SAMPLER can name records
// a child of a span it dropped (parent-based ones follow the parent, traceidratio decides
// by the trace id the child shares, always_off drops all), so they would be built for
// nothing. The backend's traceparent then names the request's span, unsampled as before. A
// call with no span at all (a batch member: httpapi gives batches no request span) still
// gets its attempt's span.
func sampledOut(ctx context.Context) bool {
	span := trace.SpanFromContext(ctx)
	return span.SpanContext().IsValid() && !span.IsRecording()
}

// start begins one backend attempt's span; the attempt is made on the context it returns.
func (b *tracedBackend) start(ctx context.Context, req *llm.Request) (context.Context, trace.Span) {
	return b.tracer.Start(ctx, "chat "+req.Model, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.GenAIOperationNameChat, semconv.GenAIProviderNameKey.String(b.system),
			semconv.GenAIRequestModelKey.String(req.Model), attrProvider.String(b.provider)))
}

// traced is the outcome of an attempt opened in span: a failed one ends it now, a stream
// ends it when closed.
func traced(span trace.Span, st llm.Stream, err error) (llm.Stream, error) {
	if err != nil {
		failSpan(span, err)
		span.End()
		return nil, err
	}
	hint, _ := st.(interface{ Buffered() bool })
	return &tracedStream{inner: st, span: span, hint: hint}, nil
}

// tracedStream notes usage, finish reasons and the error that ended the stream, and ends
// the attempt's span on Close.
type tracedStream struct {
	inner  llm.Stream
	span   trace.Span
	hint   interface{ Buffered() bool }
	usage  *llm.Usage
	finish []string
	err    error
	closed bool
}

func (s *tracedStream) Next() (llm.Chunk, error) {
	ch, err := s.inner.Next()
	switch {
	case err == nil:
		if ch.Usage != nil {
			s.usage = ch.Usage
		}
		if ch.FinishReason != "" {
			s.finish = append(s.finish, string(ch.FinishReason))
		}
	case err != io.EOF:
		s.err = err
	}
	return ch, err
}

// Buffered passes on the inner stream's optional capability (the relay asks it per chunk).
func (s *tracedStream) Buffered() bool { return s.hint != nil && s.hint.Buffered() }

// Quota passes on what the inner stream's answer said of the backend's buckets.
func (s *tracedStream) Quota() llm.Quota {
	if qr, ok := s.inner.(llm.QuotaReporter); ok {
		return qr.Quota()
	}
	return llm.NoQuota
}

func (s *tracedStream) Close() error {
	err := s.inner.Close()
	if s.closed {
		return err
	}
	s.closed = true
	if s.usage != nil {
		s.span.SetAttributes(semconv.GenAIUsageInputTokensKey.Int(s.usage.PromptTokens), semconv.GenAIUsageOutputTokensKey.Int(s.usage.CompletionTokens))
	}
	if len(s.finish) > 0 {
		s.span.SetAttributes(semconv.GenAIResponseFinishReasonsKey.StringSlice(s.finish))
	}
	if s.err != nil {
		failSpan(s.span, s.err)
	}
	s.span.End()
	return err
}

// failSpan marks an attempt as failed with the error's kind; a call stopped from our side
// (the client left, a timeout, a shutdown) is "canceled", not the backend's failure.
func failSpan(span trace.Span, err error) {
	kind := "canceled"
	if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		kind = llm.KindOf(err).String()
	}
	span.SetAttributes(semconv.ErrorTypeKey.String(kind))
	span.SetStatus(codes.Error, kind)
}
