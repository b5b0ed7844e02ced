package telemetry

import (
	"errors"
	"fmt"
	"net/url"
	"time"
)

// Config is the telemetry section of Shoal's configuration. The OTEL_*
// environment variables named beside each key override it.
type Config struct {
	// ServiceName is the service.name resource attribute (default
	// "shoal"; OTEL_SERVICE_NAME).
	ServiceName string `yaml:"service_name"`
	// ResourceAttributes are added to the resource of every span and
	// metric (OTEL_RESOURCE_ATTRIBUTES adds to and overrides them).
	ResourceAttributes map[string]string `yaml:"resource_attributes"`
	Traces             Traces            `yaml:"traces"`
	Metrics            Metrics           `yaml:"metrics"`
	// OTLP is where the otlp exporters send (OTEL_EXPORTER_OTLP_*).
	OTLP OTLP `yaml:"otlp"`
	// MaxTenantLabels caps the tenants that get a label of their own on
	// the per-tenant metrics; the others are counted under tenant="_other"
	// so that a fleet of many tenants cannot blow up the series count
	// (default 100, 0 labels no tenant).
	MaxTenantLabels int `yaml:"max_tenant_labels"`
}

// Traces chooses the span exporter and the sampler.
type Traces struct {
	// Exporter is none (the default: no spans are recorded), otlp or
	// console (JSON on standard output) (OTEL_TRACES_EXPORTER).
	Exporter string `yaml:"exporter"`
	// SampleRatio is the share of new traces recorded, 0 to 1 (default
	// 1); a trace continued from a client's or another role's traceparent
	// follows its parent's choice (parent-based sampling;
	// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG replace the sampler).
	SampleRatio float64 `yaml:"sample_ratio"`
}

// Metrics chooses where metrics are pushed besides /metrics, which always
// serves them for Prometheus when http_listen is set.
type Metrics struct {
	// Exporter is none (the default), otlp or console
	// (OTEL_METRICS_EXPORTER; "prometheus" there means /metrics only).
	Exporter string `yaml:"exporter"`
	// Interval between two pushes (default 60s; OTEL_METRIC_EXPORT_INTERVAL).
	Interval time.Duration `yaml:"interval"`
}

// OTLP is the OTLP endpoint of the otlp exporters.
type OTLP struct {
	// Endpoint is the collector's URL, e.g. http://otel-collector:4317
	// (OTEL_EXPORTER_OTLP_ENDPOINT); empty: the exporters' default,
	// localhost:4317 for grpc and localhost:4318 for http/protobuf.
	Endpoint string `yaml:"endpoint"`
	// Protocol is grpc (the default) or http/protobuf
	// (OTEL_EXPORTER_OTLP_PROTOCOL).
	Protocol string `yaml:"protocol"`
	// Headers are sent with every export, e.g. an API key
	// (OTEL_EXPORTER_OTLP_HEADERS). They are never logged.
	Headers map[string]string `yaml:"headers"`
}

// DefaultConfig returns the defaults: no spans, metrics on /metrics only.
func DefaultConfig() Config {
	return Config{
		ServiceName:     "shoal",
		Traces:          Traces{Exporter: "none", SampleRatio: 1},
		Metrics:         Metrics{Exporter: "none", Interval: 60 * time.Second},
		OTLP:            OTLP{Protocol: "grpc"},
		MaxTenantLabels: 100,
	}
}

// Validate reports every invalid setting, each naming its key.
func (c Config) Validate() error {
	var errs []error
	switch c.Traces.Exporter {
	case "", "none", "otlp", "console":
	default:
		errs = append(errs, fmt.Errorf("telemetry.traces.exporter: %q is not none, otlp or console", c.Traces.Exporter))
	}
	if c.Traces.SampleRatio < 0 || c.Traces.SampleRatio > 1 {
		errs = append(errs, fmt.Errorf("telemetry.traces.sample_ratio: must be between 0 and 1, is %g", c.Traces.SampleRatio))
	}
	switch c.Metrics.Exporter {
	case "", "none", "otlp", "console":
	default:
		errs = append(errs, fmt.Errorf("telemetry.metrics.exporter: %q is not none, otlp or console", c.Metrics.Exporter))
	}
	if c.Metrics.Interval < 0 {
		errs = append(errs, fmt.Errorf("telemetry.metrics.interval: must be ≥ 0, is %s", c.Metrics.Interval))
	}
	switch c.OTLP.Protocol {
	case "", "grpc", "http/protobuf":
	default:
		errs = append(errs, fmt.Errorf("telemetry.otlp.protocol: %q is not grpc or http/protobuf", c.OTLP.Protocol))
	}
	if c.OTLP.Endpoint != "" {
		if u, err := url.Parse(c.OTLP.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("telemetry.otlp.endpoint: %q is not an http:// or https:// URL", c.OTLP.Endpoint))
		}
	}
	if c.MaxTenantLabels < 0 {
		errs = append(errs, fmt.Errorf("telemetry.max_tenant_labels: must be ≥ 0, is %d", c.MaxTenantLabels))
	}
	return errors.Join(errs...)
}
