package charttest

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/golden")

// TestLint runs `helm lint --strict` (warnings fail) for every documented
// combination of values.
func TestLint(t *testing.T) {
	for _, c := range combinations(t) {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"lint", "--strict", chartDir, "--namespace", namespace, "--kube-version", kubeVersion}
			for _, v := range c.values {
				args = append(args, "-f", v)
			}
			out, err := helm(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(out, []byte("0 chart(s) failed")) {
				t.Fatalf("helm lint:\n%s", out)
			}
		})
	}
}

// coreTypes are the Kubernetes API types the chart renders, by apiVersion
// and kind. A kind outside this table, and outside the CRDs vendored in
// testdata/crds, fails TestStrictDecode: a new kind needs its type here.
var coreTypes = map[string]func() any{
	"v1/ConfigMap":                           func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                              func() any { return &corev1.Secret{} },
	"v1/Service":                             func() any { return &corev1.Service{} },
	"apps/v1/StatefulSet":                    func() any { return &appsv1.StatefulSet{} },
	"apps/v1/Deployment":                     func() any { return &appsv1.Deployment{} },
	"policy/v1/PodDisruptionBudget":          func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/NetworkPolicy":     func() any { return &networkingv1.NetworkPolicy{} },
	"autoscaling/v2/HorizontalPodAutoscaler": func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
}

// crdGroups are the API groups of the operators' resources, checked
// against their CRD schemas (crd_test.go) rather than Go types.
var crdGroups = []string{"kafka.strimzi.io", "scylla.scylladb.com", "monitoring.coreos.com", "cert-manager.io"}

func isCRD(apiVersion string) bool {
	group, _, _ := strings.Cut(apiVersion, "/")
	for _, g := range crdGroups {
		if group == g {
			return true
		}
	}
	return false
}

// TestStrictDecode decodes every rendered manifest of every combination
// into its Kubernetes API type with unknown fields refused, the way
// `kubectl apply --validate=strict` would.
func TestStrictDecode(t *testing.T) {
	for _, c := range combinations(t) {
		t.Run(c.name, func(t *testing.T) {
			objs := render(t, c.values)
			if len(objs) == 0 {
				t.Fatal("nothing rendered")
			}
			for _, o := range objs {
				if isCRD(o.APIVersion) {
					continue
				}
				newT, ok := coreTypes[o.APIVersion+"/"+o.Kind]
				if !ok {
					t.Errorf("%s: %s/%s has no API type in coreTypes", o, o.APIVersion, o.Kind)
					continue
				}
				if err := decodeStrict(o.YAML, newT()); err != nil {
					t.Errorf("%s: %v", o, err)
				}
			}
		})
	}
}

// TestStrictDecodeCanFail: the strict decoding refuses a field the API
// type does not have, and a value of the wrong type.
func TestStrictDecodeCanFail(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replica: 2}\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replicas: two}\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      containers: [{name: a, image: b, livenessprobe: {}}]\n",
	} {
		if err := decodeStrict([]byte(doc), &appsv1.Deployment{}); err == nil {
			t.Errorf("decoded without an error:\n%s", doc)
		}
	}
}

// TestPods checks what every pod of every combination must have: resource
// requests and probes; for Shoal's roles (the bridge's too) and HAProxy,
// non-root containers with a read-only root file system and no privilege,
// and for Shoal's roles args starting with the role and probes on /healthz
// and /readyz. The databases' own images are
// held to less: apache/kafka runs as its user but writes its
// server.properties into the image at start, and ScyllaDB's image runs
// its supervisor as root, as the Scylla Operator runs it.
func TestPods(t *testing.T) {
	for _, c := range combinations(t) {
		t.Run(c.name, func(t *testing.T) {
			for _, o := range render(t, c.values) {
				var spec *corev1.PodSpec
				var component string
				switch o.Kind {
				case "Deployment":
					var d appsv1.Deployment
					mustDecode(t, o, &d)
					spec, component = &d.Spec.Template.Spec, d.Spec.Template.Labels["app.kubernetes.io/component"]
				case "StatefulSet":
					var s appsv1.StatefulSet
					mustDecode(t, o, &s)
					spec, component = &s.Spec.Template.Spec, s.Spec.Template.Labels["app.kubernetes.io/component"]
				default:
					continue
				}
				checkPod(t, o, component, spec)
			}
		})
	}
}

// decodeStrict decodes a manifest the way the API server's strict field
// validation does: YAML to JSON, then sigs.k8s.io/json, which matches
// field names case-sensitively (encoding/json would take "livenessprobe"
// for livenessProbe) and reports unknown and duplicate fields.
func decodeStrict(doc []byte, into any) error {
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(j, into)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

func mustDecode(t *testing.T, o Object, into any) {
	t.Helper()
	if err := yaml.Unmarshal(o.YAML, into); err != nil {
		t.Fatalf("%s: %v", o, err)
	}
}

func checkPod(t *testing.T, o Object, component string, spec *corev1.PodSpec) {
	t.Helper()
	for _, ctr := range append(spec.InitContainers, spec.Containers...) {
		if len(ctr.Resources.Requests) == 0 {
			t.Errorf("%s: container %s: no resource requests", o, ctr.Name)
		}
		if ctr.ReadinessProbe == nil || ctr.LivenessProbe == nil {
			t.Errorf("%s: container %s: no readiness or liveness probe", o, ctr.Name)
		}
	}
	switch component {
	case "gateway", "router", "session", "bridge", "haproxy":
	case "kafka":
		if psc := spec.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
			t.Errorf("%s: Kafka may run as root", o)
		}
		return
	case "scylla":
		return
	default:
		t.Fatalf("%s: a pod of component %q, which TestPods does not know", o, component)
	}
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("%s: the pod may run as root: %+v", o, psc)
	}
	for _, ctr := range append(spec.InitContainers, spec.Containers...) {
		sc := ctr.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: container %s: root file system not read-only", o, ctr.Name)
		}
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: container %s: privilege escalation allowed", o, ctr.Name)
		}
		if sc == nil || sc.Capabilities == nil || len(sc.Capabilities.Drop) == 0 || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("%s: container %s: capabilities not dropped", o, ctr.Name)
		}
	}
	switch component {
	case "gateway", "router", "session", "bridge":
	default:
		return
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%s: %d containers, want Shoal's one", o, len(spec.Containers))
	}
	ctr := spec.Containers[0]
	if len(ctr.Args) == 0 || ctr.Args[0] != component {
		t.Errorf("%s: args %q do not start with the role %q", o, ctr.Args, component)
	}
	for probe, path := range map[*corev1.Probe]string{ctr.LivenessProbe: "/healthz", ctr.ReadinessProbe: "/readyz", ctr.StartupProbe: "/healthz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path {
			t.Errorf("%s: a probe is not GET %s: %+v", o, path, probe)
		}
	}
	if component == "gateway" && (spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds < 30) {
		t.Errorf("%s: a gateway's termination grace period is too short to hand its clients over", o)
	}
}

// TestGolden compares the default render with testdata/golden/default.yaml
// (go test -run TestGolden -update rewrites it). The generated password and
// its bcrypt hash are random on each render: they are masked.
func TestGolden(t *testing.T) {
	out, err := helm(t, templateArgs(nil)...)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "golden", "default.yaml"), maskSecrets(out))
}

// golden compares got with the golden file at path; with -update it
// writes the file first.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs (go test -update rewrites it after a deliberate change):\n%s", path, firstDiff(want, got))
	}
}

var generatedData = regexp.MustCompile(`(?m)^(  (?:password|passwords): ).*$`)

// maskSecrets replaces the values of the generated auth Secret's random
// keys.
func maskSecrets(out []byte) []byte {
	return generatedData.ReplaceAll(out, []byte("${1}<random>"))
}

// firstDiff returns the first differing line of a and b with some
// context.
func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, x, y)
		}
	}
	return "(no line differs)"
}

// TestGeneratedAuth: without any authentication configured the chart
// makes a user with a random password (32 characters) and a bcrypt entry
// of the password file, different on each render; with a password Secret
// of the user's, none.
func TestGeneratedAuth(t *testing.T) {
	a := find(t, render(t, nil), "Secret", "shoal-auth")
	b := find(t, render(t, nil), "Secret", "shoal-auth")
	var sa, sb corev1.Secret
	mustDecode(t, a, &sa)
	mustDecode(t, b, &sb)
	if len(sa.Data["password"]) != 32 || bytes.Equal(sa.Data["password"], sb.Data["password"]) {
		t.Fatalf("passwords %q and %q: want 32 random characters each time", sa.Data["password"], sb.Data["password"])
	}
	if !regexp.MustCompile(`^demo-user:\$2a\$10\$`).Match(sa.Data["passwords"]) {
		t.Fatalf("password file %q: want shoal's bcrypt entry", sa.Data["passwords"])
	}
	for _, o := range render(t, []string{"testdata/values/tenants.yaml"}) {
		if o.Kind == "Secret" {
			t.Fatalf("%s rendered with auth.passwordSecret given", o)
		}
	}
}

// TestConfigFromValues: shoal.yaml carries the values that Shoal and the
// chart must agree on (topic partitions, replication, the listeners, the
// files the Secrets are mounted as).
func TestConfigFromValues(t *testing.T) {
	cfg := shoalYAML(t, render(t, []string{"testdata/values/tenants.yaml", "testdata/values/external-kafka.yaml", "testdata/values/tls.yaml"},
		"kafka.partitions=24", "kafka.deliveriesPartitions=32", "gateway.replicas=30", "kafka.retentionBytes=1073741824", "config.log_level=debug"))
	for _, want := range []struct {
		path []any
		val  any
	}{
		{[]any{"kafka", "partitions"}, float64(24)},
		{[]any{"kafka", "deliveries_partitions"}, float64(32)},
		{[]any{"kafka", "replication_factor"}, float64(3)},
		{[]any{"kafka", "retention_bytes"}, float64(1 << 30)},
		{[]any{"kafka", "brokers", 0}, "kafka-0.kafka.example.com:9093"},
		{[]any{"kafka", "sasl", "password_file"}, "/etc/shoal/kafka-sasl/password"},
		{[]any{"kafka", "tls", "ca_file"}, "/etc/shoal/kafka-ca/ca.crt"},
		{[]any{"gateway", "proxy_protocol"}, "required"},
		{[]any{"gateway", "mqtts_listen"}, ":8883"},
		{[]any{"tls", "client_ca_file"}, "/etc/shoal/tls/ca.crt"},
		{[]any{"auth", "password_file"}, "/etc/shoal/passwords/passwords"},
		{[]any{"auth", "acl_file"}, "/etc/shoal/acl/acl"},
		{[]any{"auth", "jwt", "jwks_file"}, "/etc/shoal/jwt/jwks.json"},
		{[]any{"auth", "jwt", "public_key_file"}, "/etc/shoal/jwt/public.pem"},
		{[]any{"auth", "jwt", "tenant_claim"}, "tenant"},
		{[]any{"tenants", "acme", "max_connections"}, float64(50000)},
		{[]any{"telemetry", "traces", "sample_ratio"}, 0.01},
		{[]any{"log_level"}, "debug"},
	} {
		got, ok := field(cfg, want.path...)
		if !ok || got != want.val {
			t.Errorf("shoal.yaml %v = %v (%v), want %v", want.path, got, ok, want.val)
		}
	}
}

// shoalYAML returns the rendered shoal.yaml, decoded.
func shoalYAML(t *testing.T, objs []Object) map[string]any {
	t.Helper()
	raw := stringField(t, find(t, objs, "ConfigMap", release+"-config"), "data", "shoal.yaml")
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestShoalYAMLGolden keeps each combination's rendered shoal.yaml in
// testdata/golden/<combination>.shoal.yaml (-update rewrites them), where
// Shoal's own configuration loader reads and validates them
// (compose/config's TestHelmChartConfigs): the chart writes only keys
// and values Shoal accepts.
func TestShoalYAMLGolden(t *testing.T) {
	for _, c := range combinations(t) {
		t.Run(c.name, func(t *testing.T) {
			raw := stringField(t, find(t, render(t, c.values), "ConfigMap", release+"-config"), "data", "shoal.yaml")
			got := []byte("# Rendered by deploy/helm/charttest (TestShoalYAMLGolden -update), values: " + c.name + "\n" + raw)
			golden(t, filepath.Join("testdata", "golden", c.name+".shoal.yaml"), got)
		})
	}
}

// renderNotes renders the chart's NOTES.txt (what `helm install` prints)
// without a cluster: helm template leaves NOTES.txt out, so a copy of the
// chart renders it through tpl into a ConfigMap of its own.
func renderNotes(t *testing.T, values []string, set ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "shoal")
	if out, err := exec.Command("cp", "-rL", chartDir, dir).CombinedOutput(); err != nil {
		t.Fatalf("copy the chart: %v\n%s", err, out)
	}
	notes, err := os.ReadFile(filepath.Join(dir, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), notes, 0o644); err != nil {
		t.Fatal(err)
	}
	const tmpl = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\ndata:\n  notes: |\n    {{- tpl (.Files.Get \"notes.txt\") . | nindent 4 }}\n"
	if err := os.WriteFile(filepath.Join(dir, "templates", "zz-notes.yaml"), []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	args := templateArgs(values, set...)
	args[2] = dir
	args = append(args, "--show-only", "templates/zz-notes.yaml")
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := splitManifests(out)
	if err != nil || len(objs) != 1 {
		t.Fatalf("%d objects, %v:\n%s", len(objs), err, out)
	}
	return stringField(t, objs[0], "data", "notes")
}

// TestNotes: what `helm install` prints tells what runs (the bridges only
// with mappings) and how to connect: the Service and port, the generated
// user's password when the chart made one, WebSocket and TLS ports, and
// how HAProxy picks a tenant's pool.
func TestNotes(t *testing.T) {
	for _, c := range []struct {
		name   string
		values []string
		want   []string
		absent []string
	}{
		{"default", nil, []string{
			"port-forward svc/shoal-mqtt 1883:1883",
			"get secret shoal-auth -o jsonpath='{.data.password}'",
			`mosquitto_pub -h 127.0.0.1 -p 1883 -i demo-pub -u demo-user -P "$PASS"`,
			"MQTT over WebSocket: port 8083, path /mqtt (ws://<host>:8083/mqtt).",
			"HAProxy sends each tenant to its pool",
		}, []string{"MQTT over TLS"}},
		{"tls", []string{"testdata/values/tls.yaml", "testdata/values/tenants.yaml"}, []string{
			"MQTT over TLS: port 8883; WebSocket over TLS: port 8084.",
			"mosquitto_sub -h 127.0.0.1 -p 1883 -i demo-sub -u <user> -P <password> -t 'hello/#' -v",
		}, []string{"PASS=", "shoal-auth"}},
		{"no-haproxy", []string{"testdata/values/no-haproxy.yaml"}, []string{
			"port-forward svc/shoal-mqtt 1883:1883",
			"3 gateways, 2 routers, 2 session services.",
		}, []string{"HAProxy", "bridges"}},
		{"bridge", []string{bridgeValues}, []string{
			"2 gateways, 2 routers, 2 session services, 2 Kafka data bridges, behind HAProxy.",
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			notes := renderNotes(t, c.values)
			for _, w := range c.want {
				if !strings.Contains(notes, w) {
					t.Errorf("the notes lack %q:\n%s", w, notes)
				}
			}
			for _, a := range c.absent {
				if strings.Contains(notes, a) {
					t.Errorf("the notes hold %q:\n%s", a, notes)
				}
			}
		})
	}
}
