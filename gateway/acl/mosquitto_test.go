package acl

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// mosquittoWait bounds every step against the real broker.
const mosquittoWait = 5 * time.Second

// Names the differential test adds to each file: a writer that may publish
// what the checks read, and a topic every reader may read, published last
// so that its arrival says the messages before it were sent or refused.
const (
	writerUser = "shoal-writer"
	sentinel   = "zzsync"
)

// TestMosquittoAgrees runs Mosquitto 2.0 with each file of matchCases (and
// the password file mosquitto_passwd makes) and asks it every check of the
// table: a write is a QoS 1 PUBLISH whose MQTT 5 PUBACK says 0x87 when
// refused, a read is a subscription to the topic that a writer publishes
// on, followed by a sentinel message. Mosquitto's answers must be this
// package's (except where '/' in an identifier turns patterns off here:
// there Mosquitto must give the answer of the oracle without that rule,
// and does differ at least once), and its SUBACK must grant every
// subscription (Shoal's AllowSubscribe checks them, see its doc). Reads of topics nobody may publish ($SYS, $share)
// cannot be asked this way; TestAllow and the oracle cover them.
func TestMosquittoAgrees(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Mosquitto broker per file (-short)")
	}
	broker := mosquittoBinary(t)
	passwd, err := exec.LookPath("mosquitto_passwd")
	if err != nil {
		t.Fatalf("mosquitto_passwd is not on PATH (Debian package mosquitto): %v; run scripts/test-deps.sh (make test does)", err)
	}

	shared := readableTempDir(t)
	pwPath := filepath.Join(shared, "passwd")
	users := []string{writerUser}
	for _, tc := range matchCases {
		for _, c := range tc.checks {
			if !c.who.anonymous && !slices.Contains(users, c.who.user) {
				users = append(users, c.who.user)
			}
		}
	}
	for i, u := range users {
		args := []string{"-b", pwPath, u, password(u)}
		if i == 0 {
			args = append([]string{"-c"}, args...)
		}
		if out, err := exec.Command(passwd, args...).CombinedOutput(); err != nil {
			t.Fatalf("mosquitto_passwd %s: %v: %s", u, err, out)
		}
	}
	if err := os.Chmod(pwPath, 0o644); err != nil {
		t.Fatal(err)
	}

	compared, asked, slashDiffers := 0, 0, 0
	for _, tc := range matchCases {
		t.Run(tc.name, func(t *testing.T) {
			text := withHarness(tc.file, tc.checks)
			f, err := Parse(strings.NewReader(text))
			if err != nil {
				t.Fatal(err)
			}
			addr := startMosquitto(t, broker, pwPath, text)
			writer := dialMosquitto(t, addr, who{user: writerUser, clientID: "shoal-writer"})
			for _, w := range whoOf(tc.checks) {
				var checks []check
				for _, c := range tc.checks {
					if c.who == w {
						checks = append(checks, c)
					}
				}
				cl := f.For(w.user, w.clientID, w.anonymous)
				got := askMosquitto(t, addr, writer, w, cl, checks)
				for _, c := range checks {
					asked++
					if cl.Allow(c.access, []byte(c.topic)) != c.want {
						t.Errorf("%+v %v %q: the harness's rules change the answer", w, c.access, c.topic)
					}
					m, ok := got[c]
					if !ok {
						continue
					}
					compared++
					if want := mosquitto20Check(f, w, c.access, c.topic); m != want {
						t.Errorf("%+v %v %q: Mosquitto says %v, the oracle of Mosquitto 2.0 %v", w, c.access, c.topic, m, want)
					}
					if m != c.want {
						if mosquittoCheck(f, w, c.access, c.topic) == mosquitto20Check(f, w, c.access, c.topic) {
							t.Errorf("%+v %v %q: Mosquitto says %v, this package %v", w, c.access, c.topic, m, c.want)
						} else {
							slashDiffers++
						}
					}
				}
			}
		})
	}
	t.Logf("%d of %d checks asked of Mosquitto; %d answered otherwise for '/' in an identifier", compared, asked, slashDiffers)
	if slashDiffers == 0 {
		t.Error("Mosquitto never substituted a '/' where this package refuses to: the table does not show the difference")
	}
	if compared < asked*3/4 {
		t.Fatalf("only %d of %d checks could be asked of Mosquitto", compared, asked)
	}
}

func password(user string) string { return "pw " + user }

// withHarness adds the writer's section and the sentinel's read rule to
// every section the checks use.
func withHarness(file string, checks []check) string {
	var b strings.Builder
	b.WriteString("topic read " + sentinel + "\n")
	b.WriteString(file)
	b.WriteString("\n")
	for _, w := range whoOf(checks) {
		if !w.anonymous {
			fmt.Fprintf(&b, "user %s\ntopic read %s\n", w.user, sentinel)
		}
	}
	fmt.Fprintf(&b, "user %s\ntopic write #\ntopic write $app/#\n", writerUser)
	return b.String()
}

func whoOf(checks []check) []who {
	var out []who
	for _, c := range checks {
		if !slices.Contains(out, c.who) {
			out = append(out, c.who)
		}
	}
	return out
}

// readableTempDir is a t.TempDir that other users may read: Mosquitto
// started as root reads its files as the user mosquitto.
func readableTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func mosquittoBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("mosquitto"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/mosquitto"); err == nil {
		return "/usr/sbin/mosquitto"
	}
	t.Fatal("mosquitto is not installed (Debian package mosquitto); run scripts/test-deps.sh (make test does)")
	return ""
}

// startMosquitto runs the broker with the ACL file on a free loopback port
// and stops it when the test ends.
func startMosquitto(t *testing.T, bin, passwd, aclText string) string {
	t.Helper()
	addr, err := launchMosquitto(t, bin, passwd, aclText)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// launchMosquitto runs the broker with the ACL file (and the password file,
// when passwd is not empty) and returns its address once it listens, or an
// error with its output when it exits first, having refused the file. The
// broker is stopped when the test ends.
func launchMosquitto(t *testing.T, bin, passwd, aclText string) (string, error) {
	t.Helper()
	dir := readableTempDir(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	aclPath := filepath.Join(dir, "acl")
	conf := fmt.Sprintf("listener %s 127.0.0.1\nallow_anonymous true\nacl_file %s\n"+
		"persistence false\nlog_dest stderr\nlog_type error\nlog_type warning\n", port, aclPath)
	if passwd != "" {
		conf += "password_file " + passwd + "\n"
	}
	confPath := filepath.Join(dir, "mosquitto.conf")
	for path, content := range map[string]string{aclPath: aclText, confPath: conf} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-c", confPath)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit status is read from exited and the output
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(mosquittoWait):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	var exitErr error
	eventually.OK(t, mosquittoWait, func() string {
		select {
		case <-exited:
			exitErr = fmt.Errorf("mosquitto exited: %s", out.String())
			return ""
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return fmt.Sprintf("mosquitto does not listen on %s: %v\n%s", addr, err, out.String())
		}
		_ = c.Close()
		return ""
	})
	if exitErr != nil {
		return "", exitErr
	}
	return addr, nil
}

// TestMosquittoParsesAlike gives Mosquitto each file of parseCases: it
// loads the files Parse accepts and refuses those Parse refuses, but for
// the lines the package documentation lists, where Parse is more lenient
// (indented comments) or stricter (a lone access word, a tab, text that
// is not UTF-8, a NUL, a line over MaxLineLen).
func TestMosquittoParsesAlike(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Mosquitto broker per file (-short)")
	}
	bin := mosquittoBinary(t)
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := launchMosquitto(t, bin, "", tc.in)
			loads := err == nil
			want := tc.errHas == ""
			switch tc.mosquitto {
			case mosqRefuses:
				want = false
			case mosqAccepts:
				want = true
			}
			if loads != want {
				t.Errorf("Mosquitto loads the file: %v, want %v (%v)", loads, want, err)
			}
		})
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type mqttClient struct {
	*paho.Client
	msgs chan string
}

// dialMosquitto connects an MQTT 5 client as w; it disconnects when the
// test ends.
func dialMosquitto(t *testing.T, addr string, w who) *mqttClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, mosquittoWait)
	if err != nil {
		t.Fatal(err)
	}
	c := &mqttClient{msgs: make(chan string, 1000)}
	c.Client = paho.NewClient(paho.ClientConfig{
		Conn: nc,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			c.msgs <- pr.Packet.Topic
			return true, nil
		}},
		OnClientError: func(error) {},
	})
	cp := &paho.Connect{ClientID: w.clientID, KeepAlive: 30, CleanStart: true}
	if !w.anonymous {
		cp.Username, cp.UsernameFlag = w.user, true
		cp.Password, cp.PasswordFlag = []byte(password(w.user)), true
	}
	ctx, cancel := context.WithTimeout(context.Background(), mosquittoWait)
	defer cancel()
	ca, err := c.Connect(ctx, cp)
	if err != nil {
		t.Fatalf("connect %+v: %v", w, err)
	}
	if ca.ReasonCode != 0 {
		t.Fatalf("connect %+v: CONNACK %#x", w, ca.ReasonCode)
	}
	t.Cleanup(func() { _ = c.Disconnect(&paho.Disconnect{}) })
	return c
}

// publish returns whether the broker accepted a QoS 1 PUBLISH.
func (c *mqttClient) publish(t *testing.T, topic string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mosquittoWait)
	defer cancel()
	pr, err := c.Publish(ctx, &paho.Publish{Topic: topic, QoS: 1, Payload: []byte("x")})
	if pr == nil {
		t.Fatalf("publish %q: %v", topic, err)
	}
	return pr.ReasonCode < 0x80
}

// askMosquitto returns Mosquitto's answer to each check it can ask.
func askMosquitto(t *testing.T, addr string, writer *mqttClient, w who, cl *Client, checks []check) map[check]bool {
	t.Helper()
	c := dialMosquitto(t, addr, w)
	defer func() { _ = c.Disconnect(&paho.Disconnect{}) }()
	got := make(map[check]bool)
	var reads []string
	for _, ck := range checks {
		if ck.access == Write {
			got[ck] = c.publish(t, ck.topic)
			continue
		}
		// A read can be asked if the writer may publish the topic (its
		// PUBLISH reaches no one yet: nobody has subscribed).
		if !slices.Contains(reads, ck.topic) && !strings.HasPrefix(ck.topic, "$share") && writer.publish(t, ck.topic) {
			reads = append(reads, ck.topic)
		}
	}
	if len(reads) == 0 {
		return got
	}
	subs := []paho.SubscribeOptions{{Topic: sentinel}}
	for _, r := range reads {
		subs = append(subs, paho.SubscribeOptions{Topic: r})
	}
	ctx, cancel := context.WithTimeout(context.Background(), mosquittoWait)
	defer cancel()
	sa, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: subs})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	for i, code := range sa.Reasons {
		// Mosquitto 2.0 grants every subscription; Shoal grants a topic
		// name exactly when it may read it (AllowSubscribe, after 2.1).
		if code >= 0x80 {
			t.Errorf("%+v: Mosquitto's SUBACK %#x for %q", w, code, subs[i].Topic)
		}
		if topic := []byte(subs[i].Topic); i > 0 && cl.AllowSubscribe(topic) != cl.AllowRead(topic) {
			t.Errorf("%+v: AllowSubscribe(%q) = %v, AllowRead = %v", w, topic, cl.AllowSubscribe(topic), cl.AllowRead(topic))
		}
	}
	for _, r := range reads {
		if !writer.publish(t, r) {
			t.Fatalf("the writer may no longer publish %q", r)
		}
	}
	if !writer.publish(t, sentinel) {
		t.Fatal("the writer may not publish the sentinel")
	}
	received := make(map[string]bool)
	timeout := time.After(mosquittoWait)
	for !received[sentinel] {
		select {
		case topic := <-c.msgs:
			received[topic] = true
		case <-timeout:
			t.Fatalf("%+v: the sentinel did not arrive (received %v)", w, received)
		}
	}
	for _, ck := range checks {
		if ck.access == Read && slices.Contains(reads, ck.topic) {
			got[ck] = received[ck.topic]
		}
	}
	return got
}
