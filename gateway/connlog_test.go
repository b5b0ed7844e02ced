package gateway

import (
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// offsetClock is the real time moved forward by what the test advanced
// it: deadlines keep running, and a test steps over an interval at once.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) Now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *offsetClock) advance(d time.Duration) { c.off.Add(int64(d)) }

// loggedGateway runs a gateway on fl, as startGateway does, whose records
// recs keeps (every level) and whose clock the test may advance; setup,
// when not nil, runs on the gateway before it runs.
func loggedGateway(t *testing.T, fl *fakeLog, setup func(*Gateway), opts ...func(*Config)) (*Gateway, *testlog.Records, *offsetClock, func() error) {
	t.Helper()
	recs, log := testlog.NewRecords()
	clock := &offsetClock{}
	g, stop := runGatewayWith(t, fl, func(g *Gateway) {
		g.log = log.With("role", "gateway", "gateway", g.cfg.ID)
		g.clock = clock.Now
		if setup != nil {
			setup(g)
		}
	}, opts...)
	t.Cleanup(func() { _ = stop() })
	return g, recs, clock, stop
}

const closeMsg = "connection closed by the gateway"

// infoLines returns the records at info level or above about client id.
func infoLines(recs *testlog.Records, id string) []testlog.Record {
	return recs.Matching(func(r testlog.Record) bool {
		return r.Level >= slog.LevelInfo && r.Attrs["client_id"] == id
	})
}

// closeLines returns the close lines of client id at info level or above.
func closeLines(recs *testlog.Records, id string) []testlog.Record {
	return recs.Matching(func(r testlog.Record) bool {
		return r.Level >= slog.LevelInfo && r.Message == closeMsg && r.Attrs["client_id"] == id
	})
}

// wantAttrs fails unless r has every attribute of want.
func wantAttrs(t *testing.T, recs *testlog.Records, r testlog.Record, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if !r.Has(k, v) {
			t.Errorf("%q has %s=%q, want %q; records:\n%s", r.Message, k, r.Attrs[k], v, recs)
		}
	}
}

// ended waits until g has no connection left: the ends are logged.
func ended(t *testing.T, g *Gateway) {
	t.Helper()
	eventually.True(t, gatewayWait, "the connection to end", func() bool { return g.Stats.Load(ConnectionsCurrent) == 0 })
}

// expectDisconnect reads until the gateway's DISCONNECT and checks its
// code.
func expectDisconnect(t *testing.T, nc net.Conn, rd *packet.Reader, code packet.ReasonCode) {
	t.Helper()
	if d, ok := read(t, nc, rd, 5*time.Second).(*packet.Disconnect); !ok || d.Code != code {
		t.Fatalf("got %+v, want DISCONNECT %v", d, code)
	}
}

// TestCloseLogBadPacket: a client that sends a malformed packet, or one
// breaking the protocol, after its CONNECT is logged once at info level:
// the reason code in hex and by name, the cause and what was wrong, and
// the connection's keys.
func TestCloseLogBadPacket(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bytes  []byte
		code   packet.ReasonCode
		reason string
		rname  string
	}{
		{"malformed", []byte{0x36, 0x00}, packet.CodeMalformedPacket, "0x81", "malformed_packet"}, // PUBLISH QoS 3
		{"protocol error", (&packet.Connect{Version: packet.V5, ClientID: []byte("t-1")}).Append(nil, packet.V5),
			packet.CodeProtocolError, "0x82", "protocol_error"}, // a second CONNECT
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, recs, _, _ := loggedGateway(t, newFakeLog(), nil)
			nc, rd := dial(t, g)
			if _, err := nc.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			expectDisconnect(t, nc, rd, tc.code)
			ended(t, g)
			lines := infoLines(recs, "t-1")
			if len(lines) != 1 || lines[0].Message != closeMsg {
				t.Fatalf("%d info lines about t-1, want one close line:\n%s", len(lines), recs)
			}
			wantAttrs(t, recs, lines[0], map[string]string{
				"reason": tc.reason, "reason_name": tc.rname, "cause": "protocol",
				"tenant": "t", "client_id": "t-1", "remote": nc.LocalAddr().String(), "listener": "mqtt", "protocol": "5.0",
				"role": "gateway",
			})
			if lines[0].Attrs["detail"] == "" {
				t.Errorf("close line without a detail:\n%s", recs)
			}
			if lines[0].Level != slog.LevelInfo {
				t.Errorf("close line at %v, want INFO", lines[0].Level)
			}
		})
	}
}

// TestCloseLogWriteTimeout: a client that does not read its socket is
// closed when a write waits write_timeout, and that close is logged once
// with its cause; the end that follows is not logged again at info.
func TestCloseLogWriteTimeout(t *testing.T) {
	fl := newFakeLog()
	g, recs, _, _ := loggedGateway(t, fl, nil, func(c *Config) { c.WriteTimeout = 300 * time.Millisecond })
	nc, _ := dial(t, g)
	c := connOf(t, g, "t-1")
	if tc, ok := c.nc.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(8 << 10)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(16 << 10)
	}
	payload := make([]byte, 256<<10)
	for i := range 32 { // 8 MiB: more than the sockets and the out buffer hold
		env := &eventspb.Envelope{Tenant: "t", Event: &eventspb.Envelope_Delivery{Delivery: &eventspb.Delivery{
			Message: &eventspb.Message{Topic: "big", Payload: payload},
			Targets: []*eventspb.Target{{ClientId: "t-1", Connection: c.id}},
			Source:  &eventspb.Source{Partition: 1, Offset: int64(i)},
		}}}
		fl.slot <- kafka.Batch{Records: []*kafka.Record{kafka.NewRecord(kafka.TopicDeliveries, nil, 0, env)}}
	}
	ended(t, g) // the client never reads
	lines := infoLines(recs, "t-1")
	if len(lines) != 1 || lines[0].Message != closeMsg {
		t.Fatalf("%d info lines about t-1, want one close line:\n%s", len(lines), recs)
	}
	wantAttrs(t, recs, lines[0], map[string]string{
		"cause": "write_timeout", "write_timeout": "300ms", "reason": "0x80", "reason_name": "unspecified_error",
		"tenant": "t", "client_id": "t-1", "remote": nc.LocalAddr().String(),
	})
}

// TestCloseLogKeepAlive: a client silent past its keep alive is closed
// one and a half keep alive periods after its last packet, and logged with
// the keep alive it asked for. It runs in a synctest bubble, the client
// over net.Pipe: the keep alive passes on the bubble's clock.
func TestCloseLogKeepAlive(t *testing.T) { synctest.Test(t, testCloseLogKeepAlive) }

func testCloseLogKeepAlive(t *testing.T) {
	g, recs, _, _ := loggedGateway(t, newFakeLog(), forBubble)
	nc, rd := connectPipe(t, g, "t-1", 1)
	start := time.Now()
	expectDisconnect(t, nc, rd, packet.CodeKeepAliveTimeout)
	if el := time.Since(start); el != 1500*time.Millisecond {
		t.Errorf("closed %v after the CONNACK, want 1.5 s (keep alive 1 s)", el)
	}
	ended(t, g)
	lines := closeLines(recs, "t-1")
	if len(lines) != 1 {
		t.Fatalf("%d close lines, want 1:\n%s", len(lines), recs)
	}
	wantAttrs(t, recs, lines[0], map[string]string{"cause": "keepalive_timeout", "reason": "0x8d", "keep_alive": "1s"})
}

// TestCloseLogRateLimited: a client closed again and again within the
// interval is logged once; its next close after the interval is logged
// with the number of lines left out. Another client is logged meanwhile.
func TestCloseLogRateLimited(t *testing.T) {
	g, recs, clock, _ := loggedGateway(t, newFakeLog(), nil)
	misbehave := func(id string) {
		t.Helper()
		nc, rd := connectAs(t, g, id, 0)
		write(t, nc, &packet.Connect{Version: packet.V5, ClientID: []byte(id)})
		expectDisconnect(t, nc, rd, packet.CodeProtocolError)
		ended(t, g)
	}
	for range 3 {
		misbehave("t-r")
	}
	misbehave("t-other")
	if lines := closeLines(recs, "t-r"); len(lines) != 1 || lines[0].Attrs["suppressed"] != "" {
		t.Fatalf("%d close lines of t-r, want 1 without suppressed:\n%s", len(lines), recs)
	}
	if lines := closeLines(recs, "t-other"); len(lines) != 1 {
		t.Fatalf("%d close lines of t-other, want 1:\n%s", len(lines), recs)
	}
	clock.advance(closeLogInterval / 2)
	misbehave("t-r")
	if lines := closeLines(recs, "t-r"); len(lines) != 1 {
		t.Fatalf("%d close lines of t-r before the interval passed, want 1:\n%s", len(lines), recs)
	}
	clock.advance(closeLogInterval / 2)
	misbehave("t-r")
	lines := closeLines(recs, "t-r")
	if len(lines) != 2 {
		t.Fatalf("%d close lines of t-r after the interval, want 2:\n%s", len(lines), recs)
	}
	wantAttrs(t, recs, lines[1], map[string]string{"suppressed": "3", "cause": "protocol", "reason": "0x82"})
}

// TestCloseLogNormalDisconnect: a client's own DISCONNECT leaves no line
// at info level; its connection and its end are at debug level, with the
// connection's keys.
func TestCloseLogNormalDisconnect(t *testing.T) {
	g, recs, _, _ := loggedGateway(t, newFakeLog(), nil)
	nc, _ := dial(t, g)
	write(t, nc, &packet.Disconnect{})
	// The CONNACK goes out before the gateway counts the connection, so
	// wait for the end's own line rather than for the count.
	eventually.True(t, gatewayWait, "the connection's end line", func() bool {
		return len(recs.Matching(func(r testlog.Record) bool { return r.Message == "connection ended" })) > 0
	})
	ended(t, g)
	if lines := infoLines(recs, "t-1"); len(lines) != 0 {
		t.Fatalf("info lines about a normal disconnect:\n%s", recs)
	}
	keys := map[string]string{"tenant": "t", "client_id": "t-1", "remote": nc.LocalAddr().String(), "listener": "mqtt", "protocol": "5.0"}
	for _, msg := range []string{"connection accepted", "connection ended"} {
		lines := recs.Matching(func(r testlog.Record) bool { return r.Message == msg && r.Attrs["client_id"] == "t-1" })
		if len(lines) != 1 || lines[0].Level != slog.LevelDebug {
			t.Fatalf("%q: %d lines, want one at debug level:\n%s", msg, len(lines), recs)
		}
		wantAttrs(t, recs, lines[0], keys)
	}
	ends := recs.Matching(func(r testlog.Record) bool { return r.Message == "connection ended" })
	wantAttrs(t, recs, ends[0], map[string]string{"cause": "disconnect", "reason": "0x00", "will": "false"})
}

// TestCloseLogAuthFailure: a refused CONNECT is logged once, with the
// user name but never the password.
func TestCloseLogAuthFailure(t *testing.T) {
	const secret = "hunter2-secret"
	g, recs, _, _ := loggedGateway(t, newFakeLog(), func(g *Gateway) {
		WithAuth(Auth{Passwords: fakePasswords{"u": "right"}})(g)
	})
	code, _, _ := connackFor(t, g, &packet.Connect{Version: packet.V5, ClientID: []byte("t-a"), CleanStart: true,
		UsernameFlag: true, Username: []byte("u"), PasswordFlag: true, Password: []byte(secret)})
	if code != packet.CodeBadUserNameOrPassword {
		t.Fatalf("CONNACK %v, want bad user name or password", code)
	}
	var lines []testlog.Record
	eventually.True(t, gatewayWait, "the refusal's close line", func() bool {
		lines = closeLines(recs, "t-a")
		return len(lines) > 0
	})
	// Once its serve has returned, the connection logs nothing more.
	eventually.True(t, gatewayWait, "the refused connection's serve to return", func() bool {
		g.live.mu.Lock()
		defer g.live.mu.Unlock()
		return g.live.n == 0
	})
	if lines = closeLines(recs, "t-a"); len(lines) != 1 {
		t.Fatalf("%d close lines, want 1:\n%s", len(lines), recs)
	}
	wantAttrs(t, recs, lines[0], map[string]string{
		"cause": "auth_failed", "reason": "0x86", "reason_name": "bad_user_name_or_password", "user": "u", "listener": "mqtt",
	})
	if !strings.HasPrefix(lines[0].Attrs["remote"], "127.0.0.1:") {
		t.Errorf("remote %q, want the client's address", lines[0].Attrs["remote"])
	}
	if strings.Contains(recs.String(), secret) {
		t.Fatalf("the password was logged:\n%s", recs)
	}
}

// TestCloseLogShutdown: the gateway stopping logs one line for all its
// connections, none per client at info level.
func TestCloseLogShutdown(t *testing.T) {
	g, recs, _, stop := loggedGateway(t, newFakeLog(), nil)
	for i := range 3 {
		nc, _ := connectAs(t, g, "t-"+strconv.Itoa(i), 0)
		go func() { _, _ = io.Copy(io.Discard, nc); _ = nc.Close() }() // reads the DISCONNECT, closes at its end
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if lines := recs.Matching(func(r testlog.Record) bool { return r.Level >= slog.LevelInfo && r.Message == closeMsg }); len(lines) != 0 {
		t.Fatalf("close lines per client at shutdown:\n%s", recs)
	}
	lines := recs.Matching(func(r testlog.Record) bool { return strings.HasPrefix(r.Message, "closing every connection") })
	if len(lines) != 1 || lines[0].Level != slog.LevelInfo {
		t.Fatalf("%d shutdown lines, want one at info level:\n%s", len(lines), recs)
	}
	wantAttrs(t, recs, lines[0], map[string]string{"connections": "3", "reason": "0x8b", "reason_name": "server_shutting_down"})
}

// TestCloseLimiter: one line per key and interval, the lines left out
// counted in the next; a storm of new keys does not grow the table past
// closeLogClients.
func TestCloseLimiter(t *testing.T) {
	var l closeLimiter
	t0 := time.Unix(1_700_000_000, 0)
	if ok, n := l.allow("a", t0); !ok || n != 0 {
		t.Fatalf("first line: %v, %d", ok, n)
	}
	for i := range 5 {
		if ok, _ := l.allow("a", t0.Add(time.Duration(i)*time.Second)); ok {
			t.Fatalf("line %d within the interval allowed", i)
		}
	}
	if ok, _ := l.allow("b", t0); !ok {
		t.Fatal("another key held back")
	}
	if ok, n := l.allow("a", t0.Add(closeLogInterval)); !ok || n != 5 {
		t.Fatalf("after the interval: %v, suppressed %d; want true, 5", ok, n)
	}
	if ok, n := l.allow("a", t0.Add(2*closeLogInterval)); !ok || n != 0 {
		t.Fatalf("after another interval: %v, suppressed %d; want true, 0", ok, n)
	}

	// A storm: new keys all the time, none of them expired.
	now := t0.Add(3 * closeLogInterval)
	for i := range 3 * closeLogClients {
		if ok, _ := l.allow("storm-"+strconv.Itoa(i), now); !ok {
			t.Fatalf("new key %d held back", i)
		}
		if n := l.len(); n > closeLogClients {
			t.Fatalf("%d keys remembered, more than %d", n, closeLogClients)
		}
	}
	// Expired entries go first: the recent ones stay.
	l = closeLimiter{}
	for i := range closeLogClients - 10 {
		l.allow("old-"+strconv.Itoa(i), t0)
	}
	later := t0.Add(closeLogInterval)
	for i := range 10 {
		l.allow("new-"+strconv.Itoa(i), later)
	}
	l.allow("trigger", later)
	if n := l.len(); n != 11 {
		t.Fatalf("%d keys after the sweep, want the 11 recent ones", n)
	}
	if ok, _ := l.allow("new-0", later); ok {
		t.Fatal("a recent key forgotten by the sweep")
	}
}
