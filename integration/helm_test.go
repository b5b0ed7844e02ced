//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
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
		deadline := time.Now().Add(clusterWait)
		for {
			c, _, err := tryDialMQTT(t, mqttAddr, id, true, 0, cred[0], cred[1])
			if err == nil {
				return c
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s through HAProxy: %v", id, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// tenantConns waits until the gateway holds want connections of tenant.
	tenantConns := func(g *localPod, tenant string, want float64) {
		t.Helper()
		series := fmt.Sprintf(`shoal_gateway_tenant_connections{tenant=%q}`, tenant)
		deadline := time.Now().Add(clusterWait)
		for {
			got := g.metric(t, "shoal_gateway_tenant_connections", "tenant", tenant)
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s is %v, want %v", g.name, series, got, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
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
	time.Sleep(time.Second)
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

// localPod is one pod of the rendered chart as local processes would run
// it: its volumes under root (a volume mounted at /etc/shoal/config is
// root/etc/shoal/config), its ports on loopback.
type localPod struct {
	name    string
	ordinal int // a StatefulSet pod's; -1 for a Deployment's
	obj     *k8sObject
	ctr     k8sContainer
	root    string
	mounts  []string          // the container's mount paths
	baseEnv map[string]string // the container's env, resolved
	// As the process runs (rewritten): its ports (one the container
	// listens on → the loopback address it listens on here), env, args.
	ports map[int]string
	env   map[string]string
	args  []string
	// relaunch starts the process again on new ports, when one was taken
	// between the pick and the bind.
	relaunch   func()
	relaunches int
	log        string
	cmd        *exec.Cmd
	done       chan struct{}
	waitErr    error
}

// newLocalPod makes pod name (ordinal: its index in a StatefulSet, or -1)
// of workload o, which has one container: its volumes written under a
// directory of its own, its env resolved.
func newLocalPod(t *testing.T, m *rendered, o *k8sObject, name string, ordinal int) *localPod {
	t.Helper()
	spec := o.Spec.Template.Spec
	if len(spec.InitContainers) > 0 || len(spec.Containers) != 1 {
		t.Fatalf("%s/%s: %d init containers and %d containers; this test runs pods of one container", o.Kind, o.Metadata.Name, len(spec.InitContainers), len(spec.Containers))
	}
	p := &localPod{name: name, ordinal: ordinal, obj: o, ctr: spec.Containers[0], root: filepath.Join(t.TempDir(), name), ports: map[int]string{}}
	// The volumes, as the kubelet projects them.
	vols := map[string]k8sVolume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	for _, vm := range p.ctr.VolumeMounts {
		if vm.SubPath != "" {
			t.Fatalf("%s: volume mount %s: subPath is not emulated here", name, vm.Name)
		}
		v, ok := vols[vm.Name]
		if !ok {
			t.Fatalf("%s: volume mount %s: no such volume", name, vm.Name)
		}
		dir := filepath.Join(p.root, vm.MountPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		p.mounts = append(p.mounts, vm.MountPath)
		files := map[string][]byte{}
		var items []k8sKeyToPath
		switch {
		case v.EmptyDir != nil:
		case v.ConfigMap != nil:
			for k, s := range m.get(t, "ConfigMap", v.ConfigMap.Name).Data {
				files[k] = []byte(s)
			}
			items = v.ConfigMap.Items
		case v.Secret != nil:
			files = m.get(t, "Secret", v.Secret.SecretName).secretData(t)
			items = v.Secret.Items
		default:
			t.Fatalf("%s: volume %s: only configMap, secret and emptyDir volumes are emulated here", name, vm.Name)
		}
		if items != nil {
			picked := map[string][]byte{}
			for _, it := range items {
				b, ok := files[it.Key]
				if !ok {
					t.Fatalf("%s: volume %s: no key %q", name, vm.Name, it.Key)
				}
				picked[it.Path] = b
			}
			files = picked
		}
		for path, b := range files {
			if err := os.WriteFile(filepath.Join(dir, path), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The environment, valueFrom resolved as the kubelet does.
	labels := maps.Clone(o.Spec.Template.Metadata.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	if ordinal >= 0 {
		labels["apps.kubernetes.io/pod-index"] = strconv.Itoa(ordinal) // Kubernetes ≥ 1.28
		labels["statefulset.kubernetes.io/pod-name"] = name
	}
	p.baseEnv = map[string]string{}
	if len(p.ctr.EnvFrom) > 0 {
		t.Fatalf("%s: envFrom is not emulated here", name)
	}
	for _, e := range p.ctr.Env {
		v := e.Value
		switch vf := e.ValueFrom; {
		case vf == nil:
		case vf.FieldRef != nil:
			switch fp := vf.FieldRef.FieldPath; {
			case fp == "metadata.name":
				v = name
			case fp == "metadata.namespace":
				v = m.namespace
			case strings.HasPrefix(fp, "metadata.labels['") && strings.HasSuffix(fp, "']"):
				l, ok := labels[strings.TrimSuffix(strings.TrimPrefix(fp, "metadata.labels['"), "']")]
				if !ok {
					t.Fatalf("%s: env %s: the pod has no label of %s", name, e.Name, fp)
				}
				v = l
			default:
				t.Fatalf("%s: env %s: fieldRef %s is not emulated here", name, e.Name, fp)
			}
		case vf.ResourceFieldRef != nil:
			rf := vf.ResourceFieldRef
			limit, ok := p.ctr.Resources.Limits[strings.TrimPrefix(rf.Resource, "limits.")]
			if !strings.HasPrefix(rf.Resource, "limits.") || !ok || rf.Divisor != "1" {
				t.Fatalf("%s: env %s: resourceFieldRef %s (divisor %s) of limits %v is not emulated here", name, e.Name, rf.Resource, rf.Divisor, p.ctr.Resources.Limits)
			}
			v = strconv.FormatInt(quantityBytes(t, limit), 10)
		case vf.SecretKeyRef != nil:
			v = string(m.get(t, "Secret", vf.SecretKeyRef.Name).secretData(t)[vf.SecretKeyRef.Key])
		case vf.ConfigMapKeyRef != nil:
			v = m.get(t, "ConfigMap", vf.ConfigMapKeyRef.Name).Data[vf.ConfigMapKeyRef.Key]
		default:
			t.Fatalf("%s: env %s: this valueFrom is not emulated here", name, e.Name)
		}
		p.baseEnv[e.Name] = v
	}
	p.args = slices.Clone(p.ctr.Args)
	return p
}

// quantityBytes converts a Kubernetes quantity of bytes (2Gi, 512Mi, 1G,
// 1000) to bytes.
func quantityBytes(t *testing.T, q string) int64 {
	t.Helper()
	units := []struct {
		suffix string
		mult   int64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(q, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				t.Fatalf("quantity %q: %v", q, err)
			}
			return v * u.mult
		}
	}
	v, err := strconv.ParseInt(q, 10, 64)
	if err != nil {
		t.Fatalf("quantity %q: %v", q, err)
	}
	return v
}

// hostPath maps a path of the container to this machine: a path under one
// of the pod's mounts is under the pod's directory; ok is false for
// anything else (the image's own files).
func (p *localPod) hostPath(path string) (string, bool) {
	for _, mp := range p.mounts {
		if path == mp || strings.HasPrefix(path, strings.TrimSuffix(mp, "/")+"/") {
			return filepath.Join(p.root, path), true
		}
	}
	return "", false
}

var anyAddrListen = regexp.MustCompile(`^(?:0\.0\.0\.0|\[::\]|)?:(\d+)$`)

// listen maps a listen address of the container (":1883", "0.0.0.0:1883")
// to a loopback address of this machine: in a pod, a port of every
// address is the pod's own; here the pods share the machine, and the
// tests may listen on loopback only. (A role that does not listen on it,
// as a router on gateway.mqtt_listen, gets a port it leaves unused.)
func (p *localPod) listen(t *testing.T, addr string) (string, bool) {
	t.Helper()
	m := anyAddrListen.FindStringSubmatch(addr)
	if m == nil {
		return "", false
	}
	port, _ := strconv.Atoi(m[1])
	if _, ok := p.ports[port]; !ok {
		p.ports[port] = freeAddr(t)
	}
	return p.ports[port], true
}

// rewrite rewrites one value of the container's configuration (an arg,
// an env value, a string of shoal.yaml): a path under a mount to the
// pod's directory, a listen address to loopback. what names it in the
// log.
func (p *localPod) rewrite(t *testing.T, what, v string) string {
	t.Helper()
	out := v
	if hp, ok := p.hostPath(v); ok {
		out = hp
	} else if la, ok := p.listen(t, v); ok {
		out = la
	}
	if out != v {
		t.Logf("%s: %s: %s → %s", p.name, what, v, out)
	}
	return out
}

// rewriteYAML rewrites the strings of a decoded YAML document in place.
func (p *localPod) rewriteYAML(t *testing.T, path string, v any) any {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = p.rewriteYAML(t, path+"."+k, e)
		}
	case []any:
		for i, e := range v {
			v[i] = p.rewriteYAML(t, fmt.Sprintf("%s[%d]", path, i), e)
		}
	case string:
		return p.rewrite(t, strings.TrimPrefix(path, "."), v)
	}
	return v
}

// startShoal starts the pod's Shoal container: the image's entry point
// (/shoal) is bin, run with the container's args and env. Its shoal.yaml
// (--config, from the ConfigMap volume) is rewritten where it names the
// pod's mounts and listen addresses.
func (p *localPod) startShoal(t *testing.T, bin string) {
	t.Helper()
	if !strings.HasPrefix(p.ctr.Image, "ghcr.io/shoal-mqtt/shoal:") {
		t.Fatalf("%s: image %s is not Shoal's", p.name, p.ctr.Image)
	}
	if len(p.ctr.Command) > 0 {
		t.Fatalf("%s: command %q replaces the image's entry point /shoal", p.name, p.ctr.Command)
	}
	i := slices.Index(p.ctr.Args, "--config")
	if i < 0 || i+1 == len(p.ctr.Args) {
		t.Fatalf("%s: args %q name no --config", p.name, p.ctr.Args)
	}
	cfgPath, ok := p.hostPath(p.ctr.Args[i+1])
	if !ok {
		t.Fatalf("%s: --config %s is in no volume", p.name, p.ctr.Args[i+1])
	}
	orig, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	prepare := func() {
		p.ports, p.env, p.args = map[int]string{}, maps.Clone(p.baseEnv), slices.Clone(p.ctr.Args)
		var cfg map[string]any
		if err := yaml.Unmarshal(orig, &cfg); err != nil {
			t.Fatalf("%s: %s: %v", p.name, p.ctr.Args[i+1], err)
		}
		p.rewriteYAML(t, "", cfg) // in place
		b, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		// The pod's own copy of the ConfigMap's file (each pod has its
		// own loopback ports here).
		if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
			t.Fatal(err)
		}
		for i, a := range p.args {
			p.args[i] = p.rewrite(t, "arg", a)
		}
		p.rewriteEnv(t)
		if _, ok := p.ports[9090]; !ok {
			t.Fatalf("%s: shoal.yaml sets no http_listen on the container's port 9090 (its probes')", p.name)
		}
	}
	p.relaunch = func() { prepare(); p.launch(t, bin) }
	p.relaunch()
}

// rewriteEnv rewrites the container's env values (once: a path of this
// machine may itself be under /tmp, one of the pod's mounts).
func (p *localPod) rewriteEnv(t *testing.T) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(p.env)) {
		p.env[k] = p.rewrite(t, "env "+k, p.env[k])
	}
}

// launch starts the container's process: path with p's args and env
// (rewritten).
func (p *localPod) launch(t *testing.T, path string) {
	t.Helper()
	p.log = filepath.Join(filepath.Dir(p.root), p.name+".log")
	f, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + p.root}
	// The pod's /tmp is an emptyDir of its own: TMPDIR points the process
	// at it, since this machine's /tmp is not the pod's.
	if tmp, ok := p.hostPath("/tmp"); ok {
		env = append(env, "TMPDIR="+tmp)
	}
	for _, k := range slices.Sorted(maps.Keys(p.env)) {
		env = append(env, k+"="+p.env[k])
	}
	p.cmd = exec.Command(path, p.args...)
	p.cmd.Env = env // the container's own, none of the test's (SHOAL_*, OTEL_*)
	p.cmd.Dir = p.root
	p.cmd.Stdout, p.cmd.Stderr = f, f
	// Its own process group (HAProxy's master and worker are stopped
	// together), killed if the test binary dies.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	p.done = make(chan struct{})
	cmd, done := p.cmd, p.done
	go func() { p.waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	dumpOnFailure(t, p.log)
}

// waitReady polls the readiness probe's /readyz on the pod's HTTP port.
func (p *localPod) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(clusterWait)
	for {
		resp, err := http.Get("http://" + p.ports[9090] + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK && servesHTTP(p.log) {
				return
			}
		}
		if p.exitedRelaunched(t) {
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after %v", p.name, clusterWait)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// exitedRelaunched fails the test when the process exited, unless a port
// it was to listen on was taken since it was picked (an outgoing
// connection's ephemeral port, say): then it starts it again on new ones,
// a few times, and reports true.
func (p *localPod) exitedRelaunched(t *testing.T) bool {
	t.Helper()
	select {
	case <-p.done:
	default:
		return false
	}
	b, _ := os.ReadFile(p.log)
	if strings.Contains(strings.ToLower(string(b)), "address already in use") && p.relaunches < 3 {
		p.relaunches++
		t.Logf("%s: a port was taken before it bound it; starting it again on new ports", p.name)
		p.relaunch()
		return true
	}
	t.Fatalf("%s exited before it was ready: %v", p.name, p.waitErr)
	return false
}

// readySlot returns the slot of a gateway's "gateway ready" log line
// (log_format json, as the chart sets it).
func (p *localPod) readySlot(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Msg  string `json:"msg"`
			Slot *int   `json:"slot"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "gateway ready" && line.Slot != nil {
			return *line.Slot
		}
	}
	t.Fatalf("%s: no JSON \"gateway ready\" line with its slot in its log", p.name)
	return -1
}

// metric sums the samples of name on the pod's /metrics whose labels
// include labelPairs (name, value, …): 0 when there are none.
func (p *localPod) metric(t *testing.T, name string, labelPairs ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.ports[9090] + "/metrics")
	if err != nil {
		t.Fatalf("%s: /metrics: %v", p.name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (!strings.HasPrefix(rest, "{") && !strings.HasPrefix(rest, " ")) {
			continue
		}
		labels, value := "", rest
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndex(rest, "}")
			labels, value = rest[1:end], rest[end+1:]
		}
		match := true
		for i := 0; i+1 < len(labelPairs); i += 2 {
			if !strings.Contains(","+labels+",", fmt.Sprintf(",%s=%q,", labelPairs[i], labelPairs[i+1])) {
				match = false
			}
		}
		if !match {
			continue
		}
		f := strings.Fields(value)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			t.Fatalf("%s: /metrics: %q: %v", p.name, line, err)
		}
		sum += v
	}
	return sum
}

// renderedHAProxy is the chart's HAProxy pod as a local process.
type renderedHAProxy struct {
	*localPod
	sock string // the runtime API's socket
}

// startRenderedHAProxy starts the chart's HAProxy Deployment (one pod) in
// front of the Shoal pods, and waits until every server of its backends
// is up.
func startRenderedHAProxy(t *testing.T, m *rendered, pods []*localPod) *renderedHAProxy {
	t.Helper()
	d := m.get(t, "Deployment", "shoal-haproxy")
	p := newLocalPod(t, m, d, "shoal-haproxy-0", -1)
	// The haproxy image's entry point runs the args when they start with
	// haproxy: here Debian's HAProxy.
	if len(p.ctr.Command) > 0 || len(p.args) == 0 || p.args[0] != "haproxy" {
		t.Fatalf("%s: command %q args %q: want args starting with haproxy", p.name, p.ctr.Command, p.args)
	}
	for i, a := range p.args[1:] {
		p.args[i+1] = p.rewrite(t, "arg", a)
	}
	backends := ""
	for i, a := range p.args {
		if a == "-f" && i+1 < len(p.args) && filepath.Base(p.args[i+1]) == "backends.cfg" {
			backends = p.args[i+1]
		}
	}
	if backends == "" {
		t.Fatalf("%s: args %q load no backends.cfg", p.name, p.args)
	}
	b, err := os.ReadFile(backends)
	if err != nil {
		t.Fatal(err)
	}
	out := localBackends(t, m, string(b), pods)
	if err := os.WriteFile(backends, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &renderedHAProxy{localPod: p}
	// The image's entry point shifts "haproxy" off and runs the
	// haproxy binary with the rest (adding -W -db, which the args have).
	p.args = p.args[1:]
	bin := haproxyBinary(t)
	p.relaunch = func() {
		p.ports, p.env = map[int]string{}, maps.Clone(p.baseEnv)
		p.rewriteEnv(t)
		h.sock = p.env["SHOAL_HAPROXY_RUNTIME"]
		if h.sock == "" {
			t.Fatalf("%s: no SHOAL_HAPROXY_RUNTIME", p.name)
		}
		if _, ok := p.ports[1883]; !ok {
			t.Fatalf("%s: SHOAL_HAPROXY_MQTT binds no port 1883 (%v)", p.name, p.env)
		}
		p.launch(t, bin)
	}
	p.relaunch()

	// Every server of every backend up (HAProxy's health checks: GET
	// /readyz on the gateways' HTTP ports).
	deadline := time.Now().Add(clusterWait)
	for {
		var down []string
		servers := 0
		stat, _ := h.tryRuntime("show stat") // an error: not listening yet
		for _, line := range strings.Split(stat, "\n") {
			f := strings.Split(line, ",")
			if len(f) < 18 || strings.HasPrefix(line, "#") || f[1] == "FRONTEND" || f[1] == "BACKEND" {
				continue
			}
			servers++
			if f[17] != "UP" {
				down = append(down, f[0]+"/"+f[1]+" "+f[17])
			}
		}
		if servers > 0 && len(down) == 0 {
			t.Logf("HAProxy: %d servers up", servers)
			return h
		}
		if p.exitedRelaunched(t) {
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("HAProxy's servers not all up after %v: %d servers, down: %v", clusterWait, servers, down)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runtime sends one command to HAProxy's runtime API and returns its
// answer.
func (h *renderedHAProxy) runtime(t *testing.T, command string) string {
	t.Helper()
	out, err := h.tryRuntime(command)
	if err != nil {
		t.Fatalf("HAProxy's runtime API: %s: %v", command, err)
	}
	return out
}

func (h *renderedHAProxy) tryRuntime(command string) (string, error) {
	c, err := net.DialTimeout("unix", h.sock, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, command+"\n"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}

var (
	serverLine = regexp.MustCompile(`^(\s*server\s+\S+\s+)([^\s:]+):(\d+)(.*)$`)
	checkPort  = regexp.MustCompile(`\bport (\d+)\b`)
)

// localBackends rewrites the chart's backends.cfg for this machine. The
// resolvers section goes (it reads /etc/resolv.conf for the cluster's DNS,
// and nothing here resolves cluster names), and so does each server's
// "resolvers dns". Each server's address, a pod's stable name
// (<pod>.<service>.<namespace>.svc, which the cluster's DNS answers with
// the pod's address), becomes the loopback address that pod's process
// listens on for that port; so does its health check's port.
func localBackends(t *testing.T, m *rendered, cfg string, pods []*localPod) string {
	t.Helper()
	byName := map[string]*localPod{}
	for _, p := range pods {
		byName[p.name] = p
	}
	var out []string
	inResolvers := false
	servers := 0
	for _, line := range strings.Split(cfg, "\n") {
		if line != "" && line[0] != ' ' && line[0] != '\t' && line[0] != '#' {
			inResolvers = strings.HasPrefix(line, "resolvers ")
		}
		if inResolvers {
			continue
		}
		sm := serverLine.FindStringSubmatch(line)
		if sm == nil {
			out = append(out, line)
			continue
		}
		servers++
		labels := strings.Split(sm[2], ".")
		if len(labels) != 4 || labels[3] != "svc" || labels[2] != m.namespace {
			t.Fatalf("backends.cfg: server %s is not <pod>.<service>.%s.svc: %s", sm[2], m.namespace, line)
		}
		pod, ok := byName[labels[0]]
		if !ok {
			t.Fatalf("backends.cfg: server %s: no pod %s", sm[2], labels[0])
		}
		// The name resolves only through a headless Service that is the
		// pod's StatefulSet's serviceName and selects the pod.
		svc := m.get(t, "Service", labels[1])
		if pod.ordinal < 0 || pod.obj.Spec.ServiceName != labels[1] || svc.Spec.ClusterIP != "None" {
			t.Fatalf("backends.cfg: server %s: Service %s is not the headless service of %s's StatefulSet", sm[2], labels[1], pod.name)
		}
		for k, v := range svc.Spec.Selector {
			if s, ok := v.(string); !ok || pod.obj.Spec.Template.Metadata.Labels[k] != s {
				t.Fatalf("backends.cfg: server %s: Service %s does not select pod %s (%s=%s)", sm[2], labels[1], pod.name, k, v)
			}
		}
		port, _ := strconv.Atoi(sm[3])
		addr, ok := pod.ports[port]
		if !ok {
			t.Fatalf("backends.cfg: server %s:%d: %s listens on no port %d (it listens on %v)", sm[2], port, pod.name, port, pod.ports)
		}
		rest := strings.Replace(sm[4], " resolvers dns", "", 1)
		rest = checkPort.ReplaceAllStringFunc(rest, func(s string) string {
			n, _ := strconv.Atoi(checkPort.FindStringSubmatch(s)[1])
			a, ok := pod.ports[n]
			if !ok {
				t.Fatalf("backends.cfg: server %s: health check port %d: %s listens on no such port", sm[2], n, pod.name)
			}
			_, hp, _ := net.SplitHostPort(a)
			return "port " + hp
		})
		local := sm[1] + addr + rest
		t.Logf("backends.cfg: %s → %s", strings.TrimSpace(line), strings.TrimSpace(local))
		out = append(out, local)
	}
	if servers == 0 {
		t.Fatal("backends.cfg has no server")
	}
	return strings.Join(out, "\n")
}
