//go:build integration

package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	start := func(role, name string, extra ...string) *proc {
		p := &proc{c: c, name: name, role: role, http: freeAddr(t), admin: freeAddr(t)}
		p.args = []string{role, "--config", c.cfgPath, "--kafka-brokers", strings.Join(c.kafka.Brokers(), ","),
			"--http-listen", p.http, "--admin-listen", p.admin, "--admin-token-file", tokenPath}
		p.args = append(p.args, extra...)
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

	clusterConsole(t, start, servers, gb.mqtt)
}

// clusterConsole checks one web console for the whole deployment: a third
// gateway's, which asks every other process's admin API (servers) beside
// its own and reads the log on Kafka: the clients of both gateways, the
// session service's sessions, every server's health, a log query, and a
// kick through the log, with the CSRF token the page carries.
func clusterConsole(t *testing.T, start func(role, name string, extra ...string) *proc, servers []string, gbMQTT string) {
	cons := start("gateway", "gw-console", "--mqtt-listen", freeAddr(t), "--ws-listen", "", "--gateway-id", "gw-console",
		"--gateway-slot", "-1", "--admin-console-servers", strings.Join(servers, ","))
	cons.waitReady()
	token, err := os.ReadFile(filepath.Join(cons.c.dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	base := "http://" + cons.admin
	resp, err := hc.PostForm(base+"/login", url.Values{"token": {strings.TrimSpace(string(token))}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	get := func(path string) string {
		t.Helper()
		resp, err := hc.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("console %s: %s\n%s", path, resp.Status, b)
		}
		return string(b)
	}
	late, _ := dialMQTT(t, gbMQTT, "acme-console-seen", true, 0)
	eventually.OK(t, clusterWait, func() string {
		page := get("/clients?tenant=acme")
		if strings.Contains(page, "acme-console-seen") && strings.Contains(page, "acme-pub") && strings.Contains(page, "gw-b") && !strings.Contains(page, "globex") {
			return ""
		}
		return "the console's clients of acme:\n" + page
	})
	if page := get("/sessions?tenant=acme"); !strings.Contains(page, "acme-c1") {
		t.Errorf("the console's sessions lack acme-c1:\n%s", page)
	}
	page := get("/")
	for _, want := range []string{"gw-a", "gw-b", "gw-console", "router ready", "session ready"} {
		if !strings.Contains(page, want) {
			t.Errorf("the console's overview lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "unreachable") {
		t.Errorf("the console's overview has an unreachable server:\n%s", page)
	}
	if page := get("/log?run=1&tenant=acme&type=connect&topics=sessions&since=1h"); !strings.Contains(page, "acme-console-seen") {
		t.Errorf("the console's log query lacks acme-console-seen's connect:\n%s", page)
	}
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(get("/clients?tenant=acme"))
	if m == nil {
		t.Fatal("no CSRF token on the console's clients page")
	}
	resp, err = hc.PostForm(base+"/clients/kick", url.Values{"csrf": {m[1]}, "tenant": {"acme"}, "client": {"acme-console-seen"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	select {
	case d := <-late.gone:
		if d.ReasonCode != 0x98 {
			t.Errorf("kicked from the console with 0x%02X, want 0x98", d.ReasonCode)
		}
	case <-time.After(clusterWait):
		t.Fatal("no DISCONNECT after the console's kick")
	}
}
