package broker_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/eclipse/paho.golang/paho"
	dto "github.com/prometheus/client_model/go"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// dashboardPath is the Grafana dashboard shipped with Shoal.
var dashboardPath = filepath.Join("..", "..", "deploy", "grafana", "shoal.json")

// dashboardPanel is what the test reads of a panel: its queries, and the
// panels of a collapsed row.
type dashboardPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"`
}

// dashboardExprs returns every panel's PromQL, by panel title.
func dashboardExprs(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		SchemaVersion int              `json:"schemaVersion"`
		Panels        []dashboardPanel `json:"panels"`
		Templating    struct {
			List []struct {
				Name string `json:"name"`
				Type string `json:"type"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d: want a current Grafana's", d.SchemaVersion)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Type+":"+v.Name)
	}
	for _, want := range []string{"datasource:datasource", "query:job", "query:instance"} {
		if !slices.Contains(vars, want) {
			t.Errorf("dashboard variables %v lack %s", vars, want)
		}
	}
	exprs := make(map[string][]string)
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				exprs[p.Title] = append(exprs[p.Title], tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return exprs
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promVariable = regexp.MustCompile(`\$\{?\w+\}?`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promKeywords = []string{"and", "or", "unless", "bool", "offset", "inf", "nan", "by", "without", "on", "ignoring", "group_left", "group_right"}
)

// promMetrics returns the metric names a PromQL expression selects: its
// identifiers that are not functions, keywords, label names in matchers
// or groupings, Grafana variables or parts of numbers.
func promMetrics(expr string) []string {
	for _, re := range []*regexp.Regexp{promString, promMatchers, promRange, promGrouping, promVariable} {
		expr = re.ReplaceAllString(expr, " ")
	}
	var names []string
	for _, loc := range promIdent.FindAllStringIndex(expr, -1) {
		name := expr[loc[0]:loc[1]]
		if loc[0] > 0 && strings.ContainsRune("0123456789.", rune(expr[loc[0]-1])) {
			continue // an exponent: 1e9
		}
		if strings.HasPrefix(strings.TrimLeft(expr[loc[1]:], " "), "(") || slices.Contains(promKeywords, name) {
			continue
		}
		names = append(names, name)
	}
	return names
}

func TestPromMetrics(t *testing.T) {
	for expr, want := range map[string][]string{
		`histogram_quantile(0.99, sum by (le, topic) (rate(a_bucket{job=~"$job",x="}"}[$__rate_interval])))`: {"a_bucket"},
		`sum(rate(b_total{i=~"${instance}"}[5m])) / sum(rate(c_count[1m])) * 1e9`:                            {"b_total", "c_count"},
		`topk(10, sum without (tenant) (d)) and on (x) e offset 5m`:                                          {"d", "e"},
	} {
		if got := promMetrics(expr); !slices.Equal(got, want) {
			t.Errorf("promMetrics(%q) = %q, want %q", expr, got, want)
		}
	}
}

// TestDashboardMetricsExist: every metric the Grafana dashboard queries
// is on /metrics of a `shoal all` that has seen a little traffic (a
// refused and two accepted connects, a QoS 1 publish to a subscriber, a
// retained message): a renamed metric, or a dashboard typo, fails here
// rather than as an empty panel.
func TestDashboardMetricsExist(t *testing.T) {
	exprs := dashboardExprs(t)
	b := startBroker(t, withPasswords(t))
	r := dialRaw(t, mqttAddr(b), packet.V5)
	r.connect(&packet.Connect{ClientID: []byte("acme-x"), CleanStart: true, UsernameFlag: true,
		Username: []byte("acme-alice"), PasswordFlag: true, Password: []byte("wrong horse")})
	sub, _ := dialV5(t, mqttAddr(b), "acme-sub")
	sub.subscribe(t, pahoSub("d/#", 1))
	pub, _ := dialV5(t, mqttAddr(b), "acme-pub")
	pub.publish(t, &paho.Publish{Topic: "d/1", QoS: 1, Payload: []byte("x")})
	sub.expect(t)
	pub.publish(t, &paho.Publish{Topic: "kept", QoS: 1, Retain: true, Payload: []byte("x")})
	fams := waitScrape(t, b, "the traffic's metrics", func(fams map[string]*dto.MetricFamily) bool {
		return len(series(fams, "shoal_router_retained")) > 0 && len(series(fams, "shoal_kafka_consumer_lag")) > 0 &&
			len(series(fams, "shoal_delivery_latency_seconds")) > 0
	})

	exposed := func(name string) bool {
		if f, ok := fams[name]; ok && len(f.GetMetric()) > 0 {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && fams[base].GetType() == dto.MetricType_HISTOGRAM && len(fams[base].GetMetric()) > 0 {
				return true
			}
		}
		return false
	}
	checked := 0
	for title, es := range exprs {
		for _, e := range es {
			names := promMetrics(e)
			if len(names) == 0 {
				t.Errorf("panel %q: %q selects no metric", title, e)
			}
			for _, n := range names {
				checked++
				if !exposed(n) {
					t.Errorf("panel %q queries %s, which /metrics does not expose", title, n)
				}
			}
		}
	}
	if len(exprs) < 20 || checked < 30 {
		t.Errorf("%d panels with queries, %d metric references: the dashboard was not read", len(exprs), checked)
	}
}
