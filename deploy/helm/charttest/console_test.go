package charttest

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

const consoleValues = "testdata/values/console.yaml"

// TestConsoleChart: with console.enabled every role serves its admin API
// on 9091 with the token of one Secret (made at random, different on each
// render), the routers' console asks the gateways and session services
// through headless Services that exist and select them, the console's
// Service sticks a browser to one router, and the network policies let
// the routers in; off by default, none of it renders.
func TestConsoleChart(t *testing.T) {
	objs := render(t, []string{consoleValues})
	cfg := shoalYAML(t, objs)
	adm, _ := cfg["admin"].(map[string]any)
	if adm["listen"] != ":9091" || adm["token_file"] != "/etc/shoal/admin/token" || adm["console"] != true ||
		adm["console_tokens_file"] != "/etc/shoal/console/tokens" {
		t.Fatalf("shoal.yaml admin: %v", adm)
	}
	var a, b corev1.Secret
	mustDecode(t, find(t, objs, "Secret", release+"-admin-token"), &a)
	mustDecode(t, find(t, render(t, []string{consoleValues}), "Secret", release+"-admin-token"), &b)
	if len(a.Data["token"]) != 43 || bytes.Equal(a.Data["token"], b.Data["token"]) {
		t.Fatalf("admin tokens %q and %q: want 43 random characters each render", a.Data["token"], b.Data["token"])
	}
	var router appsv1.Deployment
	mustDecode(t, find(t, objs, "Deployment", release+"-router"), &router)
	c := router.Spec.Template.Spec.Containers[0]
	var servers string
	for _, e := range c.Env {
		if e.Name == "SHOAL_ADMIN_CONSOLE_SERVERS" {
			servers = e.Value
		}
	}
	for _, s := range strings.Split(servers, ",") {
		name := strings.TrimSuffix(strings.TrimPrefix(s, "dns+http://"), ":9091")
		var svc corev1.Service
		mustDecode(t, find(t, objs, "Service", name), &svc)
		if svc.Spec.ClusterIP != "None" || svc.Spec.Ports[0].TargetPort.String() != "admin" {
			t.Errorf("Service %s of the console's servers: clusterIP %q, target port %s; want headless, admin", name, svc.Spec.ClusterIP, svc.Spec.Ports[0].TargetPort.String())
		}
	}
	if !strings.Contains(servers, release+"-gateway-admin") || !strings.Contains(servers, release+"-session-admin") {
		t.Fatalf("the routers' SHOAL_ADMIN_CONSOLE_SERVERS %q: want the gateways' and the session services'", servers)
	}
	for _, kind := range []struct{ kind, name string }{{"Deployment", release + "-session"}, {"StatefulSet", release + "-gateway"}} {
		var spec corev1.PodTemplateSpec
		if kind.kind == "Deployment" {
			var d appsv1.Deployment
			mustDecode(t, find(t, objs, kind.kind, kind.name), &d)
			spec = d.Spec.Template
		} else {
			var s appsv1.StatefulSet
			mustDecode(t, find(t, objs, kind.kind, kind.name), &s)
			spec = s.Spec.Template
		}
		ports := spec.Spec.Containers[0].Ports
		if !slices.ContainsFunc(ports, func(p corev1.ContainerPort) bool { return p.Name == "admin" && p.ContainerPort == 9091 }) {
			t.Errorf("%s: no admin port 9091: %v", kind.name, ports)
		}
	}
	var svc corev1.Service
	mustDecode(t, find(t, objs, "Service", release+"-console"), &svc)
	if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP || svc.Spec.Selector["app.kubernetes.io/component"] != "router" ||
		svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		t.Errorf("the console's Service: %+v", svc.Spec)
	}
	var np networkingv1.NetworkPolicy
	mustDecode(t, find(t, objs, "NetworkPolicy", release+"-session"), &np)
	admitted := false
	for _, in := range np.Spec.Ingress {
		for _, p := range in.Ports {
			if p.Port != nil && p.Port.String() == "admin" && len(in.From) == 1 &&
				in.From[0].PodSelector.MatchLabels["app.kubernetes.io/component"] == "router" {
				admitted = true
			}
		}
	}
	if !admitted {
		t.Errorf("the session services' network policy does not let the routers reach their admin API: %+v", np.Spec.Ingress)
	}
	if notes := renderNotes(t, []string{consoleValues}); !strings.Contains(notes, "kubectl get secret "+release+"-admin-token -o jsonpath='{.data.token}' | base64 -d") {
		t.Errorf("NOTES.txt does not say how to read the admin token:\n%s", notes)
	}
	// A Secret of the user's: the chart makes none.
	for _, o := range render(t, []string{consoleValues}, "console.adminTokenSecret.name=mine") {
		if o.Kind == "Secret" && o.Name == release+"-admin-token" {
			t.Fatalf("%s rendered with console.adminTokenSecret.name given", o)
		}
	}
	// Off by default.
	for _, o := range render(t, nil) {
		if strings.HasSuffix(o.Name, "-console") || strings.HasSuffix(o.Name, "-admin") || strings.HasSuffix(o.Name, "-admin-token") {
			t.Errorf("%s rendered without console.enabled", o)
		}
		if bytes.Contains(o.YAML, []byte("containerPort: 9091")) {
			t.Errorf("%s opens the admin port without console.enabled", o)
		}
	}
}
