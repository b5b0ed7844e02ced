package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	otelruntime "go.opentelemetry.io/contrib/instrumentation/runtime"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/shoal-mqtt/shoal/internal/obs"
)

// Options are what New needs besides the configuration.
type Options struct {
	// Role is the shoal.role resource attribute: all, gateway, router,
	// session or a combination.
	Role string
	// Version is service.version.
	Version string
	// Stdout receives the console exporters' output (os.Stdout if nil).
	Stdout io.Writer
	// LookupEnv reads the OTEL_* variables (os.LookupEnv if nil). The
	// exporters autoexport makes read the process environment themselves.
	LookupEnv func(string) (string, bool)
	// SpanProcessor, if set, is added to the tracer provider and turns
	// tracing on whatever the exporter says: tests give the SDK's
	// in-memory exporter through it.
	SpanProcessor sdktrace.SpanProcessor
	// MetricReader, if set, is added to the meter provider (tests).
	MetricReader sdkmetric.Reader
}

// Telemetry holds a process's providers. Its zero value is not usable; a
// nil *Telemetry gives the noop providers.
type Telemetry struct {
	tp      *sdktrace.TracerProvider // nil: tracing off
	mp      *sdkmetric.MeterProvider
	reg     *prometheus.Registry
	maxTen  int
	closers []func(context.Context) error
}

// New builds the providers of cfg (and the OTEL_* environment) and starts
// the runtime and process instruments. Shutdown flushes and stops them.
func New(ctx context.Context, cfg Config, opts Options) (_ *Telemetry, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Stdout == nil {
		opts.Stdout = os.Stdout
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	env := func(keys ...string) string {
		for _, k := range keys {
			if v, ok := opts.LookupEnv(k); ok && strings.TrimSpace(v) != "" {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}
	t := &Telemetry{maxTen: cfg.MaxTenantLabels}
	defer func() {
		if err != nil {
			_ = t.Shutdown(context.Background())
		}
	}()
	res, err := newResource(ctx, cfg, opts)
	if err != nil {
		return nil, err
	}

	// Traces.
	exp, err := spanExporter(ctx, cfg, opts, env)
	if err != nil {
		return nil, err
	}
	if exp != nil || opts.SpanProcessor != nil {
		tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
		if exp != nil {
			tpOpts = append(tpOpts, sdktrace.WithBatcher(exp))
		}
		if opts.SpanProcessor != nil {
			tpOpts = append(tpOpts, sdktrace.WithSpanProcessor(opts.SpanProcessor))
		}
		if env("OTEL_TRACES_SAMPLER") == "" {
			tpOpts = append(tpOpts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.Traces.SampleRatio))))
		}
		t.tp = sdktrace.NewTracerProvider(tpOpts...)
		t.closers = append(t.closers, t.tp.Shutdown)
	}

	// Metrics: Prometheus on /metrics always, a push reader when chosen.
	t.reg = prometheus.NewRegistry()
	pexp, err := otelprom.New(otelprom.WithRegisterer(t.reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	mpOpts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(pexp)}
	reader, err := metricReader(ctx, cfg, opts, env)
	if err != nil {
		return nil, err
	}
	if reader != nil {
		mpOpts = append(mpOpts, sdkmetric.WithReader(reader))
	}
	if opts.MetricReader != nil {
		mpOpts = append(mpOpts, sdkmetric.WithReader(opts.MetricReader))
	}
	t.mp = sdkmetric.NewMeterProvider(mpOpts...)
	t.closers = append(t.closers, t.mp.Shutdown)
	if err := otelruntime.Start(otelruntime.WithMeterProvider(t.mp), otelruntime.WithMinimumReadMemStatsInterval(5*time.Second)); err != nil {
		return nil, fmt.Errorf("telemetry: runtime instruments: %w", err)
	}
	if err := registerProcess(t.mp.Meter(Scope)); err != nil {
		return nil, fmt.Errorf("telemetry: process instruments: %w", err)
	}
	return t, nil
}

// Scope is the instrumentation scope of Shoal's own instruments and spans.
const Scope = obs.Scope

// Providers returns what the roles report through (obs.Providers).
func (t *Telemetry) Providers() obs.Providers {
	return obs.Providers{Tracer: t.TracerProvider(), Meter: t.MeterProvider(), Tenants: obs.NewTenants(t.MaxTenantLabels()), Tracing: t.Tracing()}
}

// Propagator is the W3C trace context propagator, the format of the
// traceparent Kafka header and MQTT user property.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

func newResource(ctx context.Context, cfg Config, opts Options) (*resource.Resource, error) {
	name := cfg.ServiceName
	if name == "" {
		name = "shoal"
	}
	attrs := []attribute.KeyValue{
		attribute.String("service.name", name),
		attribute.String("service.version", opts.Version),
		attribute.String("shoal.role", opts.Role),
	}
	for k, v := range cfg.ResourceAttributes {
		attrs = append(attrs, attribute.String(k, v))
	}
	// Later detectors override earlier ones: the environment wins.
	res, err := resource.New(ctx,
		resource.WithAttributes(attrs...),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithProcessPID(),
		resource.WithFromEnv(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

// spanExporter returns the exporter chosen by OTEL_TRACES_EXPORTER or
// telemetry.traces.exporter, nil for none.
func spanExporter(ctx context.Context, cfg Config, opts Options, env func(...string) string) (sdktrace.SpanExporter, error) {
	choice := env("OTEL_TRACES_EXPORTER")
	fromEnv := choice != ""
	if !fromEnv {
		choice = cfg.Traces.Exporter
	}
	switch choice {
	case "", "none":
		return nil, nil
	case "console":
		exp, err := stdouttrace.New(stdouttrace.WithWriter(opts.Stdout))
		if err != nil {
			return nil, fmt.Errorf("telemetry: console span exporter: %w", err)
		}
		return exp, nil
	case "otlp":
		if fromEnv {
			exp, err := autoexport.NewSpanExporter(ctx)
			if err != nil {
				return nil, fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER: %w", err)
			}
			return exp, nil
		}
		return otlpSpanExporter(ctx, cfg.OTLP, env)
	}
	return nil, fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER: %q is not none, otlp or console", choice)
}

// resolve returns the protocol of the OTLP exporter of signal (TRACES or
// METRICS) and the endpoint and headers of the YAML settings it must be
// given: "" and nil where an OTEL_EXPORTER_OTLP_* variable, which the
// exporter reads itself, wins (an option given would override it).
func (o OTLP) resolve(env func(...string) string, signal string) (proto, endpoint string, headers map[string]string) {
	pre := "OTEL_EXPORTER_OTLP_"
	proto = env(pre+signal+"_PROTOCOL", pre+"PROTOCOL")
	if proto == "" {
		proto = o.Protocol
	}
	if env(pre+signal+"_ENDPOINT", pre+"ENDPOINT") == "" {
		endpoint = o.Endpoint
	}
	if len(o.Headers) > 0 && env(pre+signal+"_HEADERS", pre+"HEADERS") == "" {
		headers = o.Headers
	}
	return proto, endpoint, headers
}

// otlpSpanExporter makes the OTLP span exporter of the YAML settings.
func otlpSpanExporter(ctx context.Context, o OTLP, env func(...string) string) (sdktrace.SpanExporter, error) {
	proto, endpoint, headers := o.resolve(env, "TRACES")
	var exp sdktrace.SpanExporter
	var err error
	switch proto {
	case "", "grpc":
		var xo []otlptracegrpc.Option
		if headers != nil {
			xo = append(xo, otlptracegrpc.WithHeaders(headers))
		}
		if endpoint != "" {
			xo = append(xo, otlptracegrpc.WithEndpointURL(endpoint))
		}
		exp, err = otlptracegrpc.New(ctx, xo...)
	case "http/protobuf":
		var xo []otlptracehttp.Option
		if headers != nil {
			xo = append(xo, otlptracehttp.WithHeaders(headers))
		}
		if endpoint != "" {
			xo = append(xo, otlptracehttp.WithEndpointURL(endpoint))
		}
		exp, err = otlptracehttp.New(ctx, xo...)
	default:
		return nil, fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_PROTOCOL: %q is not grpc or http/protobuf", proto)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: otlp span exporter: %w", err)
	}
	return exp, nil
}

// metricReader returns the push reader chosen by OTEL_METRICS_EXPORTER or
// telemetry.metrics.exporter, nil for none (and for prometheus: /metrics
// serves it).
func metricReader(ctx context.Context, cfg Config, opts Options, env func(...string) string) (sdkmetric.Reader, error) {
	choice := env("OTEL_METRICS_EXPORTER")
	fromEnv := choice != ""
	if !fromEnv {
		choice = cfg.Metrics.Exporter
	}
	interval := cfg.Metrics.Interval
	if interval <= 0 {
		interval = 60 * time.Second
	}
	periodic := func(exp sdkmetric.Exporter) sdkmetric.Reader {
		if env("OTEL_METRIC_EXPORT_INTERVAL") != "" {
			return sdkmetric.NewPeriodicReader(exp) // reads the variable
		}
		return sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(interval))
	}
	switch choice {
	case "", "none", "prometheus":
		return nil, nil
	case "console":
		exp, err := stdoutmetric.New(stdoutmetric.WithWriter(opts.Stdout))
		if err != nil {
			return nil, fmt.Errorf("telemetry: console metric exporter: %w", err)
		}
		return periodic(exp), nil
	case "otlp":
		if fromEnv {
			r, err := autoexport.NewMetricReader(ctx)
			if err != nil {
				return nil, fmt.Errorf("telemetry: OTEL_METRICS_EXPORTER: %w", err)
			}
			return r, nil
		}
		proto, endpoint, headers := cfg.OTLP.resolve(env, "METRICS")
		var exp sdkmetric.Exporter
		var err error
		switch proto {
		case "", "grpc":
			var xo []otlpmetricgrpc.Option
			if headers != nil {
				xo = append(xo, otlpmetricgrpc.WithHeaders(headers))
			}
			if endpoint != "" {
				xo = append(xo, otlpmetricgrpc.WithEndpointURL(endpoint))
			}
			exp, err = otlpmetricgrpc.New(ctx, xo...)
		case "http/protobuf":
			var xo []otlpmetrichttp.Option
			if headers != nil {
				xo = append(xo, otlpmetrichttp.WithHeaders(headers))
			}
			if endpoint != "" {
				xo = append(xo, otlpmetrichttp.WithEndpointURL(endpoint))
			}
			exp, err = otlpmetrichttp.New(ctx, xo...)
		default:
			return nil, fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_PROTOCOL: %q is not grpc or http/protobuf", proto)
		}
		if err != nil {
			return nil, fmt.Errorf("telemetry: otlp metric exporter: %w", err)
		}
		return periodic(exp), nil
	}
	return nil, fmt.Errorf("telemetry: OTEL_METRICS_EXPORTER: %q is not none, prometheus, otlp or console", choice)
}

// Tracing reports whether spans are recorded.
func (t *Telemetry) Tracing() bool { return t != nil && t.tp != nil }

// TracerProvider returns the tracer provider, a noop one when tracing is
// off.
func (t *Telemetry) TracerProvider() trace.TracerProvider {
	if !t.Tracing() {
		return tracenoop.NewTracerProvider()
	}
	return t.tp
}

// MeterProvider returns the meter provider (noop for a nil Telemetry).
func (t *Telemetry) MeterProvider() metric.MeterProvider {
	if t == nil {
		return metricnoop.NewMeterProvider()
	}
	return t.mp
}

// MaxTenantLabels is telemetry.max_tenant_labels.
func (t *Telemetry) MaxTenantLabels() int {
	if t == nil {
		return 0
	}
	return t.maxTen
}

// MetricsHandler serves the metrics in Prometheus' text format, or in
// OpenMetrics (with the histograms' exemplars) to a scraper asking for it.
func (t *Telemetry) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(t.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// ForceFlush exports what the batching span processor and the push
// readers hold.
func (t *Telemetry) ForceFlush(ctx context.Context) error {
	var errs []error
	if t.tp != nil {
		errs = append(errs, t.tp.ForceFlush(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.ForceFlush(ctx))
	}
	return errors.Join(errs...)
}

// Shutdown flushes and stops the providers.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	for i := len(t.closers) - 1; i >= 0; i-- {
		errs = append(errs, t.closers[i](ctx))
	}
	t.closers = nil
	return errors.Join(errs...)
}
