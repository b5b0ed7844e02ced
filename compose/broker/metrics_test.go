package broker_test

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/shoal-mqtt/shoal/compose/broker"
	"github.com/shoal-mqtt/shoal/compose/broker/brokertest"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// scrape reads the broker's /metrics and parses it with Prometheus' own
// text parser: what a Prometheus server would store.
func scrape(t *testing.T, b *broker.Broker) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := http.Get("http://" + b.Addr("http").String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("/metrics Content-Type %q, want text/plain", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// sampleLines renders every sample as `name{label="value",…} value`,
// labels in order of name, values in Go's shortest form.
func sampleLines(fams map[string]*dto.MetricFamily) []string {
	var lines []string
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var v float64
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				v = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
			case dto.MetricType_UNTYPED:
				v = m.GetUntyped().GetValue()
			default:
				continue
			}
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+`="`+l.GetValue()+`"`)
			}
			slices.Sort(ls)
			line := name
			if len(ls) > 0 {
				line += "{" + strings.Join(ls, ",") + "}"
			}
			lines = append(lines, line+" "+strconv.FormatFloat(v, 'f', -1, 64))
		}
	}
	slices.Sort(lines)
	return lines
}

// expectMetrics checks that /metrics has each sample line (labels in
// order of name).
func expectMetrics(t *testing.T, b *broker.Broker, lines ...string) {
	t.Helper()
	have := sampleLines(scrape(t, b))
	for _, l := range lines {
		if !slices.Contains(have, l) {
			t.Errorf("/metrics lacks %q:\n%s", l, strings.Join(have, "\n"))
		}
	}
}

// TestMetricsKeepTheirNames: /metrics, now the OpenTelemetry SDK's
// Prometheus exporter, still has every name the hand-written text had, with
// its type, and the Go runtime and process metrics besides.
func TestMetricsKeepTheirNames(t *testing.T) {
	b := brokertest.Start(t)
	c := dialRaw(t, mqttAddr(b), packet.V5)
	c.connect(&packet.Connect{ClientID: []byte("acme-metrics"), CleanStart: true})
	fams := scrape(t, b)
	for name, typ := range map[string]dto.MetricType{
		"shoal_gateway_connections":             dto.MetricType_GAUGE,
		"shoal_gateway_connections_total":       dto.MetricType_COUNTER,
		"shoal_gateway_messages_received_total": dto.MetricType_COUNTER,
		"shoal_gateway_messages_sent_total":     dto.MetricType_COUNTER,
		"shoal_gateway_bytes_received_total":    dto.MetricType_COUNTER,
		"shoal_gateway_bytes_sent_total":        dto.MetricType_COUNTER,
		"shoal_gateway_messages_dropped_total":  dto.MetricType_COUNTER,
		"shoal_gateway_acl_denied_total":        dto.MetricType_COUNTER,
		"shoal_gateway_auth_failures_total":     dto.MetricType_COUNTER,
		"shoal_gateway_connections_parked":      dto.MetricType_GAUGE,
		"shoal_gateway_parks_total":             dto.MetricType_COUNTER,
		"shoal_gateway_tenant_connections":      dto.MetricType_GAUGE,
		"shoal_session_inbox_dropped_total":     dto.MetricType_COUNTER,
		"shoal_ready":                           dto.MetricType_GAUGE,
		// The runtime and the process, without a profiler.
		"go_memory_used_bytes":               dto.MetricType_GAUGE,
		"go_goroutine_count":                 dto.MetricType_GAUGE,
		"process_memory_usage_bytes":         dto.MetricType_GAUGE,
		"process_open_file_descriptor_count": dto.MetricType_GAUGE,
	} {
		f, ok := fams[name]
		if !ok {
			t.Errorf("/metrics has no %s", name)
			continue
		}
		if f.GetType() != typ {
			t.Errorf("%s is a %v, want %v", name, f.GetType(), typ)
		}
	}
	expectMetrics(t, b, "shoal_gateway_connections 1", `shoal_gateway_tenant_connections{tenant="acme"} 1`, "shoal_ready 1")
	if testing.Verbose() {
		for n := range fams {
			t.Log(n)
		}
	}
}
