package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/compose/broker/brokertest"
	"github.com/shoal-mqtt/shoal/compose/config"
)

// TestReplayCommand runs `shoal replay` on the data directory of a shoal
// all that published a message and stopped, and on bad input.
func TestReplayCommand(t *testing.T) {
	dir := t.TempDir()
	b, stop := brokertest.Run(t, func(c *config.Config) { c.DataDir = dir })
	nc, err := net.Dial("tcp", b.Addr("mqtt").String())
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: nc})
	if _, err := c.Connect(t.Context(), &paho.Connect{ClientID: "acme-cli", CleanStart: true, KeepAlive: 30}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(t.Context(), &paho.Publish{Topic: "cli/x", Payload: []byte("hello from the cli test"), QoS: 1}); err != nil {
		t.Fatal(err)
	}
	_ = c.Disconnect(&paho.Disconnect{})
	stop()

	replay := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(t.Context(), append([]string{"replay", "--quiet", "--kafka-partitions", "4"}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	code, out, errOut := replay("--data-dir", dir, "--format", "table", "--type", "publish", "--tenant", "acme")
	if code != 0 || !strings.Contains(out, "hello from the cli test") || !strings.Contains(out, "acme-cli") {
		t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	code, out, _ = replay("--data-dir", dir, "--topic", "cli/#", "--from", time.Now().Add(-time.Hour).Format(time.RFC3339))
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, `{"kafka_topic":"shoal.messages"`) {
		t.Errorf("json: exit %d, %q", code, out)
	}
	id := out[strings.Index(out, `"message_id":"`)+len(`"message_id":"`):]
	id = id[:strings.IndexByte(id, '"')]
	var tout, terr bytes.Buffer
	if code := run(t.Context(), []string{"trace", id, "--data-dir", dir, "--kafka-partitions", "4"}, &tout, &terr); code != 0 ||
		!strings.Contains(tout.String(), `publish      acme-cli on "cli/x"`) || !strings.Contains(tout.String(), "connect      acme-cli from 127.0.0.1:") {
		t.Errorf("trace %s: exit %d, stdout:\n%s\nstderr:\n%s", id, code, tout.String(), terr.String())
	}
	// Flags go before or after the id: the same events either way.
	trace := func(args ...string) string {
		t.Helper()
		var o, e bytes.Buffer
		if code := run(t.Context(), append([]string{"trace"}, args...), &o, &e); code != 0 {
			t.Errorf("trace %q: exit %d, stderr %q", args, code, e.String())
		}
		return o.String()
	}
	after := trace(id, "--data-dir", dir, "--kafka-partitions", "4", "--format", "json")
	if strings.Count(after, "\n") < 2 || !strings.Contains(after, `"type":"publish"`) || !strings.Contains(after, `"type":"connect"`) {
		t.Errorf("trace %s --format json: %q, want the connect and the publish as JSON lines", id, after)
	}
	for _, args := range [][]string{
		{"--format", "json", "--data-dir", dir, "--kafka-partitions=4", id},
		{"--data-dir", dir, id, "--format=json", "--kafka-partitions", "4"},
		{"--format", "json", "--data-dir", dir, "--kafka-partitions", "4", "--", id},
	} {
		if got := trace(args...); got != after {
			t.Errorf("trace %q:\n%s\nwant, as with the flags after the id:\n%s", args, got, after)
		}
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"trace", "0000000000000001-1", "--data-dir", dir, "--kafka-partitions", "4"}, 1, "no such message"},
		{[]string{"trace", "--data-dir", dir, "--kafka-partitions", "4", "0000000000000001-1"}, 1, "no such message"},
		{[]string{"trace", "17", "--data-dir", dir}, 2, "message id"},
		{[]string{"trace", "--data-dir", dir}, 2, "give the message id"},
		{[]string{"trace", "--data-dir", dir, id, "--format", "mqtt"}, 2, "--format"},
		{[]string{"trace", id, "--data-dir", dir, id}, 2, "unexpected argument"},
		{[]string{"replay", "--data-dir", dir, "extra", "--type", "publish"}, 2, `unexpected argument "extra"`},
	} {
		var o, e bytes.Buffer
		if code := run(t.Context(), tc.args, &o, &e); code != tc.code || !strings.Contains(e.String(), tc.want) || strings.Count(e.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and one line with %q", tc.args, code, e.String(), tc.code, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--data-dir", dir + "/none"}, 1, "no Shoal data directory"},
		{[]string{"--data-dir", dir, "--topic", "no/such/topic"}, 1, "no event in the range matches"},
		{[]string{"--data-dir", dir, "--message-id", "0000000000000001-1"}, 1, "no event in the range matches"},
		{[]string{"--data-dir", dir, "--since", "soon"}, 2, "--since"},
		{[]string{"--data-dir", dir, "--to", "yesterday"}, 2, "--to"},
		{[]string{"--data-dir", dir, "--message-id", "17"}, 2, "--message-id"},
		{[]string{"--data-dir", dir, "--format", "mqtt"}, 2, "--to"},
		{[]string{"--data-dir", dir, "--format", "xml", "--qos", "7"}, 2, "--format"},
	} {
		code, _, errOut := replay(tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and one line with %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}

// TestReplayKafkaSASL reads a cluster that requires SASL/SCRAM (the
// embedded backbone's TCP listener) with the kafka.sasl flags.
func TestReplayKafkaSASL(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	kaddr := l.Addr().String()
	_ = l.Close()
	b, _ := brokertest.Run(t, func(c *config.Config) { c.DataDir, c.Kafka.EmbeddedAddr = dir, kaddr })
	nc, err := net.Dial("tcp", b.Addr("mqtt").String())
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: nc})
	if _, err := c.Connect(t.Context(), &paho.Connect{ClientID: "acme-sasl", CleanStart: true, KeepAlive: 30}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(t.Context(), &paho.Publish{Topic: "s/x", Payload: []byte("over scram"), QoS: 1}); err != nil {
		t.Fatal(err)
	}
	_ = c.Disconnect(&paho.Disconnect{})
	props, err := os.ReadFile(filepath.Join(dir, "kafka", "client.properties"))
	if err != nil {
		t.Fatal(err)
	}
	var user, pass string
	for _, l := range strings.Split(string(props), "\n") {
		if v, ok := strings.CutPrefix(l, "sasl.username="); ok {
			user = v
		}
		if v, ok := strings.CutPrefix(l, "sasl.password="); ok {
			pass = v
		}
	}
	good, bad := filepath.Join(t.TempDir(), "pw"), filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(good, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	replay := func(pw string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(t.Context(), []string{"replay", "--quiet", "--kafka-partitions", "4", "--kafka-brokers", kaddr, "--type", "publish",
			"--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-user", user, "--kafka-sasl-password-file", pw}, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	if code, out, errOut := replay(good); code != 0 || !strings.Contains(out, "over scram") {
		t.Errorf("with the credentials: exit %d, %q, %q", code, out, errOut)
	}
	if code, _, errOut := replay(bad); code != 1 || strings.Count(errOut, "\n") != 1 {
		t.Errorf("a wrong password: exit %d, stderr %q", code, errOut)
	}
}
