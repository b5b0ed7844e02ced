package charttest

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestValuesRefused: values.schema.json refuses an unknown key or a value
// of the wrong type, and the chart's own checks refuse impossible
// combinations; each error names the key.
func TestValuesRefused(t *testing.T) {
	for _, c := range []struct {
		set  []string
		want []string // every one must be in the error
	}{
		{[]string{"gateway.replicaz=2"}, []string{"gateway", "replicaz"}},
		{[]string{"replicas=2"}, []string{"replicas"}},
		{[]string{"gateway.replicas=two"}, []string{"gateway", "replicas"}},
		{[]string{"kafka.mode=zookeeper"}, []string{"kafka", "mode"}},
		{[]string{"kafka.retention=7 days"}, []string{"kafka", "retention"}},
		{[]string{"kafka.retentionBytes=-2"}, []string{"kafka", "retentionBytes"}},
		{[]string{"tls.identity=san"}, []string{"tls", "identity"}},
		{[]string{"router.autoscaling.enabled=yes"}, []string{"router", "autoscaling", "enabled"}},
		{[]string{"haproxy.service.ports.mqtt=70000"}, []string{"haproxy", "mqtt"}},
		{[]string{"kafka.mode=external"}, []string{"kafka.external.brokers"}},
		{[]string{"cql.mode=external"}, []string{"cql.external.hosts"}},
		{[]string{"gateway.replicas=20"}, []string{"gateway.replicas", "kafka.partitions", "16 partitions"}},
		{[]string{"gateway.replicas=20", "kafka.deliveriesPartitions=18"}, []string{"gateway.replicas", "kafka.deliveriesPartitions", "18 partitions"}},
		{[]string{"kafka.deliveriesPartitions=-1"}, []string{"kafka", "deliveriesPartitions"}},
		{[]string{"session.replicas=17"}, []string{"session.replicas", "16 partitions"}},
		{[]string{"router.autoscaling.enabled=true", "router.autoscaling.maxReplicas=20"}, []string{"router.autoscaling.maxReplicas", "20 instances", "16 partitions"}},
		{[]string{"session.autoscaling.enabled=true", "session.autoscaling.minReplicas=9"}, []string{"session.autoscaling.minReplicas", "maxReplicas 8"}},
		{[]string{"router.autoscaling.changePeriodSeconds=0"}, []string{"router", "changePeriodSeconds"}},
		{[]string{"tls.enabled=true"}, []string{"tls.secretName"}},
		{[]string{"haproxy.pools.a={0}"}, []string{"haproxy.pools", "default"}},
		{[]string{"haproxy.tenants.acme=gold"}, []string{"haproxy.tenants.acme", "gold"}},
		{[]string{"haproxy.pools.default={0,5}"}, []string{"haproxy.pools.default", "gateway 5"}},
		{[]string{"kafka.mode=external", "kafka.external.brokers={k:9092}", "kafka.external.sasl.mechanism=PLAIN"}, []string{"kafka.external.sasl.passwordSecret.name"}},
		{[]string{"bridge.replicas=0"}, []string{"bridge", "replicas"}},
		{[]string{"bridge.mappings.both=true"}, []string{"bridge", "mappings", "both"}},
		{[]string{"config.bridges.kafka.instance_id=bridge-0"}, []string{"config.bridges", "bridge.mappings"}},
	} {
		t.Run(strings.Join(c.set, ","), func(t *testing.T) { refused(t, nil, c.set, c.want) })
	}
}

// refused renders the chart with the values files and the --set pairs
// set, which must fail with an error naming every string of want.
func refused(t *testing.T, values, set, want []string) {
	t.Helper()
	_, err := helm(t, templateArgs(values, set...)...)
	if err == nil {
		t.Fatalf("rendered with %v %v", values, set)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not name %q:\n%v", w, err)
		}
	}
}

// TestReadmeDocumentsEveryValue: every key of values.yaml (a map's keys,
// down to leaves and to maps that are empty by default) appears as
// `key.path` in the chart's README.md, and the README names no key that
// values.yaml does not have.
func TestReadmeDocumentsEveryValue(t *testing.T) {
	b, err := os.ReadFile(chartDir + "/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	var keys []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 && !freeForm(prefix+k) {
				walk(prefix+k+".", sub)
				continue
			}
			keys = append(keys, prefix+k)
		}
	}
	walk("", values)
	sort.Strings(keys)
	readme, err := os.ReadFile(chartDir + "/README.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Za-z0-9_.]+)` \\|").FindAllSubmatch(readme, -1) {
		documented[string(m[1])] = true
	}
	for _, k := range keys {
		if !documented[k] {
			t.Errorf("values.yaml's %s is not in README.md's tables (a row \"| `%s` | …\")", k, k)
		}
	}
	for k := range documented {
		if !slices.Contains(keys, k) {
			t.Errorf("README.md documents %s, which values.yaml does not have", k)
		}
	}
}

// freeForm reports whether a values key holds a map whose keys are the
// user's (resources, labels, Shoal's own config…): documented as one row.
func freeForm(key string) bool {
	last := key[strings.LastIndex(key, ".")+1:]
	switch last {
	case "resources", "config", "podSecurityContext", "containerSecurityContext", "labels", "requests", "limits":
		return true
	}
	return false
}

// TestHAProxyConfigFromRepository: the chart's haproxy.cfg is
// haproxy/haproxy.cfg, and its backends.cfg is what
// haproxy/render-backends.sh writes (RESOLVERS=1) for the same pools:
// the gateways' mqtt and ws listeners, and with tls.enabled their mqtts
// and wss listeners too. The Service <release>-mqtt opens HAProxy's
// frontends for the same listeners.
func TestHAProxyConfigFromRepository(t *testing.T) {
	cfg, err := os.ReadFile("../../../haproxy/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		values []string
		// server is gateway i as render-backends.sh takes it.
		server func(name, host string) string
		ports  string // the Service's, name:port
	}{
		{"tls", []string{"testdata/values/tenants.yaml", "testdata/values/tls.yaml"},
			func(name, host string) string {
				return name + "@" + host + ":1883@9090@" + host + ":8883@" + host + ":8083@" + host + ":8084"
			}, "mqtt:1883 ws:8083 mqtts:8883 wss:8084"},
		{"no tls", []string{"testdata/values/tenants.yaml"},
			func(name, host string) string { return name + "@" + host + ":1883@9090@@" + host + ":8083" },
			"mqtt:1883 ws:8083"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, tc.values)
			cm := find(t, objs, "ConfigMap", release+"-haproxy")
			data := func(key string) string { return stringField(t, cm, "data", key) }
			if strings.TrimSpace(data("haproxy.cfg")) != strings.TrimSpace(string(cfg)) {
				t.Errorf("the chart's haproxy.cfg is not haproxy/haproxy.cfg:\n%s", firstDiff(cfg, []byte(data("haproxy.cfg"))))
			}
			gw := func(i int) string {
				name := "shoal-gateway-" + string(rune('0'+i))
				return tc.server(name, name+".shoal-gateway.mqtt.svc")
			}
			cmd := exec.Command("../../../haproxy/render-backends.sh",
				"default="+gw(0)+","+gw(1), "premium="+gw(2)+","+gw(3))
			cmd.Env = append(os.Environ(), "RESOLVERS=1")
			want, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(data("backends.cfg")) != strings.TrimSpace(string(want)) {
				t.Errorf("the chart's backends.cfg is not render-backends.sh's:\n%s", firstDiff(want, []byte(strings.TrimSpace(data("backends.cfg"))+"\n")))
			}
			tenants := data("tenants.map")
			for _, line := range []string{"acme premium", "globex premium"} {
				if !strings.Contains(tenants, "\n"+line+"\n") && !strings.HasSuffix(tenants, "\n"+line) {
					t.Errorf("tenants.map lacks %q:\n%s", line, tenants)
				}
			}
			svc := find(t, objs, "Service", release+"-mqtt")
			list, _ := field(svc.Fields, "spec", "ports")
			ports, _ := list.([]any)
			var got []string
			for _, p := range ports {
				p, _ := p.(map[string]any)
				got = append(got, fmt.Sprint(p["name"], ":", p["port"]))
			}
			if strings.Join(got, " ") != tc.ports {
				t.Errorf("%s ports %q, want %q", svc, strings.Join(got, " "), tc.ports)
			}
		})
	}
}

// TestDashboardFromRepository: the dashboard ConfigMap holds
// deploy/grafana/shoal.json as it is.
func TestDashboardFromRepository(t *testing.T) {
	cm := find(t, render(t, nil), "ConfigMap", release+"-dashboard")
	want, err := os.ReadFile("../../grafana/shoal.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := stringField(t, cm, "data", "shoal.json"); strings.TrimSpace(got) != strings.TrimSpace(string(want)) {
		t.Fatalf("%s does not hold deploy/grafana/shoal.json", cm)
	}
}

// TestAutoscalingOneAtATime: the routers' and session services'
// HorizontalPodAutoscalers add and remove one instance per period, and
// remove none before the stabilization window: each change moves
// partitions, which pause while their new owner rebuilds them.
func TestAutoscalingOneAtATime(t *testing.T) {
	objs := render(t, nil, "router.autoscaling.enabled=true", "session.autoscaling.enabled=true",
		"session.autoscaling.changePeriodSeconds=120", "kafka.partitions=8", "router.autoscaling.maxReplicas=8", "session.autoscaling.maxReplicas=8")
	for _, c := range []struct {
		role         string
		period, hold float64
	}{{"router", 60, 300}, {"session", 120, 300}} {
		var hpa map[string]any
		for _, o := range objs {
			if o.Kind == "HorizontalPodAutoscaler" && strings.HasSuffix(o.Name, "-"+c.role) {
				if err := yaml.Unmarshal(o.YAML, &hpa); err != nil {
					t.Fatal(err)
				}
			}
		}
		if hpa == nil {
			t.Fatalf("no HorizontalPodAutoscaler for %s", c.role)
		}
		for _, dir := range []string{"scaleUp", "scaleDown"} {
			pol, ok := field(hpa, "spec", "behavior", dir, "policies", 0)
			p, _ := pol.(map[string]any)
			if !ok || p["type"] != "Pods" || p["value"] != float64(1) || p["periodSeconds"] != c.period {
				t.Errorf("%s %s: policy %v, want 1 pod per %g s", c.role, dir, pol, c.period)
			}
		}
		if w, _ := field(hpa, "spec", "behavior", "scaleDown", "stabilizationWindowSeconds"); w != c.hold {
			t.Errorf("%s: scale-down window %v, want %g", c.role, w, c.hold)
		}
	}
}
