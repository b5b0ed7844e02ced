package telemetry

import (
	"maps"
	"strings"
	"testing"
)

// TestResolveOTLP: the YAML endpoint, headers and protocol are used unless
// an OTEL_EXPORTER_OTLP_* variable (general or of the signal) sets them.
func TestResolveOTLP(t *testing.T) {
	o := OTLP{Endpoint: "http://collector:4317", Protocol: "grpc", Headers: map[string]string{"api-key": "secret"}}
	for _, tc := range []struct {
		env             map[string]string
		proto, endpoint string
		headersFromYAML bool
	}{
		{nil, "grpc", "http://collector:4317", true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4317"}, "grpc", "", true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x:4317"}, "grpc", "", true},
		{map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://x:4317"}, "grpc", "http://collector:4317", true},
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_HEADERS": "a=b"}, "http/protobuf", "http://collector:4317", false},
	} {
		env := func(keys ...string) string {
			for _, k := range keys {
				if v := tc.env[k]; v != "" {
					return v
				}
			}
			return ""
		}
		proto, endpoint, headers := o.resolve(env, "TRACES")
		if proto != tc.proto || endpoint != tc.endpoint || (headers != nil) != tc.headersFromYAML {
			t.Errorf("env %v: %q %q %v, want %q %q yaml headers %v", tc.env, proto, endpoint, headers, tc.proto, tc.endpoint, tc.headersFromYAML)
		}
		if headers != nil && !maps.Equal(headers, o.Headers) {
			t.Errorf("headers %v", headers)
		}
	}
}

// TestValidateNamesTheKey: every bad setting is reported under its key.
func TestValidateNamesTheKey(t *testing.T) {
	c := DefaultConfig()
	c.Traces.Exporter, c.Traces.SampleRatio = "jaeger", 2
	c.Metrics.Exporter, c.OTLP.Protocol, c.OTLP.Endpoint, c.MaxTenantLabels = "statsd", "udp", "collector:4317", -1
	err := c.Validate()
	for _, key := range []string{"telemetry.traces.exporter", "telemetry.traces.sample_ratio", "telemetry.metrics.exporter",
		"telemetry.otlp.protocol", "telemetry.otlp.endpoint", "telemetry.max_tenant_labels"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("Validate() = %v, want it to name %s", err, key)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
