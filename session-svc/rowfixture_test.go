package sessionsvc_test

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/compose/store/pebblestore"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
)

// The upgrade fixture: session rows as a released version wrote them. The
// rows of testdata/session-rows.txt and the Pebble directory
// testdata/pebble-sessions were written from fixtureSessions by the
// hand-written protowire codec of commit b0e0493 (session-svc/row.go as it
// was then), the latter through pebblestore as `shoal all` stores them. Every
// later version must read them back as the same sessions.
//
// They are never regenerated: -update-rows writes them only when they are
// missing, and rows written by newer code would prove nothing about the data
// directories already out there.
var updateRows = flag.Bool("update-rows", false,
	"write the missing upgrade fixtures testdata/session-rows.txt and testdata/pebble-sessions from fixtureSessions with the current code")

const (
	fixtureRows   = "testdata/session-rows.txt"
	fixturePebble = "testdata/pebble-sessions"
)

// fixtureSession is one session of the fixture, named in the rows file.
type fixtureSession struct {
	name string
	sess *sessionsvc.Session
}

// fixtureSessions covers every field of a stored session: set and unset,
// messages present but empty, zero and non-zero times (before 1970 and the
// epoch itself too), the largest values. Each is what a session service
// loading it at e2eNow leaves alone (no will due, none expired, online ones
// on a slot that gets its grace), so the service test can read them back.
func fixtureSessions() []fixtureSession {
	us := func(d time.Duration) time.Time { return time.UnixMicro(e2eNow.Add(d).UnixMicro() + 123).UTC() }
	fullMessage := &eventspb.Message{
		Topic: "dev/last-will", Payload: []byte{0, 1, 2, 0xff}, Qos: 2, Retain: true, PayloadUtf8: true,
		ExpiresAtMs: 1_700_000_000_000, ContentType: "text/plain", ResponseTopic: "r/t",
		CorrelationData: []byte("corr"), HasExpiry: true,
		UserProperties: []*eventspb.UserProperty{{Key: "k", Value: "v"}, {Key: "k", Value: "w"}},
	}
	expiry := uint32(60)
	return []fixtureSession{
		{"online-v5", &sessionsvc.Session{
			Tenant: "acme", ClientID: "dev-online",
			Generation: 7, SessionGeneration: 5, Active: true, Online: true,
			Route:   &eventspb.Route{Slot: 3, Connection: 3<<24 | 9, Generation: 7},
			Gateway: "gw-3", RequestID: 1<<40 + 1, ExpiryS: 3600, ProtocolVersion: 5, Username: "üser",
			Will:        &eventspb.Will{Message: fullMessage, DelayIntervalS: 30, ExpiryIntervalS: &expiry},
			ConnectedAt: us(-time.Minute),
			Inbox: []*eventspb.InboxAppend{{
				Message: &eventspb.Message{Topic: "q/1", Payload: []byte("one"), Qos: 1},
				Target:  &eventspb.Target{Qos: 1, SubscriptionIds: []uint32{3, 268435455}, PacketId: 32767, InboxSeq: 11},
				Seq:     11, PacketId: 32767, Sent: true,
				Source: &eventspb.Source{Partition: 2, Offset: 1 << 40},
			}, {
				Message: &eventspb.Message{Topic: "q/2", Payload: []byte("two"), Qos: 2},
				Target:  &eventspb.Target{Qos: 2, ShareGroup: "g", ShareFilter: "q/+", Release: true},
				Seq:     12, PacketId: 1, Sent: true, Received: true,
			}},
			InboxSeq: 12, LastPacketID: 1,
			Sources: []*eventspb.Source{{Partition: 0, Offset: 5}, {Partition: 2, Offset: 1 << 40}},
			Subscriptions: []*eventspb.SessionSubscription{
				{Filter: "$share/g/a/+", Options: &eventspb.SubscriptionOptions{Qos: 1, RetainHandling: 2}},
				{Filter: "a/#", Options: &eventspb.SubscriptionOptions{Qos: 2, NoLocal: true, RetainAsPublished: true, SubscriptionId: 268435455}},
				{Filter: "b", Options: &eventspb.SubscriptionOptions{}},
				{Filter: "c"},
			},
		}},
		{"offline-will-pending", &sessionsvc.Session{
			Tenant: "", ClientID: "dev-offline", // the default tenant
			Generation: 3, SessionGeneration: 2, Active: true,
			Route:   &eventspb.Route{Slot: 0, Connection: 1, Generation: 3},
			Gateway: "gw-0", RequestID: 2, ExpiryS: 86400, ProtocolVersion: 5,
			Will:           &eventspb.Will{Message: &eventspb.Message{Topic: "w", Payload: []byte("bye")}, DelayIntervalS: 7200},
			ConnectedAt:    us(-2 * time.Hour),
			DisconnectedAt: us(-time.Hour),
			WillDueAt:      us(time.Hour),
			Inbox: []*eventspb.InboxAppend{{
				Message: &eventspb.Message{Topic: "q/3", Payload: []byte("three"), Qos: 1},
				Target:  &eventspb.Target{Qos: 1},
				Seq:     1 << 33, PacketId: 32767,
			}},
			InboxDropped: 0xFFFFFFFF, InboxSeq: 1 << 33, LastPacketID: 32767,
			Sources:       []*eventspb.Source{{Partition: 1, Offset: 0}},
			Subscriptions: []*eventspb.SessionSubscription{{Filter: "x/+/y", Options: &eventspb.SubscriptionOptions{Qos: 1}}},
		}},
		{"ended-v311", &sessionsvc.Session{
			Tenant: "acme", ClientID: "dev-ended",
			Generation: 1<<64 - 1, SessionGeneration: 1<<64 - 2,
			Route:   &eventspb.Route{Slot: 1<<31 - 1, Connection: 1<<64 - 1, Generation: 1<<64 - 1},
			Gateway: "gw-🦈", RequestID: 1<<64 - 1, ExpiryS: kafka.SessionExpiryNever, ProtocolVersion: 4,
			ConnectedAt:    time.UnixMicro(-5).UTC(), // before 1970
			DisconnectedAt: time.UnixMicro(0).UTC(),  // the epoch: a time, not the zero time
			InboxSeq:       7, LastPacketID: 7,
			Sources: []*eventspb.Source{{Partition: 0, Offset: 1<<63 - 1}, {Partition: 1, Offset: 2}},
		}},
		{"empty-messages", &sessionsvc.Session{
			Tenant: "t", ClientID: "dev-empty-messages",
			Route: &eventspb.Route{}, Will: &eventspb.Will{},
			Inbox:         []*eventspb.InboxAppend{{}},
			Sources:       []*eventspb.Source{{}},
			Subscriptions: []*eventspb.SessionSubscription{{}},
		}},
		{"identity-only", &sessionsvc.Session{Tenant: "acme", ClientID: "dev-never"}},
	}
}

// TestRowFixture reads the rows a released version wrote: each decodes to
// the session it was written from.
func TestRowFixture(t *testing.T) {
	fixtures := fixtureSessions()
	if *updateRows {
		writeRowFixtures(t, fixtures)
	}
	rows := readRowFixture(t)
	for _, f := range fixtures {
		row, ok := rows[f.name]
		if !ok {
			t.Errorf("%s: no row in %s", f.name, fixtureRows)
			continue
		}
		delete(rows, f.name)
		got := &sessionsvc.Session{Tenant: f.sess.Tenant, ClientID: f.sess.ClientID}
		if err := sessionsvc.DecodeSessionRow(row, got); err != nil {
			t.Errorf("%s: decode: %v", f.name, err)
			continue
		}
		if !got.Equal(f.sess) {
			t.Errorf("%s: decoded\n %+v\nwant %+v", f.name, got, f.sess)
		}
	}
	for name := range rows {
		t.Errorf("%s: a row of %s without its session in fixtureSessions", name, fixtureRows)
	}
}

// TestServiceServesFixtureRows runs the session service on the Pebble
// directory a released version wrote: it loads every session as it was.
func TestServiceServesFixtureRows(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded Kafka")
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(fixturePebble)); err != nil {
		t.Fatalf("copy %s: %v", fixturePebble, err)
	}
	b := startBackbone(t)
	store, err := pebblestore.Open(dir, testLogger(t))
	if err != nil {
		t.Fatalf("open the fixture: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	svc, _ := b.runServiceWith(t, sessionsvc.DefaultConfig(), store)
	for _, f := range fixtureSessions() {
		got, ok := svc.Snapshot(f.sess.Tenant, f.sess.ClientID)
		if !ok {
			t.Errorf("%s: not loaded", f.name)
			continue
		}
		if !got.Equal(f.sess) {
			t.Errorf("%s: loaded\n %+v\nwant %+v", f.name, got, f.sess)
		}
	}
}

// readRowFixture returns the rows of the fixture by name.
func readRowFixture(t *testing.T) map[string][]byte {
	t.Helper()
	data, err := os.ReadFile(fixtureRows)
	if err != nil {
		t.Fatal(err)
	}
	rows := make(map[string][]byte)
	for i, text := range strings.Split(string(data), "\n") {
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		name, hexRow, _ := strings.Cut(text, " ")
		row, err := hex.DecodeString(hexRow)
		if err != nil {
			t.Fatalf("%s:%d: %v", fixtureRows, i+1, err)
		}
		if _, dup := rows[name]; dup {
			t.Fatalf("%s:%d: %s twice", fixtureRows, i+1, name)
		}
		rows[name] = row
	}
	return rows
}

// writeRowFixtures writes the fixtures that are missing with the current
// code.
func writeRowFixtures(t *testing.T, fixtures []fixtureSession) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(fixtureRows), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fixtureRows); errors.Is(err, fs.ErrNotExist) {
		var b strings.Builder
		b.WriteString("# Session rows written by sessionsvc.AppendSessionRow (the hand-written\n" +
			"# protowire codec of commit b0e0493): name, then the row in hex. See\n" +
			"# rowfixture_test.go; never regenerated.\n")
		for _, f := range fixtures {
			line := fmt.Sprintf("%s %x", f.name, sessionsvc.AppendSessionRow(nil, f.sess))
			b.WriteString(strings.TrimSpace(line) + "\n") // an empty row: the name alone
		}
		if err := os.WriteFile(fixtureRows, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", fixtureRows)
	}
	if _, err := os.Stat(fixturePebble); errors.Is(err, fs.ErrNotExist) {
		writePebbleFixture(t, fixtures)
		t.Logf("wrote %s", fixturePebble)
	}
}

// writePebbleFixture commits the sessions to the partitions of
// shoal.sessions their keys hash to (of e2eSessions), as the service
// would, in a new Pebble directory.
func writePebbleFixture(t *testing.T, fixtures []fixtureSession) {
	t.Helper()
	db, err := pebblestore.Open(fixturePebble, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	byPart := make(map[int32][]*sessionsvc.Session)
	for _, f := range fixtures {
		p := kafka.PartitionForKey([]byte(f.sess.Tenant+"/"+f.sess.ClientID), e2eSessions)
		byPart[p] = append(byPart[p], f.sess)
	}
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	for p := range int32(e2eSessions) {
		if err := db.CommitSessions(ctx, p, 40+int64(p), byPart[p]); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkSessionRow encodes and decodes the fixture's sessions.
func BenchmarkSessionRow(b *testing.B) {
	fixtures := fixtureSessions()
	b.Run("append", func(b *testing.B) {
		var buf []byte
		b.ReportAllocs()
		for b.Loop() {
			for _, f := range fixtures {
				buf = sessionsvc.AppendSessionRow(buf[:0], f.sess)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		rows := make([][]byte, len(fixtures))
		for i, f := range fixtures {
			rows[i] = sessionsvc.AppendSessionRow(nil, f.sess)
		}
		b.ReportAllocs()
		for b.Loop() {
			for i, f := range fixtures {
				s := &sessionsvc.Session{Tenant: f.sess.Tenant, ClientID: f.sess.ClientID}
				if err := sessionsvc.DecodeSessionRow(rows[i], s); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
