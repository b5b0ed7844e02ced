package obs

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// OtherTenant is the tenant label of the tenants beyond the cap.
const OtherTenant = "_other"

// Tenants hands out the tenant attribute of per-tenant metrics, at most
// max distinct tenants; later ones share OtherTenant, so that the number
// of series stays bounded whatever clients connect. The first tenants seen
// keep their label for the life of the process. Safe for concurrent use.
type Tenants struct {
	max   int
	other attribute.Set

	mu   sync.RWMutex
	sets map[string]attribute.Set
}

// NewTenants returns a Tenants labelling at most max tenants.
func NewTenants(max int) *Tenants {
	return &Tenants{
		max:   max,
		other: attribute.NewSet(attribute.String("tenant", OtherTenant)),
		sets:  make(map[string]attribute.Set),
	}
}

// Set returns the attribute set {tenant=t}, or {tenant=_other} once max
// tenants have their own.
func (ts *Tenants) Set(t string) attribute.Set {
	if ts == nil {
		return attribute.NewSet()
	}
	ts.mu.RLock()
	s, ok := ts.sets[t]
	n := len(ts.sets)
	ts.mu.RUnlock()
	if ok {
		return s
	}
	if n >= ts.max {
		return ts.other
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if s, ok := ts.sets[t]; ok {
		return s
	}
	if len(ts.sets) >= ts.max {
		return ts.other
	}
	s = attribute.NewSet(attribute.String("tenant", t))
	ts.sets[t] = s
	return s
}

// LatencyBuckets are the bucket bounds, in seconds, of Shoal's latency
// histograms: 50 µs to 10 s, dense where a broker's latencies are.
var LatencyBuckets = []float64{
	0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
	0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// Providers are what a role reports through: the tracer provider (a noop
// one when tracing is off, Tracing false), the meter provider, and the
// capped tenant labels. The zero value reports nothing.
type Providers struct {
	Tracer  trace.TracerProvider
	Meter   metric.MeterProvider
	Tenants *Tenants
	// Tracing says that spans are recorded: without it a role starts
	// none and its hot paths do no trace work at all.
	Tracing bool
}

// Scope is the instrumentation scope of Shoal's instruments and spans.
const Scope = "github.com/shoal-mqtt/shoal"

// WithDefaults returns p with noop providers where it has none.
func (p Providers) WithDefaults() Providers {
	if p.Tracer == nil {
		p.Tracer = tracenoop.NewTracerProvider()
		p.Tracing = false
	}
	if p.Meter == nil {
		p.Meter = metricnoop.NewMeterProvider()
	}
	if p.Tenants == nil {
		p.Tenants = NewTenants(0)
	}
	return p
}
