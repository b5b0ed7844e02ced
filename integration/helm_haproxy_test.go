//go:build integration

package integration

import (
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

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
	eventually.OK(t, clusterWait, func() string {
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
			return ""
		}
		if p.exitedRelaunched(t) {
			return "HAProxy started again"
		}
		return fmt.Sprintf("HAProxy's servers not all up: %d servers, down: %v", servers, down)
	})
	return h
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
