package testmetrics

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/shoal-mqtt/shoal/internal/obs"
)

// Reader reads what the instruments of its providers hold.
type Reader struct {
	t testing.TB
	r *sdkmetric.ManualReader
}

// New returns providers whose meter provider is the SDK's, read by the
// returned Reader, with tenant labels capped at maxTenants. The provider
// is shut down when the test ends.
func New(t testing.TB, maxTenants int) (obs.Providers, *Reader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return obs.Providers{Meter: mp, Tenants: obs.NewTenants(maxTenants)}.WithDefaults(), &Reader{t: t, r: r}
}

// Point is one series of an instrument: its attributes (as key=value
// pairs) and its value; for a histogram, Value is its sum and Count its
// count.
type Point struct {
	Attrs map[string]string
	Value float64
	Count uint64
}

// Points collects and returns the series of the instrument name, nil when
// it has none.
func (r *Reader) Points(name string) []Point {
	r.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.r.Collect(context.Background(), &rm); err != nil {
		r.t.Fatalf("collect metrics: %v", err)
	}
	var ps []Point
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					ps = append(ps, Point{Attrs: attrs(dp.Attributes), Value: float64(dp.Value)})
				}
			case metricdata.Sum[float64]:
				for _, dp := range d.DataPoints {
					ps = append(ps, Point{Attrs: attrs(dp.Attributes), Value: dp.Value})
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					ps = append(ps, Point{Attrs: attrs(dp.Attributes), Value: float64(dp.Value)})
				}
			case metricdata.Gauge[float64]:
				for _, dp := range d.DataPoints {
					ps = append(ps, Point{Attrs: attrs(dp.Attributes), Value: dp.Value})
				}
			case metricdata.Histogram[int64]:
				for _, dp := range d.DataPoints {
					ps = append(ps, Point{Attrs: attrs(dp.Attributes), Value: float64(dp.Sum), Count: dp.Count})
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					ps = append(ps, Point{Attrs: attrs(dp.Attributes), Value: dp.Sum, Count: dp.Count})
				}
			default:
				r.t.Fatalf("metric %s: unexpected data %T", name, m.Data)
			}
		}
	}
	return ps
}

// Find returns the series of name whose attributes are exactly kv (pairs
// of key and value), and whether there is one.
func (r *Reader) Find(name string, kv ...string) (Point, bool) {
	r.t.Helper()
	for _, p := range r.Points(name) {
		if matches(p.Attrs, kv) {
			return p, true
		}
	}
	return Point{}, false
}

// Value returns the value (a histogram: the sum) of the series of name
// with attributes kv, 0 when there is none.
func (r *Reader) Value(name string, kv ...string) float64 {
	r.t.Helper()
	p, _ := r.Find(name, kv...)
	return p.Value
}

// Count returns the count of the histogram series of name with
// attributes kv, 0 when there is none.
func (r *Reader) Count(name string, kv ...string) uint64 {
	r.t.Helper()
	p, _ := r.Find(name, kv...)
	return p.Count
}

func matches(attrs map[string]string, kv []string) bool {
	if len(kv)%2 != 0 || len(attrs) != len(kv)/2 {
		return false
	}
	for i := 0; i < len(kv); i += 2 {
		if v, ok := attrs[kv[i]]; !ok || v != kv[i+1] {
			return false
		}
	}
	return true
}

func attrs(s attribute.Set) map[string]string {
	m := make(map[string]string, s.Len())
	for _, kv := range s.ToSlice() {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}
