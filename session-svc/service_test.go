package sessionsvc_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/shoal-mqtt/shoal/compose/store/pebblestore"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
)

// e2eTimeout bounds every wait of the end-to-end test.
const e2eTimeout = 20 * time.Second

// Partition counts of the test catalogue (small, so that it starts fast).
const (
	e2eMessages   = 3
	e2eSessions   = 2
	e2ePresence   = 2
	e2eDeliveries = 4
)

// testLogger writes to t.Log until the test ends.
func testLogger(t *testing.T) *slog.Logger { return testlog.New(t) }

type backbone struct {
	client *kafka.Client
	store  *pebblestore.DB
}

func startBackbone(t *testing.T) backbone {
	t.Helper()
	log := testLogger(t)
	// The fixtures' events carry e2eNow, a fixed day that the topics'
	// retention.ms (7 days) stops keeping a week later: a retention check
	// would then delete them between a produce and the service's fetch.
	// This backbone applies no retention within a test.
	e, err := kafka.StartEmbedded(kafka.EmbeddedConfig{Dir: t.TempDir(), RetentionCheck: time.Hour}, log)
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	cat := kafka.DefaultCatalogue()
	cat.Messages.Partitions = e2eMessages
	cat.Sessions.Partitions = e2eSessions
	cat.Presence.Partitions = e2ePresence
	cat.Deliveries.Partitions = e2eDeliveries
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	client, err := kafka.NewClient(ctx, e.ClientConfig(kafka.Config{Catalogue: cat}), log)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(client.Close)
	if err := client.EnsureTopics(ctx); err != nil {
		t.Fatalf("EnsureTopics: %v", err)
	}
	store, err := pebblestore.Open(t.TempDir(), log)
	if err != nil {
		t.Fatalf("pebblestore.Open: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return backbone{client: client, store: store}
}

var e2eNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// runService runs a session service until the returned stop is called.
func (b backbone) runService(t *testing.T) (*sessionsvc.Service, func()) {
	t.Helper()
	return b.runServiceWith(t, sessionsvc.DefaultConfig(), b.store)
}

func (b backbone) runServiceWith(t *testing.T, cfg sessionsvc.Config, store sessionsvc.Store) (*sessionsvc.Service, func()) {
	t.Helper()
	return b.runServiceAt(t, cfg, store, func() time.Time { return e2eNow })
}

// runServiceAt runs a session service with its clock, made with opts.
func (b backbone) runServiceAt(t *testing.T, cfg sessionsvc.Config, store sessionsvc.Store, clock func() time.Time,
	opts ...sessionsvc.Option) (*sessionsvc.Service, func()) {
	t.Helper()
	svc, err := sessionsvc.New(cfg, b.client, store, testLogger(t), clock, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(e2eTimeout):
			t.Error("Run did not return after its context ended")
		}
	}
	t.Cleanup(stop)
	eventually.True(t, e2eTimeout, "the service to be ready", svc.Ready)
	return svc, stop
}

// gateway describes a test gateway connection.
type gw struct {
	name       string
	slot       int32
	connection uint64
	request    uint64
}

const tenant, client = "acme", "acme-dev1"

func envelope(g gw) *eventspb.Envelope {
	return &eventspb.Envelope{Tenant: tenant, ClientId: client, Gateway: g.name, TimestampUs: e2eNow.UnixMicro()}
}

func connectEnv(g gw, expiry uint32, will *eventspb.Will) *eventspb.Envelope {
	env := envelope(g)
	env.Event = &eventspb.Envelope_Connect{Connect: &eventspb.Connect{
		Route:      &eventspb.Route{Slot: g.slot, Connection: g.connection},
		CleanStart: true, SessionExpiryS: expiry, Will: will, ProtocolVersion: 5, RequestId: g.request,
	}}
	return env
}

func disconnectEnv(g gw, gen uint64, publishWill bool) *eventspb.Envelope {
	env := envelope(g)
	env.Event = &eventspb.Envelope_Disconnect{Disconnect: &eventspb.Disconnect{
		Connection: g.connection, Generation: gen, PublishWill: publishWill,
	}}
	return env
}

func (b backbone) produce(t *testing.T, envs ...*eventspb.Envelope) {
	t.Helper()
	var rs []*kafka.Record
	for _, env := range envs {
		rs = append(rs, kafka.NewRecord(kafka.TopicSessions, []byte(env.Tenant+"/"+env.ClientId), kafka.PartitionByKey, env))
	}
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	if err := b.client.ProduceSync(ctx, rs...); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// got is one record read back: where it was and what it said.
type got struct {
	Partition int32
	Env       *eventspb.Envelope
}

// read reads topic from offset from (per partition) until want records
// arrived, then a little longer to catch any extra record, and returns
// them in (partition, offset) order.
func (b backbone) read(t *testing.T, topic string, from map[int32]int64, want int) []got {
	t.Helper()
	n := b.client.Partitions(topic)
	parts := make([]int32, n)
	for i := range parts {
		parts[i] = int32(i)
	}
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	var (
		mu   sync.Mutex
		recs []*kafka.Record
	)
	enough := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- b.client.Consume(ctx, kafka.ConsumeConfig{
			Topic: topic, Partitions: parts,
			Start: func(p int32) int64 { return from[p] },
		}, func(_ context.Context, batch kafka.Batch) error {
			mu.Lock()
			defer mu.Unlock()
			recs = append(recs, batch.Records...)
			if len(recs) >= want {
				select {
				case <-enough:
				default:
					close(enough)
				}
			}
			return nil
		})
	}()
	select {
	case <-enough:
		time.Sleep(200 * time.Millisecond) // a quiet period: nothing tells that no extra record comes (on the bubble's clock in a bubble)
	case <-ctx.Done():
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("consume %s: %v", topic, err)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(recs, func(a, b *kafka.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	var out []got
	for _, r := range recs {
		env := &eventspb.Envelope{}
		if err := env.UnmarshalVT(r.Value); err != nil {
			t.Fatalf("decode %s/%d@%d: %v", topic, r.Partition, r.Offset, err)
		}
		if typ := kafka.EventType(r); typ != kafka.EnvelopeType(env) {
			t.Errorf("%s/%d@%d: type header %q, event %q", topic, r.Partition, r.Offset, typ, kafka.EnvelopeType(env))
		}
		broadcast := topic == kafka.TopicMessages && env.GetSubscriptionChange() != nil
		if topic != kafka.TopicDeliveries && !broadcast && kafka.PartitionForKey(r.Key, n) != r.Partition {
			t.Errorf("%s/%d@%d: key %q belongs to partition %d", topic, r.Partition, r.Offset, r.Key, kafka.PartitionForKey(r.Key, n))
		}
		if topic == kafka.TopicPresence && string(r.Key) != tenant+"/"+client {
			t.Errorf("presence key %q", r.Key)
		}
		if topic == kafka.TopicMessages && broadcast && string(r.Key) != tenant+"/"+client {
			t.Errorf("removal key %q", r.Key)
		}
		out = append(out, got{r.Partition, env})
	}
	if len(out) != want {
		t.Errorf("%s: %d records, want %d", topic, len(out), want)
	}
	return out
}

func check(t *testing.T, what string, got, want []got) {
	t.Helper()
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

// out is an expected output envelope.
func out(gateway string, ev *eventspb.Envelope) *eventspb.Envelope {
	ev.Tenant, ev.ClientId, ev.Gateway, ev.TimestampUs = tenant, client, gateway, e2eNow.UnixMicro()
	return ev
}

func result(g gw, gen uint64) got {
	return got{g.slot, out(g.name, &eventspb.Envelope{Event: &eventspb.Envelope_ConnectResult{
		ConnectResult: &eventspb.ConnectResult{RequestId: g.request, Connection: g.connection, Generation: gen, SessionGeneration: gen},
	}})}
}

func presence(p int32, g gw, online bool, gen uint64) got {
	return got{p, out(g.name, &eventspb.Envelope{Event: &eventspb.Envelope_Presence{Presence: &eventspb.Presence{
		Online: online, SessionGeneration: gen,
		Route: &eventspb.Route{Slot: g.slot, Connection: g.connection, Generation: gen},
	}}})}
}

func removeAll(p int32, g gw, gen uint64) got {
	return got{p, out(g.name, &eventspb.Envelope{Event: &eventspb.Envelope_SubscriptionChange{
		SubscriptionChange: &eventspb.SubscriptionChange{
			Op:    eventspb.SubscriptionChange_OP_REMOVE_ALL,
			Route: &eventspb.Route{Slot: g.slot, Connection: g.connection, Generation: gen},
		},
	}})}
}

func TestServiceEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded Kafka")
	}
	start := time.Now()
	b := startBackbone(t)
	presencePart := kafka.PartitionForKey([]byte(tenant+"/"+client), e2ePresence)
	a1 := gw{name: "gw-1", slot: 1, connection: 10, request: 100}
	a2 := gw{name: "gw-2", slot: 2, connection: 20, request: 200}
	a3 := gw{name: "gw-3", slot: 3, connection: 30, request: 300}
	will := &eventspb.Will{Message: &eventspb.Message{Topic: "dev1/status", Payload: []byte("offline"), Qos: 1}}

	// Two connects of one client: the second takes the session over, and
	// the end of the first connection (naming no partitions) brings the
	// removal of its session from every partition.
	b.produce(t, connectEnv(a1, 0, nil), connectEnv(a2, 0, will), disconnectEnv(a1, 1, true))
	svc, stop := b.runService(t)
	eventually.True(t, e2eTimeout, "the takeover", func() bool {
		s, ok := svc.Snapshot(tenant, client)
		return ok && s.Generation == 2 && s.PendingRemoval == nil
	})

	check(t, "deliveries", b.read(t, kafka.TopicDeliveries, nil, 3), []got{
		result(a1, 1),
		{a1.slot, out(a1.name, &eventspb.Envelope{Event: &eventspb.Envelope_Kick{Kick: &eventspb.Kick{
			Connection: a1.connection, ReasonCode: uint32(packet.CodeSessionTakenOver),
		}}})},
		result(a2, 2),
	})
	check(t, "presence", b.read(t, kafka.TopicPresence, nil, 2), []got{
		presence(presencePart, a1, true, 1),
		presence(presencePart, a2, true, 2),
	})
	var removals []got
	for p := range int32(e2eMessages) {
		removals = append(removals, removeAll(p, a1, 1))
	}
	check(t, "messages", b.read(t, kafka.TopicMessages, nil, e2eMessages), removals)

	// A restarted service resumes from its stored offsets and generations:
	// nothing is answered twice, and the next connection is number 3.
	stop()
	b.produce(t, disconnectEnv(a2, 2, true), connectEnv(a3, 0, nil))
	svc, _ = b.runService(t)
	eventually.True(t, e2eTimeout, "the reconnect", func() bool {
		s, ok := svc.Snapshot(tenant, client)
		return ok && s.Generation == 3
	})
	check(t, "deliveries after restart", b.read(t, kafka.TopicDeliveries, map[int32]int64{1: 2, 2: 1}, 1), []got{
		result(a3, 3),
	})
	check(t, "presence after restart", b.read(t, kafka.TopicPresence, map[int32]int64{presencePart: 2}, 2), []got{
		presence(presencePart, a2, false, 2),
		presence(presencePart, a3, true, 3),
	})
	willPart := kafka.PartitionForKey([]byte(tenant+"/dev1/status"), e2eMessages)
	from := map[int32]int64{}
	var msgs []got
	for p := range int32(e2eMessages) {
		from[p] = 1
		msgs = append(msgs, removeAll(p, a2, 2))
		if p == willPart {
			w := out(a2.name, &eventspb.Envelope{Event: &eventspb.Envelope_Publish{Publish: &eventspb.Publish{
				Message: will.GetMessage(), Connection: a2.connection,
			}}})
			msgs = append(msgs, got{p, w})
		}
	}
	gotMsgs := b.read(t, kafka.TopicMessages, from, e2eMessages+1)
	// The will's message id: the service's random epoch, sequence 1.
	for _, g := range gotMsgs {
		if pub := g.Env.GetPublish(); pub != nil {
			if id := g.Env.GetMessageId(); id.GetGatewayEpoch() == 0 || id.GetSeq() != 1 {
				t.Errorf("will message id %v, want a non-zero epoch and seq 1", id)
			}
			g.Env.MessageId = nil
		}
	}
	check(t, "messages after restart", gotMsgs, msgs)

	s, _ := svc.Snapshot(tenant, client)
	if !s.Active || !s.Online || s.Gateway != a3.name || s.Route.GetConnection() != a3.connection {
		t.Errorf("session %+v", s)
	}
	t.Logf("end to end in %s", time.Since(start).Round(time.Millisecond))
}

// answerLog is a sessionsvc.Answers that notes, with each answer, what the
// log held at that moment: the end offsets of the topics the session
// service writes.
type answerLog struct {
	t      *testing.T
	client *kafka.Client
	mu     sync.Mutex
	seen   []answerSeen
}

type answerSeen struct {
	slot int32
	res  *eventspb.ConnectResult
	ends map[string]map[int32]int64 // topic → partition → end offset
}

func (a *answerLog) Answer(slot int32, res *eventspb.ConnectResult) {
	seen := answerSeen{slot: slot, res: res, ends: make(map[string]map[int32]int64)}
	for _, topic := range []string{kafka.TopicPresence, kafka.TopicMessages, kafka.TopicDeliveries} {
		ends, err := a.client.EndOffsets(a.t.Context(), topic)
		if err != nil {
			a.t.Errorf("end offsets of %s: %v", topic, err)
		}
		seen.ends[topic] = ends
	}
	a.mu.Lock()
	a.seen = append(a.seen, seen)
	a.mu.Unlock()
}

func (a *answerLog) answers() []answerSeen {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seen)
}

// TestServiceAnswersAfterPresence: with WithAnswers (the gateway of
// `shoal all`) the service gives each answer to a Connect once what the
// answer must follow is in the log (invariant 4: the takeover's kick and
// any subscription removals, then the presence), before the answer itself
// is produced; and it still produces the answer.
func TestServiceAnswersAfterPresence(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded Kafka")
	}
	b := startBackbone(t)
	presencePart := kafka.PartitionForKey([]byte(tenant+"/"+client), e2ePresence)
	a1 := gw{name: "gw-1", slot: 1, connection: 10, request: 100}
	a2 := gw{name: "gw-2", slot: 2, connection: 20, request: 200}
	answers := &answerLog{t: t, client: b.client}
	// The second connect takes the first one's session over.
	b.produce(t, connectEnv(a1, 0, nil), connectEnv(a2, 0, nil))
	b.runServiceAt(t, sessionsvc.DefaultConfig(), b.store, func() time.Time { return e2eNow },
		sessionsvc.WithAnswers(answers))
	eventually.True(t, e2eTimeout, "two answers", func() bool { return len(answers.answers()) == 2 })

	seen := answers.answers()
	for i, want := range []struct {
		g          gw
		generation uint64
		presence   int64           // records in the presence partition, its own included
		slotEnds   map[int32]int64 // records in slots, the answer's own excluded
		removals   int64           // in every partition of shoal.messages
	}{
		{a1, 1, 1, map[int32]int64{a1.slot: 0, a2.slot: 0}, 0},
		// a1's answer and the kick that ends it before a2's. The removal
		// of a1's session waits for a1's end (Session.PendingRemoval).
		{a2, 2, 2, map[int32]int64{a1.slot: 2, a2.slot: 0}, 0},
	} {
		s := seen[i]
		if s.slot != want.g.slot || s.res.GetRequestId() != want.g.request || s.res.GetConnection() != want.g.connection ||
			s.res.GetGeneration() != want.generation || s.res.GetReasonCode() != 0 {
			t.Errorf("answer %d: slot %d, %v; want slot %d, request %d, connection %d, generation %d", i, s.slot, s.res,
				want.g.slot, want.g.request, want.g.connection, want.generation)
		}
		if got := s.ends[kafka.TopicPresence][presencePart]; got != want.presence {
			t.Errorf("answer %d given with %d presence records in the log, want %d (its own durable first)", i, got, want.presence)
		}
		for slot, n := range want.slotEnds {
			if got := s.ends[kafka.TopicDeliveries][slot]; got != n {
				t.Errorf("answer %d given with %d records in slot %d, want %d", i, got, slot, n)
			}
		}
		for p := range int32(e2eMessages) {
			if got := s.ends[kafka.TopicMessages][p]; got != want.removals {
				t.Errorf("answer %d given with %d records in partition %d of shoal.messages, want %d", i, got, p, want.removals)
			}
		}
	}
	// The answers are in the log all the same.
	check(t, "deliveries", b.read(t, kafka.TopicDeliveries, nil, 3), []got{
		result(a1, 1),
		{a1.slot, out(a1.name, &eventspb.Envelope{Event: &eventspb.Envelope_Kick{Kick: &eventspb.Kick{
			Connection: a1.connection, ReasonCode: uint32(packet.CodeSessionTakenOver),
		}}})},
		result(a2, 2),
	})
}

// failingStore fails its first CommitSessions calls.
type failingStore struct {
	sessionsvc.Store
	failures atomic.Int32
}

func (f *failingStore) CommitSessions(ctx context.Context, p int32, off int64, ss []*sessionsvc.Session) error {
	if f.failures.Add(-1) >= 0 {
		return errors.New("disk on fire")
	}
	return f.Store.CommitSessions(ctx, p, off, ss)
}

// A failed batch is retried from the stored state: its outputs are
// produced again, identical (same generation), and the state is applied
// once.
func TestServiceRetriesFailedBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded Kafka")
	}
	b := startBackbone(t)
	store := &failingStore{Store: b.store}
	store.failures.Store(2)
	a1 := gw{name: "gw-1", slot: 1, connection: 10, request: 100}
	b.produce(t, connectEnv(a1, 0, nil))
	cfg := sessionsvc.DefaultConfig()
	cfg.RetryBackoff = 10 * time.Millisecond
	svc, _ := b.runServiceWith(t, cfg, store)
	eventually.True(t, e2eTimeout, "the connect to be committed", func() bool {
		s, ok := svc.Snapshot(tenant, client)
		return ok && s.Generation == 1
	})
	if n := store.failures.Load(); n >= 0 {
		t.Fatalf("%d commit failures left", n+1)
	}
	check(t, "deliveries", b.read(t, kafka.TopicDeliveries, nil, 3), []got{result(a1, 1), result(a1, 1), result(a1, 1)})
	presencePart := kafka.PartitionForKey([]byte(tenant+"/"+client), e2ePresence)
	check(t, "presence", b.read(t, kafka.TopicPresence, nil, 3), []got{
		presence(presencePart, a1, true, 1), presence(presencePart, a1, true, 1), presence(presencePart, a1, true, 1),
	})
}

// Two services in one consumer group share shoal.sessions: every connect
// is answered; when one leaves, the other takes its partitions over from
// the stored state.
func TestServiceGroupSharesPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded Kafka")
	}
	b := startBackbone(t)
	cfg := sessionsvc.DefaultConfig()
	cfg.Group = "sessions-test"
	svcA, stopA := b.runServiceWith(t, cfg, b.store)
	svcB, _ := b.runServiceWith(t, cfg, b.store)
	const n = 12
	connects := func(gen uint64) {
		var envs []*eventspb.Envelope
		for i := range n {
			env := connectEnv(gw{name: "gw-1", slot: 1, connection: gen<<8 | uint64(i), request: gen<<8 | uint64(i)}, 0, nil)
			env.ClientId = fmt.Sprintf("acme-dev%d", i)
			envs = append(envs, env)
		}
		b.produce(t, envs...)
	}
	// generation returns the generation of client i in whichever service
	// owns its partition (0 when neither has it).
	generation := func(i int, svcs ...*sessionsvc.Service) uint64 {
		for _, svc := range svcs {
			if s, ok := svc.Snapshot(tenant, fmt.Sprintf("acme-dev%d", i)); ok {
				return s.Generation
			}
		}
		return 0
	}
	connects(1)
	eventually.True(t, e2eTimeout, "every client connected once", func() bool {
		for i := range n {
			if generation(i, svcA, svcB) != 1 {
				return false
			}
		}
		return true
	})
	stopA()
	connects(2)
	eventually.True(t, e2eTimeout, "the remaining service to take every partition over", func() bool {
		for i := range n {
			if generation(i, svcB) != 2 {
				return false
			}
		}
		return true
	})
	// Each connect answered once, each first connection kicked once: the
	// leaving member handed its partitions over after its last batch was
	// committed.
	var results, kicks int
	for _, g := range b.read(t, kafka.TopicDeliveries, nil, 3*n) {
		switch {
		case g.Env.GetConnectResult() != nil:
			results++
		case g.Env.GetKick() != nil:
			kicks++
		}
	}
	if results != 2*n || kicks != n {
		t.Fatalf("%d connect results and %d kicks, want %d and %d", results, kicks, 2*n, n)
	}
}

// TestServiceWakesForDelayedWill: a delayed will is published when it is
// due, not at the next periodic SessionTick (an hour away here): the
// service writes a tick to the partition at its earliest deadline, stamped
// with the time it is due. It runs in a synctest bubble, the service's
// clock the bubble's from e2eNow on: the wake-up's timer fires on it, at
// the deadline exactly.
func TestServiceWakesForDelayedWill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded Kafka")
	}
	synctest.Test(t, testServiceWakesForDelayedWill)
}

func testServiceWakesForDelayedWill(t *testing.T) {
	b := startBackbone(t)
	start := time.Now()
	clock := func() time.Time { return e2eNow.Add(time.Since(start)).UTC() }
	cfg := sessionsvc.DefaultConfig()
	cfg.ExpiryCheck = time.Hour
	svc, _ := b.runServiceAt(t, cfg, b.store, clock)

	a1 := gw{name: "gw-1", slot: 1, connection: 10, request: 100}
	will := &eventspb.Will{Message: &eventspb.Message{Topic: "dev1/status", Payload: []byte("offline"), Qos: 1}, DelayIntervalS: 1}
	b.produce(t, connectEnv(a1, 60, will), disconnectEnv(a1, 1, true))
	eventually.True(t, e2eTimeout, "the disconnect", func() bool {
		s, ok := svc.Snapshot(tenant, client)
		return ok && !s.Online && s.WillDueAt.Equal(e2eNow.Add(time.Second))
	})

	willPart := kafka.PartitionForKey([]byte(tenant+"/dev1/status"), e2eMessages)
	msgs := b.read(t, kafka.TopicMessages, nil, 1)
	for _, g := range msgs {
		g.Env.MessageId = nil
	}
	w := out(a1.name, &eventspb.Envelope{Event: &eventspb.Envelope_Publish{Publish: &eventspb.Publish{
		Message: will.GetMessage(), Connection: a1.connection,
	}}})
	w.TimestampUs = e2eNow.Add(time.Second).UnixMicro()
	check(t, "the will", msgs, []got{{willPart, w}})
	if s, _ := svc.Snapshot(tenant, client); !s.WillDueAt.IsZero() || s.Will != nil {
		t.Errorf("the will is still pending after its publication: due %v", s.WillDueAt)
	}
}
