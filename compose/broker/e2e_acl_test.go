package broker_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/gateway/auth"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// aclFile is the ACL of TestACLEndToEnd, in Mosquitto's syntax.
const aclFile = `# alice writes and reads the plant, but not its secret
user acme-alice
topic readwrite plant/#
topic deny plant/secret

# bob reads the plant, but not its secret
user acme-bob
topic read plant/#
topic deny plant/secret

# carol writes anything under plant
user acme-carol
topic write plant/#

# every client may write its own status
pattern write clients/%c/status
`

// TestACLEndToEnd: an ACL file in Mosquitto's syntax, with users of a
// mosquitto_passwd file: publishes it refuses get PUBACK 0x87 (5.0) and
// are dropped (3.1.1, mosquitto_pub), subscriptions it refuses get SUBACK
// 0x87, a will it refuses CONNACK 0x87, messages (live and retained) a
// subscriber may not read are not sent to it, and a reload while clients
// are connected applies to them at once.
func TestACLEndToEnd(t *testing.T) {
	dir := t.TempDir()
	pwPath, aclPath := filepath.Join(dir, "passwd"), filepath.Join(dir, "acl")
	src, err := os.ReadFile(filepath.Join("..", "..", "gateway", "auth", "testdata", "mosquitto.passwd"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pwPath, src, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := auth.SetPassword(pwPath, "acme-carol", []byte("carol pass")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(aclPath, []byte(aclFile), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, func(c *config.Config) { c.Auth.PasswordFile, c.Auth.ACLFile = pwPath, aclPath })
	as := func(user, pass string) func(*paho.Connect) {
		return func(cp *paho.Connect) {
			cp.Username, cp.UsernameFlag, cp.Password, cp.PasswordFlag = user, true, []byte(pass), true
		}
	}
	alice, _ := dialV5(t, mqttAddr(b), "acme-alice-1", as("acme-alice", "correct horse"))
	bob, _ := dialV5(t, mqttAddr(b), "acme-bob-1", as("acme-bob", "pässwörd€"))
	carol, _ := dialV5(t, mqttAddr(b), "acme-carol-1", as("acme-carol", "carol pass"))

	// Retained before bob subscribes: he gets plant/1, never the secret.
	carol.publish(t, &paho.Publish{Topic: "plant/secret", QoS: 1, Retain: true, Payload: []byte("retained secret")})
	carol.publish(t, &paho.Publish{Topic: "plant/1", QoS: 1, Retain: true, Payload: []byte("retained 1")})

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	sa, err := bob.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{
		{Topic: "plant/#", QoS: 1}, {Topic: "other/#", QoS: 1}, {Topic: "#", QoS: 1}, {Topic: "plant/secret", QoS: 1},
	}})
	if sa == nil { // (Paho also says "at least one requested subscription failed")
		t.Fatal(err)
	}
	want := []byte{1, byte(packet.CodeNotAuthorized), byte(packet.CodeNotAuthorized), byte(packet.CodeNotAuthorized)}
	if string(sa.Reasons) != string(want) {
		t.Fatalf("SUBACK % x, want % x", sa.Reasons, want)
	}
	if m := bob.expect(t); string(m.Payload) != "retained 1" {
		t.Fatalf("bob got %q on %s, want the retained plant/1", m.Payload, m.Topic)
	}

	// Live: the secret is written (carol may) but not sent to bob.
	carol.publish(t, &paho.Publish{Topic: "plant/secret", QoS: 1, Payload: []byte("live secret")})
	carol.publish(t, &paho.Publish{Topic: "plant/2", QoS: 1, Payload: []byte("live 2")})
	if m := bob.expect(t); string(m.Payload) != "live 2" {
		t.Fatalf("bob got %q on %s, want plant/2", m.Payload, m.Topic)
	}

	// Publishes the ACL refuses: 0x87; a pattern's own status is allowed.
	for _, tc := range []struct {
		c     *v5Client
		topic string
		want  packet.ReasonCode
	}{
		{alice, "plant/3", 0}, {alice, "plant/secret", packet.CodeNotAuthorized}, {bob, "plant/4", packet.CodeNotAuthorized},
		{bob, "clients/acme-bob-1/status", 0}, {bob, "clients/acme-alice-1/status", packet.CodeNotAuthorized},
	} {
		res, _ := tc.c.Publish(ctx, &paho.Publish{Topic: tc.topic, QoS: 1, Payload: []byte("x")})
		if res == nil || packet.ReasonCode(res.ReasonCode) != tc.want {
			t.Errorf("publish to %s: %+v, want reason %v", tc.topic, res, tc.want)
		}
	}
	if m := bob.expect(t); m.Topic != "plant/3" {
		t.Fatalf("bob got %s, want plant/3", m.Topic)
	}

	// 3.1.1 through mosquitto_pub: a refused publish is dropped, the
	// client does not learn it.
	host, port, _ := net.SplitHostPort(mqttAddr(b))
	mpub := func(topic, msg string) {
		t.Helper()
		cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer ccancel()
		if out, err := exec.CommandContext(cctx, "mosquitto_pub", "-h", host, "-p", port, "-V", "mqttv311", "-q", "1",
			"-i", "acme-bob-2", "-u", "acme-bob", "-P", "pässwörd€", "-t", topic, "-m", msg).CombinedOutput(); err != nil {
			t.Fatalf("mosquitto_pub: %v: %s", err, out)
		}
	}
	mpub("plant/5", "from mosquitto_pub")
	bob.expectNone(t, 300*time.Millisecond)

	// A will the ACL refuses.
	r := dialRaw(t, mqttAddr(b), packet.V5)
	if ca := r.connect(&packet.Connect{ClientID: []byte("acme-alice-2"), CleanStart: true, UsernameFlag: true,
		Username: []byte("acme-alice"), PasswordFlag: true, Password: []byte("correct horse"),
		WillFlag: true, WillTopic: []byte("other/will"), WillPayload: []byte("gone")}); ca.Code != packet.CodeNotAuthorized {
		t.Fatalf("CONNACK %v for a will the ACL refuses, want 0x87", ca.Code)
	}

	// Reload: a file that does not parse keeps the one in force; then bob
	// may write plant/#, and his connection sees it at once.
	if err := os.WriteFile(aclPath, []byte("user acme-bob\ntopic rwx plant/#\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(); err == nil {
		t.Fatal("an ACL file that does not parse was accepted")
	}
	if res, _ := bob.Publish(ctx, &paho.Publish{Topic: "plant/6", QoS: 1, Payload: []byte("x")}); res == nil || packet.ReasonCode(res.ReasonCode) != packet.CodeNotAuthorized {
		t.Fatalf("after a failed reload bob's publish got %+v, want 0x87", res)
	}
	if err := os.WriteFile(aclPath, []byte("user acme-bob\ntopic readwrite plant/#\ntopic deny plant/secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(); err != nil {
		t.Fatal(err)
	}
	if res, _ := bob.Publish(ctx, &paho.Publish{Topic: "plant/6", QoS: 1, Payload: []byte("after reload")}); res == nil || res.ReasonCode != 0 {
		t.Fatalf("after the reload bob's publish got %+v", res)
	}
	if m := bob.expect(t); string(m.Payload) != "after reload" {
		t.Fatalf("bob got %q, want his own message", m.Payload)
	}
}
