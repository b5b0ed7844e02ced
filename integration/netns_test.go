//go:build integration

package integration

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A network namespace for one process of a test (TestFaults/
// GatewayPartition), joined to the host by a veth pair with addresses of
// the benchmarking range 198.18.0.0/15 (RFC 2544), which nothing routes
// off the machine. The servers of the suite listen on the host's
// 127.0.0.1 and stay there: the namespace's own loopback is left down, so
// 127.0.0.0/8 has no local route in it, and a route sends it over the veth
// (route_localnet on both ends lets loopback addresses cross it). The host
// reaches the process at its veth address (HAProxy, the readiness checks).
//
// A cut is a policy rule in the namespace per host port: TCP to that port
// is blackholed, so a connection already open stalls (its segments are
// dropped; TCP retransmits, and resumes when the rule goes) and a new
// connect fails at once with EINVAL. Nothing on the host changes but the
// veth's own settings; deleting the namespace removes the veth too, and a
// namespace left by a test process that died is removed by the next one.
type netNamespace struct {
	name     string
	addr     string // the namespace's end of the veth
	hostAddr string // the host's end: the source the namespace sees
	cuts     int    // policy rules added (preferences 100, 101, …)
}

// netnsPrefix names the namespaces of this suite: netnsPrefix<pid>-<tag>.
const netnsPrefix = "shoal-it-"

// newNetNamespace makes a namespace for t, deleted when t ends.
func newNetNamespace(t *testing.T, tag string) *netNamespace {
	t.Helper()
	removeStaleNamespaces(t)
	pid := os.Getpid()
	n := &netNamespace{name: fmt.Sprintf("%s%d-%s", netnsPrefix, pid, tag)}
	subnet := 4 * (pid % 64) // a /30 of 198.18.77.0/24 per test process
	n.hostAddr, n.addr = fmt.Sprintf("198.18.77.%d", subnet+1), fmt.Sprintf("198.18.77.%d", subnet+2)
	hostDev, nsDev := fmt.Sprintf("shv%dh", pid%100000), "shvn"
	if err := ipCmd("netns", "add", n.name); err != nil {
		t.Fatalf("a network namespace for the test (needs root, CAP_NET_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		if err := ipCmd("netns", "del", n.name); err != nil {
			t.Errorf("delete network namespace: %v", err)
		}
	})
	steps := [][]string{
		{"link", "add", hostDev, "type", "veth", "peer", "name", nsDev, "netns", n.name},
		{"addr", "add", n.hostAddr + "/30", "dev", hostDev},
		{"link", "set", hostDev, "up"},
		{"-n", n.name, "addr", "add", n.addr + "/30", "dev", nsDev},
		{"-n", n.name, "link", "set", nsDev, "up"},
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+hostDev+"/route_localnet", []byte("1"), 0o644); err != nil {
		t.Fatalf("route_localnet on %s: %v", hostDev, err)
	}
	for _, s := range [][]string{
		{"netns", "exec", n.name, "sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1", "net.ipv4.conf." + nsDev + ".route_localnet=1"},
		{"-n", n.name, "route", "add", "127.0.0.0/8", "via", n.hostAddr, "dev", nsDev, "src", n.addr},
	} {
		if err := ipCmd(s...); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// cut blackholes TCP from the namespace to the host's ports.
func (n *netNamespace) cut(t *testing.T, ports ...int) {
	t.Helper()
	for _, p := range ports {
		if err := ipCmd("-n", n.name, "rule", "add", "pref", strconv.Itoa(100+n.cuts), "ipproto", "tcp", "dport", strconv.Itoa(p), "blackhole"); err != nil {
			t.Fatal(err)
		}
		n.cuts++
	}
}

// heal removes every cut.
func (n *netNamespace) heal(t *testing.T) {
	t.Helper()
	for ; n.cuts > 0; n.cuts-- {
		if err := ipCmd("-n", n.name, "rule", "del", "pref", strconv.Itoa(100+n.cuts-1)); err != nil {
			t.Fatal(err)
		}
	}
}

// ipCmd runs ip with args.
func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// removeStaleNamespaces deletes the namespaces of test processes that are
// gone.
func removeStaleNamespaces(t *testing.T) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, netnsPrefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue
		}
		if err := ipCmd("netns", "del", name); err != nil {
			t.Logf("stale namespace %s: %v", name, err)
		}
	}
}

// freeAddrOn is a free port (on the host's loopback, so likely free in a
// new namespace too) on host.
func freeAddrOn(t *testing.T, host string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(host, port)
}

// startGatewayIn starts a gateway as c.startGateway does, inside ns,
// listening on its address.
func (c *cluster) startGatewayIn(ns *netNamespace, name string, extra ...string) *proc {
	c.t.Helper()
	p := &proc{c: c, name: name, role: "gateway", netns: ns, http: freeAddrOn(c.t, ns.addr), mqtt: freeAddrOn(c.t, ns.addr)}
	p.args = append([]string{"gateway", "--config", c.cfgPath, "--kafka-brokers", strings.Join(c.kafka.Brokers(), ","),
		"--http-listen", p.http, "--mqtt-listen", p.mqtt, "--ws-listen", "", "--gateway-id", name, "--gateway-slot", "-1"}, extra...)
	p.launch()
	return p
}
