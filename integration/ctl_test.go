//go:build integration

package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// TestClusterCtl drives `shoal ctl` (the built binary) against a
// distributed cluster on a real Kafka and Cassandra: one session service,
// one router, two gateways, each with its admin API and one token file.
func TestClusterCtl(t *testing.T) {
	c := newCluster(t)
	tokenPath := filepath.Join(c.dir, "admin.token")
	if err := os.WriteFile(tokenPath, []byte("it-admin-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(role, name string) *proc {
		p := &proc{c: c, name: name, role: role, http: freeAddr(t), admin: freeAddr(t)}
		p.args = []string{role, "--config", c.cfgPath, "--kafka-brokers", strings.Join(c.kafka.Brokers(), ","),
			"--http-listen", p.http, "--admin-listen", p.admin, "--admin-token-file", tokenPath}
		if role == "gateway" {
			p.mqtt = freeAddr(t)
			p.args = append(p.args, "--mqtt-listen", p.mqtt, "--ws-listen", "", "--gateway-id", name, "--gateway-slot", "-1")
		}
		p.launch()
		return p
	}
	sess, router := start("session", "session"), start("router", "router")
	ga, gb := start("gateway", "gw-a"), start("gateway", "gw-b")
	var servers []string
	for _, p := range []*proc{sess, router, ga, gb} {
		p.waitReady() // may start it again on other ports, its admin API's too
		servers = append(servers, p.admin)
	}
	all := "--server=" + strings.Join(servers, ",")
	ctl := func(args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), c.bin, append([]string{"ctl", all, "--token-file", tokenPath}, args...)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errOut.String()
	}
	// poll runs ctl until check accepts its JSON output.
	poll := func(check func(out string) bool, args ...string) string {
		t.Helper()
		var out string
		eventually.OK(t, clusterWait, func() string {
			var code int
			var errOut string
			if code, out, errOut = ctl(append(args, "--format", "json")...); code == 0 && check(out) {
				return ""
			}
			return fmt.Sprintf("ctl %v: exit %d\n%s%s", args, code, out, errOut)
		})
		return out
	}

	sub, _ := dialMQTT(t, ga.mqtt, "acme-c1", false, 3600)
	sub.subscribe("t/#", 1)
	other, _ := dialMQTT(t, gb.mqtt, "globex-c2", true, 0)
	other.subscribe("t/#", 0)
	pub, _ := dialMQTT(t, gb.mqtt, "acme-pub", true, 0)
	if err := pub.publish("t/x", "kept", 1, true); err != nil {
		t.Fatal(err)
	}

	// Listings, merged across the servers, of one tenant alone.
	out := poll(func(out string) bool {
		var l struct {
			Clients []struct {
				Tenant   string `json:"tenant"`
				ClientID string `json:"client_id"`
				Gateway  string `json:"gateway"`
			} `json:"clients"`
		}
		if json.Unmarshal([]byte(out), &l) != nil {
			return false
		}
		got := map[string]string{}
		for _, c := range l.Clients {
			if c.Tenant != "acme" {
				t.Fatalf("acme's clients list a client of %q:\n%s", c.Tenant, out)
			}
			got[c.ClientID] = c.Gateway
		}
		return got["acme-c1"] == "gw-a" && got["acme-pub"] == "gw-b" && len(got) == 2
	}, "clients", "--tenant", "acme")
	t.Logf("ctl clients --tenant acme:\n%s", out)
	poll(func(out string) bool {
		return strings.Contains(out, `"client_id": "acme-c1"`) && strings.Contains(out, `"state": "connected"`) &&
			strings.Contains(out, `"gateway": "gw-a"`) && !strings.Contains(out, "globex")
	}, "sessions", "--tenant", "acme")
	poll(func(out string) bool {
		return strings.Contains(out, `"filter": "t/#"`) && strings.Contains(out, `"client_id": "acme-c1"`) && !strings.Contains(out, "globex")
	}, "subscriptions", "--tenant", "acme")
	poll(func(out string) bool {
		return strings.Contains(out, `"topic": "t/x"`) && strings.Contains(out, `"payload": "kept"`)
	}, "retained", "--tenant", "acme")
	if code, out, _ := ctl("subscriptions", "--tenant", "acme"); code != 0 || !strings.Contains(out, "FILTER") {
		t.Errorf("subscriptions table: exit %d\n%s", code, out)
	}

	// Kick: the client gets DISCONNECT 0x98 from gw-a, through the log.
	if code, _, errOut := ctl("kick", "acme-c1", "--tenant", "acme"); code != 0 {
		t.Fatalf("kick: exit %d: %s", code, errOut)
	}
	select {
	case d := <-sub.gone:
		if d.ReasonCode != 0x98 {
			t.Errorf("kicked with 0x%02X, want 0x98", d.ReasonCode)
		}
	case <-time.After(clusterWait):
		t.Fatal("no DISCONNECT after kick")
	}
	poll(func(out string) bool { return strings.Contains(out, `"state": "offline"`) }, "sessions", "show", "acme-c1", "--tenant", "acme")

	// Delete the retained message: a new subscriber gets nothing.
	if code, _, errOut := ctl("delete", "retained", "t/x", "--tenant", "acme"); code != 0 {
		t.Fatalf("delete retained: exit %d: %s", code, errOut)
	}
	poll(func(out string) bool { return !strings.Contains(out, `"t/x"`) }, "retained", "--tenant", "acme")
	late, _ := dialMQTT(t, gb.mqtt, "acme-late", true, 0)
	late.subscribe("t/x", 1)
	select {
	case m := <-late.msgs:
		t.Errorf("after deletion a new subscriber got %q on %s", m.Payload, m.Topic)
	case <-time.After(time.Second):
	}

	// Delete the session: a reconnect without clean start finds none.
	if code, _, errOut := ctl("delete", "session", "acme-c1", "--tenant", "acme"); code != 0 {
		t.Fatalf("delete session: exit %d: %s", code, errOut)
	}
	poll(func(out string) bool { return !strings.Contains(out, "acme-c1") }, "sessions", "--tenant", "acme")
	if _, ca := dialMQTT(t, gb.mqtt, "acme-c1", false, 3600); ca.SessionPresent {
		t.Error("reconnect after deletion: session present")
	}

	// Bad input: one line on stderr, exit 1.
	oneLine := func(what string, code int, errOut, want string) {
		t.Helper()
		if code != 1 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 and one line with %q", what, code, errOut, want)
		}
	}
	code, _, errOut := ctl("kick", "acme-nobody", "--tenant", "acme")
	oneLine("unknown client", code, errOut, "acme-nobody")
	bad := filepath.Join(t.TempDir(), "bad.token")
	if err := os.WriteFile(bad, []byte("wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = ctl("clients", "--tenant", "acme", "--token-file", bad)
	oneLine("wrong token", code, errOut, "401")
	code, _, errOut = ctl("clients", "--tenant", "acme", "--server", freeAddr(t))
	oneLine("unreachable server", code, errOut, "cannot reach")
}
