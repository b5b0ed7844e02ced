//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
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

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

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
	eventually.OK(t, clusterWait, func() string {
		resp, err := http.Get("http://" + p.ports[9090] + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK && servesHTTP(p.log) {
				return ""
			}
		}
		if p.exitedRelaunched(t) {
			return p.name + " started again"
		}
		return p.name + " not ready"
	})
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
