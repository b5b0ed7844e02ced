package broker_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/gateway/auth"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// startWithPasswords runs `shoal all` with a copy of the password file
// made by mosquitto_passwd (gateway/auth/testdata) and returns the copy's
// path, the MQTT address and the broker's Reload.
func startWithPasswords(t *testing.T) (string, func() string, func() error) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "gateway", "auth", "testdata", "mosquitto.passwd"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, func(c *config.Config) { c.Auth.PasswordFile = path })
	return path, func() string { return mqttAddr(b) }, b.Reload
}

// TestPasswordFileEndToEnd: a password file made by mosquitto_passwd
// authenticates mosquitto_pub and Paho; wrong passwords, unknown users,
// anonymous clients and client identifiers of another tenant are refused
// with the codes of each version; a user added to the file while clients
// are connected can connect after a reload, and the connected stay.
func TestPasswordFileEndToEnd(t *testing.T) {
	path, addr, reload := startWithPasswords(t)

	// Refusals, in both versions, through Shoal's own codec.
	for _, v := range []packet.Version{packet.V5, packet.V311} {
		for _, tc := range []struct {
			name     string
			cp       packet.Connect
			want     packet.ReasonCode
			wantV311 packet.ReasonCode // as the 3.1.1 return code decodes
		}{
			{"wrong password", packet.Connect{ClientID: []byte("acme-1"), UsernameFlag: true, Username: []byte("acme-alice"),
				PasswordFlag: true, Password: []byte("wrong horse")}, packet.CodeBadUserNameOrPassword, packet.CodeBadUserNameOrPassword},
			{"unknown user", packet.Connect{ClientID: []byte("acme-1"), UsernameFlag: true, Username: []byte("acme-eve"),
				PasswordFlag: true, Password: []byte("correct horse")}, packet.CodeBadUserNameOrPassword, packet.CodeBadUserNameOrPassword},
			{"anonymous", packet.Connect{ClientID: []byte("acme-1")}, packet.CodeNotAuthorized, packet.CodeNotAuthorized},
			{"another tenant", packet.Connect{ClientID: []byte("globex-1"), UsernameFlag: true, Username: []byte("acme-alice"),
				PasswordFlag: true, Password: []byte("correct horse")}, packet.CodeClientIdentifierNotValid, packet.CodeClientIdentifierNotValid},
		} {
			t.Run(v.String()+"/"+tc.name, func(t *testing.T) {
				r := dialRaw(t, addr(), v)
				cp := tc.cp
				cp.CleanStart = true
				if ca := r.connect(&cp); ca.Code != tc.want {
					t.Fatalf("CONNACK %v, want %v", ca.Code, tc.want)
				}
			})
		}
	}

	// A real client with the file's password, in both versions; the
	// subscriber is a Paho client that stays connected through the reload.
	sub, _ := dialV5(t, addr(), "acme-sub", func(cp *paho.Connect) {
		cp.Username, cp.UsernameFlag = "acme-bob", true
		cp.Password, cp.PasswordFlag = []byte("pässwörd€"), true
	})
	sub.subscribe(t, pahoSub("auth/#", 1))
	host, port, _ := net.SplitHostPort(addr())
	// pub runs mosquitto_pub and returns what it printed and its error.
	pub := func(user, pass, msg string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "mosquitto_pub", "-h", host, "-p", port, "-V", "mqttv311",
			"-i", "acme-pub", "-u", user, "-P", pass, "-t", "auth/x", "-m", msg, "-q", "1").CombinedOutput()
		return string(out), err
	}
	if out, err := pub("acme-alice", "correct horse", "m1"); err != nil {
		t.Fatalf("mosquitto_pub with the right password: %v: %s", err, out)
	}
	if m := sub.expect(t); string(m.Payload) != "m1" {
		t.Fatalf("got %q, want m1", m.Payload)
	}
	if out, err := pub("acme-alice", "wrong horse", "m2"); err == nil {
		t.Fatal("mosquitto_pub with a wrong password was accepted")
	} else if !strings.Contains(strings.ToLower(out), "bad user name or password") {
		t.Fatalf("mosquitto_pub with a wrong password said %q", out)
	}

	// A new user: refused before the reload, accepted after; the
	// subscriber is still connected and receives.
	if _, err := pub("acme-zed", "new pass", "m3"); err == nil {
		t.Fatal("a user not yet in the file was accepted")
	}
	if err := auth.SetPassword(path, "acme-zed", []byte("new pass")); err != nil {
		t.Fatal(err)
	}
	if err := reload(); err != nil {
		t.Fatal(err)
	}
	if out, err := pub("acme-zed", "new pass", "m4"); err != nil {
		t.Fatalf("the user added and reloaded was refused: %v: %s", err, out)
	}
	if m := sub.expect(t); string(m.Payload) != "m4" {
		t.Fatalf("got %q, want m4 (the subscriber stays connected through the reload)", m.Payload)
	}
}

// TestWillOnSysRefused: mosquitto_pub with a will on $SYS/… is refused
// (a will goes through the checks of a PUBLISH), and no subscriber of
// $SYS/# sees the forged topic; the same client with an ordinary will
// topic is accepted.
func TestWillOnSysRefused(t *testing.T) {
	b := startBroker(t)
	host, port, _ := net.SplitHostPort(mqttAddr(b))
	watcher, _ := dialV5(t, mqttAddr(b), "acme-watch")
	watcher.subscribe(t, pahoSub("$SYS/broker/forged", 0))
	for _, v := range []string{"mqttv5", "mqttv311"} {
		pub := func(willTopic string) (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, "mosquitto_pub", "-h", host, "-p", port, "-V", v, "-i", "acme-will",
				"--will-topic", willTopic, "--will-payload", "forged", "--will-retain",
				"-t", "acme/x", "-m", "m").CombinedOutput()
			return string(out), err
		}
		if out, err := pub("$SYS/broker/forged"); err == nil {
			t.Fatalf("%s: a will on $SYS was accepted", v)
		} else if !strings.Contains(strings.ToLower(out), "not authori") {
			t.Fatalf("%s: a will on $SYS refused with %q, want not authorised", v, out)
		}
		if out, err := pub("acme/status"); err != nil {
			t.Fatalf("%s: an ordinary will refused: %v: %s", v, err, out)
		}
	}
	watcher.expectNone(t, 300*time.Millisecond)
}
