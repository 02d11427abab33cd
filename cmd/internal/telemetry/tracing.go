package telemetry

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Tracing is the OpenTelemetry tracing of one gateway process, configured by the standard
// environment variables: on when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (and OTEL_SDK_DISABLED is not true, and
// OTEL_TRACES_EXPORTER is not "none"), exporting over OTLP/HTTP in batches. The exporter reads
// its own OTEL_EXPORTER_OTLP_* variables (headers, timeout, TLS, http/protobuf or http/json),
// the SDK its OTEL_TRACES_SAMPLER* and OTEL_BSP_* ones, the resource OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES. Trace context travels as W3C traceparent and baggage.
type Tracing struct {
	// Tracer makes the spans; nil when tracing is off.
	Tracer trace.Tracer
	// Content is OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true: prompts go into
	// spans. False (unset) keeps them out.
	Content bool
	// Summary says where traces go, for the start-up log; it never shows a header value.
	Summary  string
	provider *sdktrace.TracerProvider
}

// scope is the instrumentation scope of Tollgate's spans.
const scope = "github.com/tollgate/tollgate"

// NewTracing reads env (os.LookupEnv in production). A variable set to a value the exporter
// cannot honour (OTLP over gRPC) is an error naming it. Off, it costs nothing: no tracer, no
// propagator.
func NewTracing(ctx context.Context, env func(string) (string, bool), version string) (*Tracing, error) {
	get := func(k string) string { v, _ := env(k); return strings.TrimSpace(v) }
	t := &Tracing{Content: strings.EqualFold(get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"), "true")}
	endpoint, which := get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	if endpoint == "" {
		endpoint, which = get("OTEL_EXPORTER_OTLP_ENDPOINT"), "OTEL_EXPORTER_OTLP_ENDPOINT"
	}
	switch exp := get("OTEL_TRACES_EXPORTER"); {
	case strings.EqualFold(get("OTEL_SDK_DISABLED"), "true"):
		t.Summary = "traces: off (OTEL_SDK_DISABLED=true)"
		return t, nil
	case exp == "none":
		t.Summary = "traces: off (OTEL_TRACES_EXPORTER=none)"
		return t, nil
	case exp != "" && exp != "otlp":
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: tollgate exports traces over OTLP only (otlp or none)", exp)
	case endpoint == "":
		t.Summary = "traces: off (set OTEL_EXPORTER_OTLP_ENDPOINT to export them over OTLP/HTTP)"
		return t, nil
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := get(k); p != "" {
			if p != "http/protobuf" && p != "http/json" {
				return nil, fmt.Errorf("%s=%q: tollgate exports OTLP over HTTP only (http/protobuf or http/json)", k, p)
			}
			break // the traces setting wins over the general one
		}
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter (%s): %w", which, err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "tollgate"), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("trace resource (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME): %w", err)
	}
	t.provider = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	t.Tracer = t.provider.Tracer(scope, trace.WithInstrumentationVersion(version))
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	t.Summary = fmt.Sprintf("traces: OTLP/HTTP to %s (%s)", safeEndpoint(endpoint), which)
	if t.Content {
		t.Summary += ", with prompts (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true)"
	}
	return t, nil
}

// Shutdown exports the spans still buffered, within ctx, and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.provider == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// safeEndpoint drops user info and query from an endpoint for the log.
func safeEndpoint(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(an endpoint that is not a URL: the exporter will say)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
