package charttest

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

const bridgeValues = "testdata/values/bridge.yaml"

// component is an object's app.kubernetes.io/component label.
func component(o Object) string {
	c, _ := field(o.Fields, "metadata", "labels", "app.kubernetes.io/component")
	s, _ := c.(string)
	return s
}

// valuesFile writes a values file of doc and returns its path.
func valuesFile(t *testing.T, doc string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestBridgeOnlyWithMappings: with the defaults, which have no mapping,
// nothing of the bridge is rendered and shoal.yaml has no bridges
// section; one mapping in either direction renders its Deployment,
// disruption budget and network policy.
func TestBridgeOnlyWithMappings(t *testing.T) {
	objs := render(t, nil)
	for _, o := range objs {
		if component(o) == "bridge" {
			t.Errorf("%s rendered without mappings", o)
		}
	}
	if b, ok := shoalYAML(t, objs)["bridges"]; ok {
		t.Errorf("shoal.yaml has bridges %v without mappings", b)
	}
	for name, doc := range map[string]string{
		"out": "bridge: {mappings: {out: [{name: t, mqtt_filter: 'a/#', kafka_topic: t}]}}",
		"in":  "bridge: {mappings: {in: [{name: c, kafka_topic: c, mqtt_topic: 'c/{key}'}]}}",
	} {
		t.Run(name, func(t *testing.T) {
			objs := render(t, []string{valuesFile(t, doc)})
			for _, kind := range []string{"Deployment", "PodDisruptionBudget", "NetworkPolicy"} {
				if o := find(t, objs, kind, release+"-bridge"); component(o) != "bridge" {
					t.Errorf("%s: component %q, want bridge", o, component(o))
				}
			}
			k, ok := field(shoalYAML(t, objs), "bridges", "kafka")
			if m, _ := k.(map[string]any); !ok || len(m) != 1 || m[name] == nil {
				t.Errorf("shoal.yaml bridges.kafka = %v, want the %s mapping alone", k, name)
			}
		})
	}
}

// TestBridgeDeployment: the mappings of bridge.yaml render one Deployment
// running `shoal bridge` with the routers' Kafka security, Secrets and
// configuration, the mappings as they are under bridges.kafka of
// shoal.yaml, no instance_id (each pod takes its host name, its own
// name), and the values' replicas and variables.
func TestBridgeDeployment(t *testing.T) {
	objs := render(t, []string{"testdata/values/external-kafka.yaml", bridgeValues})
	var deployments []Object
	for _, o := range objs {
		if o.Kind == "Deployment" && component(o) == "bridge" {
			deployments = append(deployments, o)
		}
	}
	if len(deployments) != 1 {
		t.Fatalf("%d Deployments of the bridge: %v", len(deployments), deployments)
	}
	var bridge, router appsv1.Deployment
	mustDecode(t, deployments[0], &bridge)
	mustDecode(t, find(t, objs, "Deployment", release+"-router"), &router)

	if bridge.Spec.Replicas == nil || *bridge.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want the values' 2", bridge.Spec.Replicas)
	}
	pod, rpod := bridge.Spec.Template.Spec, router.Spec.Template.Spec
	ctr, rctr := pod.Containers[0], rpod.Containers[0]
	if want := []string{"bridge", "--config", "/etc/shoal/config/shoal.yaml"}; !slices.Equal(ctr.Args, want) {
		t.Errorf("args %q, want %q", ctr.Args, want)
	}
	if !reflect.DeepEqual(pod.Volumes, rpod.Volumes) || !reflect.DeepEqual(ctr.VolumeMounts, rctr.VolumeMounts) {
		t.Errorf("volumes %+v mounted %+v, want the router's %+v mounted %+v", pod.Volumes, ctr.VolumeMounts, rpod.Volumes, rctr.VolumeMounts)
	}
	if got, want := bridge.Spec.Template.Annotations["checksum/config"], router.Spec.Template.Annotations["checksum/config"]; got == "" || got != want {
		t.Errorf("checksum/config %q, want the router's %q", got, want)
	}
	if bridge.Spec.Template.Labels["shoal.io/metrics"] != "true" {
		t.Errorf("pod labels %v: Service %s-metrics does not select it", bridge.Spec.Template.Labels, release)
	}
	if pod.Hostname != "" || pod.Subdomain != "" || (pod.SetHostnameAsFQDN != nil && *pod.SetHostnameAsFQDN) {
		t.Errorf("pod host name set (%q, %q, %v): the bridge's instance id is the host name, which must be the pod's name",
			pod.Hostname, pod.Subdomain, pod.SetHostnameAsFQDN)
	}
	wantEnv := []corev1.EnvVar{rctr.Env[0], {Name: "SHOAL_LOG_LEVEL", Value: "debug"}}
	if !reflect.DeepEqual(ctr.Env, wantEnv) {
		t.Errorf("env %+v, want %+v", ctr.Env, wantEnv)
	}

	cfg := shoalYAML(t, objs)
	raw, err := os.ReadFile(bridgeValues)
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	want, _ := field(values, "bridge", "mappings")
	got, _ := field(cfg, "bridges", "kafka")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("shoal.yaml bridges.kafka = %v, want bridge.mappings %v", got, want)
	}
	if s, ok := field(cfg, "kafka", "sasl", "password_file"); !ok || s != "/etc/shoal/kafka-sasl/password" {
		t.Errorf("shoal.yaml kafka.sasl.password_file = %v, want the mounted Secret's", s)
	}
}

// TestBridgeNetwork: the bridge serves only /metrics and the probes, and
// Kafka admits it, as a KRaft StatefulSet and as Strimzi's; the
// database, which it does not use, does not.
func TestBridgeNetwork(t *testing.T) {
	objs := render(t, []string{bridgeValues})
	var np networkingv1.NetworkPolicy
	mustDecode(t, find(t, objs, "NetworkPolicy", release+"-bridge"), &np)
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 || np.Spec.Ingress[0].Ports[0].Port.String() != "http" {
		t.Errorf("ingress %+v, want the http port alone", np.Spec.Ingress)
	}
	admits := func(peers []networkingv1.NetworkPolicyPeer) bool {
		for _, p := range peers {
			if p.PodSelector != nil && p.PodSelector.MatchLabels["app.kubernetes.io/component"] == "bridge" {
				return true
			}
		}
		return false
	}
	for name, want := range map[string]bool{release + "-kafka": true, release + "-scylla": false} {
		var p networkingv1.NetworkPolicy
		mustDecode(t, find(t, objs, "NetworkPolicy", name), &p)
		if got := admits(p.Spec.Ingress[0].From); got != want {
			t.Errorf("%s admits the bridge: %v, want %v", name, got, want)
		}
	}
	var pdb policyv1.PodDisruptionBudget
	mustDecode(t, find(t, objs, "PodDisruptionBudget", release+"-bridge"), &pdb)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.Selector.MatchLabels["app.kubernetes.io/component"] != "bridge" {
		t.Errorf("budget %+v, want one bridge unavailable at most", pdb.Spec)
	}

	kafka := find(t, render(t, []string{"testdata/values/strimzi.yaml", bridgeValues}), "Kafka", release)
	list, _ := field(kafka.Fields, "spec", "kafka", "listeners", 0, "networkPolicyPeers")
	b, err := yaml.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	var peers []networkingv1.NetworkPolicyPeer
	if err := yaml.Unmarshal(b, &peers); err != nil {
		t.Fatal(err)
	}
	if !admits(peers) {
		t.Errorf("%s: networkPolicyPeers %s lack the bridge", kafka, b)
	}
}

// TestBridgeMappingsRefused: values.schema.json refuses a mapping with an
// unknown key, a missing key Shoal requires, or a value out of its
// range, naming the mapping and the key.
func TestBridgeMappingsRefused(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		want      []string
	}{
		{"qos 3", "bridge: {mappings: {in: [{name: c, kafka_topic: c, mqtt_topic: 'c/{key}', qos: 3}]}}", []string{"/bridge/mappings/in/0/qos"}},
		{"unknown key", "bridge: {mappings: {out: [{name: t, mqtt_filter: 'a/#', kafka_topic: t, filter: 'a/#'}]}}", []string{"/bridge/mappings/out/0", "filter"}},
		{"no kafka_topic", "bridge: {mappings: {out: [{name: t, mqtt_filter: 'a/#'}]}}", []string{"/bridge/mappings/out/0", "kafka_topic"}},
		{"no name", "bridge: {mappings: {in: [{kafka_topic: c, mqtt_topic: 'c/{key}'}]}}", []string{"/bridge/mappings/in/0", "name"}},
		{"bad name", "bridge: {mappings: {out: [{name: 'my mapping', mqtt_filter: 'a/#', kafka_topic: t}]}}", []string{"/bridge/mappings/out/0/name"}},
		{"in topic a template", "bridge: {mappings: {in: [{name: c, kafka_topic: '{key}', mqtt_topic: 'c/{key}'}]}}", []string{"/bridge/mappings/in/0/kafka_topic"}},
		{"mappings not a list", "bridge: {mappings: {out: {name: t}}}", []string{"/bridge/mappings/out"}},
		{"env without name", "bridge: {extraEnv: [{value: x}]}", []string{"/bridge/extraEnv/0", "name"}},
	} {
		t.Run(c.name, func(t *testing.T) { refused(t, []string{valuesFile(t, c.doc)}, nil, c.want) })
	}
}
