package telemetry

import (
	"context"
	"strings"
	"testing"
)

func TestTracingFromEnv(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		on      bool
		summary string // a fragment of the summary, or of the error
		err     bool
	}{
		{"unset", nil, false, "traces: off (set OTEL_EXPORTER_OTLP_ENDPOINT", false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true,
			"traces: OTLP/HTTP to http://127.0.0.1:4318 (OTEL_EXPORTER_OTLP_ENDPOINT)", false},
		{"traces endpoint wins, user info hidden", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://user:pw@b:4318/v1/traces?k=v"}, true,
			"traces: OTLP/HTTP to http://b:4318/v1/traces (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)", false},
		{"disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_SDK_DISABLED": "true"}, false, "off (OTEL_SDK_DISABLED=true)", false},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_EXPORTER": "none"}, false, "off (OTEL_TRACES_EXPORTER=none)", false},
		{"exporter zipkin", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, `OTEL_TRACES_EXPORTER="zipkin": tollgate exports traces over OTLP only`, true},
		{"grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false,
			`OTEL_EXPORTER_OTLP_PROTOCOL="grpc": tollgate exports OTLP over HTTP only`, true},
		{"traces protocol wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, true, "OTLP/HTTP to http://a:4318", false},
		{"content", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}, true,
			"with prompts", false},
	}
	for _, tc := range cases {
		env := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
		tr, err := NewTracing(context.Background(), env, "v-test")
		if tc.err {
			if err == nil || !strings.Contains(err.Error(), tc.summary) {
				t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.summary)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if (tr.Tracer != nil) != tc.on || !strings.Contains(tr.Summary, tc.summary) {
			t.Errorf("%s: on %v, summary %q; want on %v with %q", tc.name, tr.Tracer != nil, tr.Summary, tc.on, tc.summary)
		}
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Errorf("%s: shutdown: %v", tc.name, err)
		}
	}
}
