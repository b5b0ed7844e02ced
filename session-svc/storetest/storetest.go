package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
)

// Harness opens the stores the suite tests.
type Harness struct {
	// Open returns a new, empty store. The suite calls it once per subtest;
	// closing the store is the harness's business (t.Cleanup).
	Open func(t *testing.T) sessionsvc.Store
	// Reopen closes s and opens the same data again, as a restart of the
	// process would. Nil skips the durability subtest.
	Reopen func(t *testing.T, s sessionsvc.Store) sessionsvc.Store
}

// Run runs the conformance suite against the stores of h.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Open == nil {
		t.Fatal("storetest: Harness.Open is nil")
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"Empty", testEmpty},
		{"RoundTrip", testRoundTrip},
		{"Replace", testReplace},
		{"OffsetOnly", testOffsetOnly},
		{"OffsetZero", testOffsetZero},
		{"PartitionsIsolated", testPartitionsIsolated},
		{"KeysUnambiguous", testKeysUnambiguous},
		{"NoAliasing", testNoAliasing},
		{"LoadErrorStops", testLoadErrorStops},
		{"Many", testMany},
		{"ConcurrentPartitions", testConcurrentPartitions},
		{"Reopen", testReopen},
		{"LoadOne", testLoadOne},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

// at is a time with the microsecond precision stores keep.
func at(sec int64) time.Time { return time.Unix(sec, 123456000).UTC() }

// full returns a session with every field set, for round trips.
func full(tenant, client string, gen uint64) *sessionsvc.Session {
	return &sessionsvc.Session{
		Tenant:           tenant,
		ClientID:         client,
		Generation:       gen,
		Active:           true,
		Online:           true,
		Route:            &eventspb.Route{Slot: 7, Connection: 1<<40 + 3, Generation: gen},
		PendingRemoval:   &eventspb.Route{Slot: 6, Connection: 1<<40 + 2, Generation: gen - 1},
		RemoveEverywhere: true,
		Gateway:          "gw-7",
		RequestID:        99,
		ExpiryS:          kafka.SessionExpiryNever,
		ProtocolVersion:  5,
		Username:         "üser",
		Will: &eventspb.Will{
			DelayIntervalS: 30,
			Message: &eventspb.Message{
				Topic: "t/last-will", Payload: []byte{0, 1, 2, 0xff}, Qos: 2, Retain: true,
				PayloadUtf8: true, ExpiresAtMs: 1_700_000_000_000, ContentType: "text/plain",
				ResponseTopic: "r/t", CorrelationData: []byte("corr"), HasExpiry: true,
				UserProperties: []*eventspb.UserProperty{{Key: "k", Value: "v"}, {Key: "k", Value: "w"}},
			},
		},
		ConnectedAt:    at(1_700_000_000),
		DisconnectedAt: at(1_700_000_100),
		WillDueAt:      at(1_700_000_160),
		Inbox: []*eventspb.InboxAppend{{
			Message: &eventspb.Message{Topic: "q/1", Payload: []byte("one"), Qos: 1},
			Target:  &eventspb.Target{Qos: 1, SubscriptionIds: []uint32{3}},
			Seq:     41, PacketId: 32767, Sent: true,
			Source: &eventspb.Source{Partition: 0, Offset: 12},
		}, {
			Message: &eventspb.Message{Topic: "q/2", Payload: []byte("two"), Qos: 2},
			Target:  &eventspb.Target{Qos: 2, ShareGroup: "g", ShareFilter: "q/+"},
			Seq:     42, PacketId: 1, Sent: true, Received: true,
		}},
		InboxDropped: 2,
		InboxSeq:     42,
		LastPacketID: 1,
		Sources:      []*eventspb.Source{{Partition: 0, Offset: 12}, {Partition: 5, Offset: 1 << 40}},
		Subscriptions: []*eventspb.SessionSubscription{
			{Filter: "$share/g/a/+", Options: &eventspb.SubscriptionOptions{Qos: 1, RetainHandling: 2}},
			{Filter: "a/#", Options: &eventspb.SubscriptionOptions{Qos: 2, NoLocal: true, RetainAsPublished: true, SubscriptionId: 268435455}},
			{Filter: "b", Options: &eventspb.SubscriptionOptions{}},
		},
	}
}

// minimal is a session with only its identity and generation: an ended
// session's record.
func minimal(tenant, client string, gen uint64) *sessionsvc.Session {
	return &sessionsvc.Session{Tenant: tenant, ClientID: client, Generation: gen}
}

// load returns every session of partition p by tenant/client, and the
// offset.
func load(t *testing.T, s sessionsvc.Store, p int32) (map[[2]string]*sessionsvc.Session, int64) {
	t.Helper()
	got := make(map[[2]string]*sessionsvc.Session)
	off, err := s.LoadSessions(t.Context(), p, func(ss *sessionsvc.Session) error {
		k := [2]string{ss.Tenant, ss.ClientID}
		if _, dup := got[k]; dup {
			return fmt.Errorf("session %q/%q loaded twice", ss.Tenant, ss.ClientID)
		}
		got[k] = ss
		return nil
	})
	if err != nil {
		t.Fatalf("LoadSessions(%d): %v", p, err)
	}
	return got, off
}

func commit(t *testing.T, s sessionsvc.Store, p int32, off int64, sessions ...*sessionsvc.Session) {
	t.Helper()
	if err := s.CommitSessions(t.Context(), p, off, sessions); err != nil {
		t.Fatalf("CommitSessions(%d, %d): %v", p, off, err)
	}
}

// expect checks that partition p holds exactly want at offset off.
func expect(t *testing.T, s sessionsvc.Store, p int32, off int64, want ...*sessionsvc.Session) {
	t.Helper()
	got, gotOff := load(t, s, p)
	if gotOff != off {
		t.Errorf("partition %d: offset %d, want %d", p, gotOff, off)
	}
	if len(got) != len(want) {
		t.Errorf("partition %d: %d sessions, want %d", p, len(got), len(want))
	}
	for _, w := range want {
		g, ok := got[[2]string{w.Tenant, w.ClientID}]
		switch {
		case !ok:
			t.Errorf("partition %d: session %q/%q missing", p, w.Tenant, w.ClientID)
		case !g.Equal(w):
			t.Errorf("partition %d: session %q/%q:\n got %+v\nwant %+v", p, w.Tenant, w.ClientID, g, w)
		case w.DisconnectedAt.IsZero() != g.DisconnectedAt.IsZero() || w.ConnectedAt.IsZero() != g.ConnectedAt.IsZero():
			t.Errorf("partition %d: session %q/%q: zero times not kept", p, w.Tenant, w.ClientID)
		}
		// The point read gives the same session.
		one, err := sessionsvc.LoadClient(t.Context(), s, p, w.Tenant, w.ClientID)
		switch {
		case err != nil:
			t.Errorf("LoadClient(%d, %q, %q): %v", p, w.Tenant, w.ClientID, err)
		case one == nil:
			t.Errorf("LoadClient(%d, %q, %q): nothing, want the session", p, w.Tenant, w.ClientID)
		case !one.Equal(w) || one.Tenant != w.Tenant || one.ClientID != w.ClientID:
			t.Errorf("LoadClient(%d, %q, %q):\n got %+v\nwant %+v", p, w.Tenant, w.ClientID, one, w)
		}
	}
}

// absent checks that LoadClient finds no session of tenant/client in
// partition p.
func absent(t *testing.T, s sessionsvc.Store, p int32, tenant, client string) {
	t.Helper()
	one, err := sessionsvc.LoadClient(t.Context(), s, p, tenant, client)
	if err != nil || one != nil {
		t.Errorf("LoadClient(%d, %q, %q) = %+v, %v; want nothing", p, tenant, client, one, err)
	}
}

func testEmpty(t *testing.T, h Harness) {
	s := h.Open(t)
	called := false
	off, err := s.LoadSessions(t.Context(), 0, func(*sessionsvc.Session) error { called = true; return nil })
	if err != nil {
		t.Fatalf("LoadSessions: %v", err)
	}
	if off != -1 || called {
		t.Fatalf("empty store: offset %d (want -1), fn called %v", off, called)
	}
}

func testRoundTrip(t *testing.T, h Harness) {
	s := h.Open(t)
	online := full("acme", "dev-1", 3)
	online.DisconnectedAt = time.Time{}
	offline := full("acme", "dev-2", 1)
	offline.Online = false
	offline.Will = nil
	ended := minimal("", "dev-3", 12)
	ended.Route = &eventspb.Route{Slot: 0, Connection: 0, Generation: 12}
	commit(t, s, 2, 41, online, offline, ended, minimal("acme", "dev-4", 1))
	expect(t, s, 2, 41, online, offline, ended, minimal("acme", "dev-4", 1))
}

func testReplace(t *testing.T, h Harness) {
	s := h.Open(t)
	a, b := full("t", "a", 1), full("t", "b", 1)
	commit(t, s, 0, 5, a, b)
	a2 := full("t", "a", 2)
	a2.Subscriptions = a2.Subscriptions[:1]
	a2.Will = nil
	a2.Active, a2.Online = false, false
	commit(t, s, 0, 9, a2)
	expect(t, s, 0, 9, a2, b)
}

func testOffsetOnly(t *testing.T, h Harness) {
	s := h.Open(t)
	a := full("t", "a", 1)
	commit(t, s, 1, 5, a)
	commit(t, s, 1, 6)
	expect(t, s, 1, 6, a)
}

func testOffsetZero(t *testing.T, h Harness) {
	s := h.Open(t)
	commit(t, s, 0, 0)
	expect(t, s, 0, 0)
}

func testPartitionsIsolated(t *testing.T, h Harness) {
	s := h.Open(t)
	a, b := full("t", "a", 1), full("t", "b", 4)
	commit(t, s, 3, 10, a)
	commit(t, s, 4, 20, b)
	expect(t, s, 3, 10, a)
	expect(t, s, 4, 20, b)
	expect(t, s, 5, -1)
	// Partition numbers are not confused with their byte patterns.
	commit(t, s, 256, 30, minimal("t", "c", 1))
	expect(t, s, 256, 30, minimal("t", "c", 1))
	expect(t, s, 1, -1)
	expect(t, s, 0, -1)
}

func testKeysUnambiguous(t *testing.T, h Harness) {
	s := h.Open(t)
	// Pairs whose naive concatenations collide.
	ids := [][2]string{
		{"a", "b/c"}, {"a/b", "c"}, {"", "a/b/c"}, {"ab", "c"}, {"a", "bc"},
		{"", "a"}, {"a", ""}, {"a\x00", "b"}, {"a", "\x00b"}, {"日本", "クライアント"},
	}
	var want []*sessionsvc.Session
	for i, id := range ids {
		want = append(want, minimal(id[0], id[1], uint64(i+1)))
	}
	commit(t, s, 0, 1, want...)
	expect(t, s, 0, 1, want...)
}

func testNoAliasing(t *testing.T, h Harness) {
	s := h.Open(t)
	a := full("t", "a", 1)
	commit(t, s, 0, 1, a)
	want := full("t", "a", 1)
	// The store does not keep what it was given …
	a.Generation = 100
	a.Route.Slot = 100
	a.Subscriptions[0].Filter = "changed"
	a.Will.Message.Payload[0] = 42
	expect(t, s, 0, 1, want)
	// … nor what it handed out.
	got, _ := load(t, s, 0)
	g := got[[2]string{"t", "a"}]
	g.Route.Slot = 100
	g.Subscriptions[0].Filter = "changed"
	g.Will.Message.Payload[0] = 42
	expect(t, s, 0, 1, want)
}

func testLoadErrorStops(t *testing.T, h Harness) {
	s := h.Open(t)
	commit(t, s, 0, 1, minimal("t", "a", 1), minimal("t", "b", 1), minimal("t", "c", 1))
	stop := errors.New("stop here")
	calls := 0
	_, err := s.LoadSessions(t.Context(), 0, func(*sessionsvc.Session) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) {
		t.Fatalf("LoadSessions error %v, want one wrapping %v", err, stop)
	}
	if calls != 1 {
		t.Fatalf("fn called %d times after it failed, want 1", calls)
	}
}

func testMany(t *testing.T, h Harness) {
	s := h.Open(t)
	const n = 1000
	var want []*sessionsvc.Session
	for i := range n {
		want = append(want, minimal("t", fmt.Sprintf("client-%04d", i), uint64(i+1)))
	}
	big := full("t", "big", 1)
	big.Subscriptions = nil
	for i := range 1000 {
		big.Subscriptions = append(big.Subscriptions, &eventspb.SessionSubscription{
			Filter: fmt.Sprintf("f/%04d/#", i), Options: &eventspb.SubscriptionOptions{Qos: uint32(i % 3)},
		})
	}
	want = append(want, big)
	commit(t, s, 0, 1000, want...)
	expect(t, s, 0, 1000, want...)
}

func testConcurrentPartitions(t *testing.T, h Harness) {
	s := h.Open(t)
	const parts, rounds = 4, 20
	var wg sync.WaitGroup
	errs := make(chan error, parts)
	for p := range int32(parts) {
		wg.Go(func() {
			for r := range rounds {
				sess := minimal("t", fmt.Sprintf("p%d", p), uint64(r+1))
				if err := s.CommitSessions(context.Background(), p, int64(r), []*sessionsvc.Session{sess}); err != nil {
					errs <- err
					return
				}
				if _, err := s.LoadSessions(context.Background(), p, func(*sessionsvc.Session) error { return nil }); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for p := range int32(parts) {
		expect(t, s, p, rounds-1, minimal("t", fmt.Sprintf("p%d", p), rounds))
	}
}

func testReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("the harness cannot reopen its store")
	}
	s := h.Open(t)
	a, b := full("t", "a", 7), minimal("u", "b", 2)
	commit(t, s, 0, 70, a)
	commit(t, s, 9, 90, b)
	s = h.Reopen(t, s)
	expect(t, s, 0, 70, a)
	expect(t, s, 9, 90, b)
	a2 := full("t", "a", 8)
	commit(t, s, 0, 71, a2)
	s = h.Reopen(t, s)
	expect(t, s, 0, 71, a2)
}

// testLoadOne checks the point read: a client never stored, or stored in
// another partition only, has nothing; a session handed out is the
// caller's; reads run beside commits of the same partition.
func testLoadOne(t *testing.T, h Harness) {
	s := h.Open(t)
	absent(t, s, 0, "t", "a")
	commit(t, s, 0, 1, full("t", "a", 3), minimal("t", "b", 1))
	commit(t, s, 1, 1, minimal("u", "c", 1))
	absent(t, s, 0, "t", "c")
	absent(t, s, 0, "u", "c")
	absent(t, s, 1, "t", "a")
	absent(t, s, 0, "", "a")
	absent(t, s, 0, "t", "a\x00")

	// Several at once: those stored, each once; an error of fn stops it.
	var names []string
	clients := []sessionsvc.Client{{Tenant: "t", ID: "b"}, {Tenant: "t", ID: "x"}, {Tenant: "t", ID: "a"}, {Tenant: "u", ID: "c"}}
	err := s.LoadClients(t.Context(), 0, clients, func(ss *sessionsvc.Session) error {
		names = append(names, ss.Tenant+"/"+ss.ClientID)
		return nil
	})
	slices.Sort(names)
	if err != nil || !slices.Equal(names, []string{"t/a", "t/b"}) {
		t.Errorf("LoadClients of partition 0: %q, %v; want t/a and t/b", names, err)
	}
	stop := errors.New("stop here")
	calls := 0
	err = s.LoadClients(t.Context(), 0, clients, func(*sessionsvc.Session) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("LoadClients with fn failing: %v after %d calls, want %v after 1", err, calls, stop)
	}

	got, err := sessionsvc.LoadClient(t.Context(), s, 0, "t", "a")
	if err != nil || got == nil {
		t.Fatalf("LoadClient: %+v, %v", got, err)
	}
	got.Route.Slot = 100
	got.Subscriptions[0].Filter = "changed"
	expect(t, s, 0, 1, full("t", "a", 3), minimal("t", "b", 1))

	// Reads beside commits: each sees a whole committed session.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 20 {
			next := full("t", "a", uint64(10+i))
			next.InboxSeq = uint64(10 + i)
			if err := s.CommitSessions(context.Background(), 0, int64(2+i), []*sessionsvc.Session{next}); err != nil {
				t.Errorf("CommitSessions: %v", err)
				return
			}
		}
	}()
	for range 20 {
		one, err := sessionsvc.LoadClient(context.Background(), s, 0, "t", "a")
		if err != nil || one == nil {
			t.Errorf("LoadClient during commits: %+v, %v", one, err)
			break
		}
		if one.Generation != 3 && one.InboxSeq != one.Generation {
			t.Errorf("LoadClient during commits: generation %d with inbox sequence %d, a half-written session", one.Generation, one.InboxSeq)
		}
	}
	wg.Wait()
}
