package broker_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/shoal-mqtt/shoal/compose/broker/brokertest"
	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// otlpReceiver is an OTLP/gRPC collector in the test: it keeps the span
// names, the metric names and the service names it is sent.
type otlpReceiver struct {
	coltracepb.UnimplementedTraceServiceServer

	mu       sync.Mutex
	spans    map[string]int
	metrics  map[string]int
	services map[string]bool
}

func (o *otlpReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				o.services[a.GetValue().GetStringValue()] = true
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				o.spans[s.GetName()]++
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// metricsServer adapts otlpReceiver to the metrics service (whose method
// is also named Export).
type metricsServer struct {
	colmetricpb.UnimplementedMetricsServiceServer
	o *otlpReceiver
}

func (m metricsServer) Export(_ context.Context, req *colmetricpb.ExportMetricsServiceRequest) (*colmetricpb.ExportMetricsServiceResponse, error) {
	m.o.mu.Lock()
	defer m.o.mu.Unlock()
	for _, rm := range req.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, x := range sm.GetMetrics() {
				m.o.metrics[x.GetName()]++
			}
		}
	}
	return &colmetricpb.ExportMetricsServiceResponse{}, nil
}

// startOTLP serves OTLP/gRPC on a loopback port and returns its URL.
func startOTLP(t *testing.T) (*otlpReceiver, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &otlpReceiver{spans: map[string]int{}, metrics: map[string]int{}, services: map[string]bool{}}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, o)
	colmetricpb.RegisterMetricsServiceServer(srv, metricsServer{o: o})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return o, "http://" + ln.Addr().String()
}

// wait polls until the receiver has every span and metric named.
func (o *otlpReceiver) wait(t *testing.T, spans, metrics []string, service string) {
	t.Helper()
	eventually.OK(t, wait, func() string {
		o.mu.Lock()
		defer o.mu.Unlock()
		var missing []string
		for _, s := range spans {
			if o.spans[s] == 0 {
				missing = append(missing, "span "+s)
			}
		}
		for _, m := range metrics {
			if o.metrics[m] == 0 {
				missing = append(missing, "metric "+m)
			}
		}
		if !o.services[service] {
			missing = append(missing, "service.name "+service)
		}
		if len(missing) > 0 {
			return fmt.Sprintf("the OTLP receiver lacks %v", missing)
		}
		return ""
	})
}

// TestOTLPOverTheWire: spans and metrics reach an OTLP/gRPC collector, the
// exporters chosen by the standard OTEL_* variables (through autoexport),
// or by the telemetry section of the configuration.
func TestOTLPOverTheWire(t *testing.T) {
	for _, viaEnv := range []bool{true, false} {
		name := map[bool]string{true: "OTEL_environment", false: "yaml"}[viaEnv]
		t.Run(name, func(t *testing.T) {
			o, url := startOTLP(t)
			service := "shoal-otlp-" + name
			mut := func(c *config.Config) {}
			if viaEnv {
				t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
				t.Setenv("OTEL_METRICS_EXPORTER", "otlp")
				t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
				t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
				t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "200")
				t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
				t.Setenv("OTEL_SERVICE_NAME", service)
			} else {
				t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
				mut = func(c *config.Config) {
					c.Telemetry.ServiceName = service
					c.Telemetry.Traces.Exporter = "otlp"
					c.Telemetry.Metrics.Exporter = "otlp"
					c.Telemetry.Metrics.Interval = 200 * time.Millisecond
					c.Telemetry.OTLP.Endpoint = url
				}
			}
			b := brokertest.Start(t, mut)
			sub, _ := dialV5(t, mqttAddr(b), "acme-sub")
			sub.subscribe(t, pahoSub("otlp/#", 1))
			pub, _ := dialV5(t, mqttAddr(b), "acme-pub")
			pub.publish(t, &paho.Publish{Topic: "otlp/1", QoS: 1, Payload: []byte("x")})
			sub.expect(t)
			o.wait(t,
				[]string{"mqtt.publish", "shoal.messages publish", "router.route", "mqtt.deliver"},
				[]string{"shoal.gateway.messages_received", "shoal.gateway.connections", "go.memory.used", "process.memory.usage"},
				service)
		})
	}
}
