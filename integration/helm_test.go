//go:build integration

package integration

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// TestHelmValuesRunLocally runs what the Helm chart renders, without
// Kubernetes: `helm template` of deploy/helm/shoal with values of a
// deployment on an external Kafka and CQL database (this suite's), two
// gateways, HAProxy with pools default=[0] and b=[1] and tenant tb in
// pool b, and a password Secret of the operator's with one user per
// tenant. Each Deployment and StatefulSet container becomes local
// processes, one per replica, with the image's entry point (/shoal: the
// shoal binary of this suite; HAProxy's image: Debian's haproxy), the
// container's args and env as rendered (fieldRef and resourceFieldRef
// resolved as the kubelet would), and its volumes (ConfigMaps, Secrets,
// emptyDirs) written under a directory of the pod's own. Only what is
// machine-specific is rewritten, each place saying why. MQTT clients then
// go through HAProxy: each tenant lands on its pool's gateway, a tenant's
// clients meet across the two gateways (after the tenant is moved to pool
// b on HAProxy's runtime API, as an operator would), and nothing crosses
// tenants.
func TestHelmValuesRunLocally(t *testing.T) {
	began := time.Now()
	bin := shoalBinary(t)
	cql := cqlConfig(t)
	kc := ownKafka(t)

	// The values of this deployment. gateway.proxyTrusted: HAProxy's
	// "pod" reaches the gateways from loopback here, not from a pod
	// network; router and session at one replica each save CPU.
	values := map[string]any{
		"gateway": map[string]any{"replicas": 2, "proxyTrusted": []string{"127.0.0.0/8"}},
		"router":  map[string]any{"replicas": 1},
		"session": map[string]any{"replicas": 1},
		"haproxy": map[string]any{
			"enabled": true, "replicas": 1,
			"pools":   map[string]any{"default": []int{0}, "b": []int{1}},
			"tenants": map[string]any{"tb": "b"},
		},
		"kafka": map[string]any{
			"mode": "external", "partitions": 4, "replicationFactor": 1,
			"external": map[string]any{"brokers": kc.Brokers()},
		},
		"cql": map[string]any{
			"mode": "external", "keyspace": cql.Keyspace, "replicationFactor": 1,
			"external": map[string]any{"hosts": cql.Hosts},
		},
		"auth": map[string]any{"passwordSecret": map[string]any{"name": "shoal-passwords"}},
	}
	m := renderChart(t, values)

	// The operator's password Secret, as `kubectl create secret generic
	// shoal-passwords --from-file=passwords` makes it from a file `shoal
	// passwd` wrote: a user per tenant (a password user's tenant is its
	// name's prefix, and it may use that tenant's client identifiers
	// only).
	creds := map[string][2]string{} // tenant → user, password
	pwFile := filepath.Join(t.TempDir(), "passwords")
	for _, tenant := range []string{"ta", "tb"} {
		user, pass := tenant+"-app", rand.Text()
		cmd := exec.Command(bin, "passwd", pwFile, user)
		cmd.Stdin = strings.NewReader(pass + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("shoal passwd %s: %v\n%s", user, err, out)
		}
		creds[tenant] = [2]string{user, pass}
	}
	pw, err := os.ReadFile(pwFile)
	if err != nil {
		t.Fatal(err)
	}
	secret := &k8sObject{Kind: "Secret", Data: map[string]string{"passwords": base64.StdEncoding.EncodeToString(pw)}}
	secret.Metadata.Name = "shoal-passwords"
	m.objs = append(m.objs, secret)

	// Shoal's pods: every replica of the gateways' StatefulSet, one pod of
	// each Deployment of the Shoal image.
	gwSet := m.get(t, "StatefulSet", "shoal-gateway")
	var gateways, pods []*localPod
	for i := range gwSet.replicas(t) {
		p := newLocalPod(t, m, gwSet, fmt.Sprintf("%s-%d", gwSet.Metadata.Name, i), i)
		gateways = append(gateways, p)
		pods = append(pods, p)
	}
	if len(gateways) != 2 {
		t.Fatalf("%d gateways rendered, want the 2 of gateway.replicas", len(gateways))
	}
	for _, name := range []string{"shoal-router", "shoal-session"} {
		d := m.get(t, "Deployment", name)
		if n := d.replicas(t); n != 1 {
			t.Fatalf("%s: %d replicas rendered, want the 1 of the values", name, n)
		}
		pods = append(pods, newLocalPod(t, m, d, name+"-0", -1))
	}
	for _, p := range pods {
		p.startShoal(t, bin)
	}
	for _, p := range pods {
		p.waitReady(t)
	}
	// The gateways' slots are their ordinals (gateway.slots ordinal: the
	// pod-index label through SHOAL_GATEWAY_SLOT).
	for i, g := range gateways {
		if slot := g.readySlot(t); slot != i {
			t.Errorf("%s serves slot %d, want its ordinal %d", g.name, slot, i)
		}
	}

	h := startRenderedHAProxy(t, m, pods)
	mqttAddr := h.ports[1883]
	t.Logf("%d Shoal processes and HAProxy from the chart ready in %s", len(pods), time.Since(began).Round(time.Millisecond))

	connect := func(id string) *mqttClient {
		t.Helper()
		cred := creds[strings.SplitN(id, "-", 2)[0]]
		var c *mqttClient
		eventually.OK(t, clusterWait, func() string {
			var err error
			if c, _, err = tryDialMQTT(t, mqttAddr, id, true, 0, cred[0], cred[1]); err != nil {
				return fmt.Sprintf("%s through HAProxy: %v", id, err)
			}
			return ""
		})
		return c
	}
	// tenantConns waits until the gateway holds want connections of tenant.
	tenantConns := func(g *localPod, tenant string, want float64) {
		t.Helper()
		series := fmt.Sprintf(`shoal_gateway_tenant_connections{tenant=%q}`, tenant)
		eventually.OK(t, clusterWait, func() string {
			if got := g.metric(t, "shoal_gateway_tenant_connections", "tenant", tenant); got != want {
				return fmt.Sprintf("%s: %s is %v, want %v", g.name, series, got, want)
			}
			return ""
		})
	}

	// Each tenant lands on its pool's gateway: ta (not in tenants.map) on
	// pool default, gateway 0; tb on pool b, gateway 1.
	taSub, taPub := connect("ta-sub"), connect("ta-pub")
	tbSub, tbPub := connect("tb-sub"), connect("tb-pub")
	tenantConns(gateways[0], "ta", 2)
	tenantConns(gateways[1], "tb", 2)
	if n := gateways[0].metric(t, "shoal_gateway_tenant_connections", "tenant", "tb"); n > 0 {
		t.Errorf("%s holds %v connections of tenant tb, whose pool b is gateway 1 only", gateways[0].name, n)
	}
	if n := gateways[1].metric(t, "shoal_gateway_tenant_connections", "tenant", "ta"); n > 0 {
		t.Errorf("%s holds %v connections of tenant ta, whose pool default is gateway 0 only", gateways[1].name, n)
	}

	// A QoS 1 message within tenant ta, and one within tb, on the same
	// topic name.
	const topic = "helm/t"
	taSub.subscribe(topic, 1)
	tbSub.subscribe(topic, 1)
	if err := taPub.publish(topic, "ta on gateway 0", 1, false); err != nil {
		t.Fatal(err)
	}
	taSub.expectPayload("ta on gateway 0")
	if err := tbPub.publish(topic, "tb on gateway 1", 1, false); err != nil {
		t.Fatal(err)
	}
	tbSub.expectPayload("tb on gateway 1")

	// Tenant ta moves to pool b on HAProxy's runtime API (the socket of
	// SHOAL_HAPROXY_RUNTIME), as an operator moves a tenant without a
	// restart: its new connections land on gateway 1, its connected
	// clients stay on gateway 0. Its clients now meet across the gateways.
	if out := h.runtime(t, fmt.Sprintf("add map %s ta b", h.env["SHOAL_HAPROXY_MAP"])); strings.TrimSpace(out) != "" {
		t.Fatalf("HAProxy's runtime API: add map: %s", out)
	}
	taFar := connect("ta-far")
	tenantConns(gateways[1], "ta", 1)
	tenantConns(gateways[0], "ta", 2)
	taFar.subscribe(topic, 1)
	if err := taFar.publish(topic, "ta from gateway 1", 1, false); err != nil {
		t.Fatal(err)
	}
	taSub.expectPayload("ta from gateway 1") // gateway 1 → gateway 0
	taFar.expectPayload("ta from gateway 1") // its own
	if err := taPub.publish(topic, "ta from gateway 0", 1, false); err != nil {
		t.Fatal(err)
	}
	taFar.expectPayload("ta from gateway 0") // gateway 0 → gateway 1
	taSub.expectPayload("ta from gateway 0")
	// tb again, now beside ta-far on gateway 1.
	if err := tbPub.publish(topic, "tb beside ta", 1, false); err != nil {
		t.Fatal(err)
	}
	tbSub.expectPayload("tb beside ta")

	// Nothing crossed tenants (each expectPayload above fails on another
	// tenant's message first in line): a second more, and no subscriber
	// has anything left, of another tenant or twice.
	time.Sleep(time.Second) // a quiet period: nothing tells that no stray message comes
	for _, c := range []*mqttClient{taSub, taFar, tbSub} {
		for len(c.msgs) > 0 {
			m := <-c.msgs
			t.Errorf("%s got %q on %s, from another tenant or twice", c.id, m.Payload, m.Topic)
		}
	}
	t.Logf("chart rendered, run and checked in %s", time.Since(began).Round(time.Millisecond))
}

// helmBinary finds helm as deploy/helm/charttest does: $HELM, else the
// tool cache scripts/tools.sh fills (building helm there when missing) and
// prints.
func helmBinary(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	cmd := exec.Command("../scripts/tools.sh")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/tools.sh: %v\n%s", err, stderr.Bytes())
	}
	return filepath.Join(strings.TrimSpace(string(out)), "helm")
}

// k8sObject is the part of a rendered manifest this test reads.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Replicas    *int           `yaml:"replicas"`
		ServiceName string         `yaml:"serviceName"`
		ClusterIP   string         `yaml:"clusterIP"`
		Selector    map[string]any `yaml:"selector"` // a Service's labels; a workload's matchLabels
		Template    struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	InitContainers []k8sContainer `yaml:"initContainers"`
	Containers     []k8sContainer `yaml:"containers"`
	Volumes        []k8sVolume    `yaml:"volumes"`
}

type k8sContainer struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
			ResourceFieldRef *struct {
				Resource string `yaml:"resource"`
				Divisor  string `yaml:"divisor"`
			} `yaml:"resourceFieldRef"`
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
			ConfigMapKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"configMapKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	EnvFrom   []any     `yaml:"envFrom"`
	Ports     []k8sPort `yaml:"ports"`
	Resources struct {
		Limits map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
	} `yaml:"volumeMounts"`
}

type k8sPort struct {
	Name          string `yaml:"name"`
	ContainerPort int    `yaml:"containerPort"`
}

type k8sKeyToPath struct {
	Key  string `yaml:"key"`
	Path string `yaml:"path"`
}

type k8sVolume struct {
	Name      string `yaml:"name"`
	ConfigMap *struct {
		Name  string         `yaml:"name"`
		Items []k8sKeyToPath `yaml:"items"`
	} `yaml:"configMap"`
	Secret *struct {
		SecretName string         `yaml:"secretName"`
		Items      []k8sKeyToPath `yaml:"items"`
	} `yaml:"secret"`
	EmptyDir *struct{} `yaml:"emptyDir"`
}

// replicas is a workload's replica count (1 when unset, as Kubernetes).
func (o *k8sObject) replicas(t *testing.T) int {
	t.Helper()
	if o.Spec.Replicas == nil {
		return 1
	}
	return *o.Spec.Replicas
}

// secretData returns a Secret's data, decoded.
func (o *k8sObject) secretData(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for k, v := range o.Data {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			t.Fatalf("Secret %s: data.%s: %v", o.Metadata.Name, k, err)
		}
		out[k] = b
	}
	for k, v := range o.StringData {
		out[k] = []byte(v)
	}
	return out
}

// rendered is the chart's output.
type rendered struct {
	namespace string
	objs      []*k8sObject
}

// get returns the object of kind and name.
func (m *rendered) get(t *testing.T, kind, name string) *k8sObject {
	t.Helper()
	for _, o := range m.objs {
		if o.Kind == kind && o.Metadata.Name == name {
			return o
		}
	}
	var have []string
	for _, o := range m.objs {
		have = append(have, o.Kind+"/"+o.Metadata.Name)
	}
	t.Fatalf("the chart rendered no %s/%s; it rendered %v", kind, name, have)
	return nil
}

// renderChart runs helm template on deploy/helm/shoal, release shoal in
// namespace mqtt, with values.
func renderChart(t *testing.T, values map[string]any) *rendered {
	t.Helper()
	const chart = "../deploy/helm/shoal"
	vb, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	vf := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(vf, vb, 0o600); err != nil {
		t.Fatal(err)
	}
	// The Kubernetes version to render for: the oldest the chart supports
	// (Chart.yaml's kubeVersion), rather than helm's built-in default,
	// which depends on how helm was built (v1.20 from `go install`, which
	// the chart refuses).
	cb, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		KubeVersion string `yaml:"kubeVersion"`
	}
	if err := yaml.Unmarshal(cb, &meta); err != nil {
		t.Fatal(err)
	}
	kube := regexp.MustCompile(`^>=\s*v?(\d+\.\d+\.\d+)`).FindStringSubmatch(meta.KubeVersion)
	if kube == nil {
		t.Fatalf("Chart.yaml: kubeVersion %q is not >=X.Y.Z", meta.KubeVersion)
	}
	const namespace = "mqtt"
	cmd := exec.Command(helmBinary(t), "template", "shoal", chart, "--namespace", namespace, "--kube-version", kube[1], "-f", vf)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr.Bytes())
	}
	m := &rendered{namespace: namespace}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		o := &k8sObject{}
		err := dec.Decode(o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("helm template's output: %v", err)
		}
		if o.Kind != "" {
			m.objs = append(m.objs, o)
		}
	}
	return m
}
