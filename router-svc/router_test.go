package routersvc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/compose/store/pebblestore"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/internal/tracectx"
	"github.com/shoal-mqtt/shoal/kafka"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/router-svc/storetest"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// e2eTimeout bounds every wait of the end-to-end test.
const e2eTimeout = 30 * time.Second

// testLog writes warnings and errors to t.Log while the test runs.
func testLog(t *testing.T) *slog.Logger {
	w := &logWriter{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type logWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

// backbone is the embedded Kafka and the Pebble store of a test.
type backbone struct {
	t      *testing.T
	client *kafka.Client
	db     *pebblestore.DB
	parts  int32
	traced atomic.Int64 // deliveries read that continue testTraceparent
}

// testTraceparent is the trace context of every publish the test writes.
const testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func newBackbone(t *testing.T) *backbone {
	dir := t.TempDir()
	log := testLog(t)
	// The fixtures' events carry t0 (2023), which the topics'
	// retention.ms (7 days) no longer keeps: a retention check between a
	// produce and the router's fetch would delete them (the router then
	// starts at the log's new start and never sees them). This backbone
	// applies no retention within a test.
	emb, err := kafka.StartEmbedded(kafka.EmbeddedConfig{Dir: filepath.Join(dir, "kafka"), RetentionCheck: time.Hour}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emb.Close() })
	cat := kafka.DefaultCatalogue()
	for _, s := range []*kafka.TopicSpec{&cat.Messages, &cat.Sessions, &cat.Presence, &cat.Deliveries} {
		s.Partitions = 4
	}
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	client, err := kafka.NewClient(ctx, emb.ClientConfig(kafka.Config{Catalogue: cat}), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	if err := client.EnsureTopics(ctx); err != nil {
		t.Fatal(err)
	}
	db, err := pebblestore.Open(filepath.Join(dir, "views"), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return &backbone{t: t, client: client, db: db, parts: 4}
}

// produce writes envs to shoal.messages one at a time, each where
// docs/router.md ("One shard per partition") puts it (a publish or a concrete filter in the partition
// of its key tenant/topic, a wildcard filter in every partition), and
// records in last the last offset written to each partition.
func (b *backbone) produce(last map[int32]int64, envs ...*eventspb.Envelope) {
	b.t.Helper()
	for _, env := range envs {
		var name string
		var parts []int32
		switch ev := env.Event.(type) {
		case *eventspb.Envelope_Publish:
			name = ev.Publish.Message.Topic
		case *eventspb.Envelope_SubscriptionChange:
			name = ev.SubscriptionChange.Filter
		}
		key := []byte(env.Tenant + "/" + name)
		if name == "" || strings.ContainsAny(name, "+#") {
			for p := range b.parts {
				parts = append(parts, p)
			}
		} else {
			parts = []int32{kafka.PartitionByKey}
		}
		for _, p := range parts {
			rec := kafka.NewRecord(kafka.TopicMessages, key, p, env)
			if env.GetPublish() != nil {
				rec.Headers = append(rec.Headers, kafka.Header{Key: kafka.HeaderTraceparent, Value: []byte(testTraceparent)})
			}
			if err := b.client.ProduceSync(b.t.Context(), rec); err != nil {
				b.t.Fatal(err)
			}
			if p == kafka.PartitionByKey && rec.Partition != kafka.PartitionForKey(key, b.parts) {
				b.t.Fatalf("%s went to partition %d", key, rec.Partition)
			}
			last[rec.Partition] = rec.Offset
		}
	}
}

func (b *backbone) presence(tenant, client string, p *eventspb.Presence) {
	b.t.Helper()
	env := &eventspb.Envelope{Tenant: tenant, ClientId: client, Event: &eventspb.Envelope_Presence{Presence: p}}
	if err := b.client.ProduceSync(b.t.Context(), kafka.NewRecord(kafka.TopicPresence, []byte(tenant+"/"+client), kafka.PartitionByKey, env)); err != nil {
		b.t.Fatal(err)
	}
}

// runRouter starts a router; the returned function stops it and checks
// that Run returned nil.
func (b *backbone) runRouter(cfg routersvc.Config) (*routersvc.Router, func()) {
	b.t.Helper()
	rr := b.runRouterWith(cfg, b.db)
	return rr.Router, func() {
		b.t.Helper()
		if err := rr.stop(); err != nil {
			b.t.Errorf("Run: %v", err)
		}
	}
}

// runningRouter is a router whose Run is running, or has returned.
type runningRouter struct {
	*routersvc.Router
	cancel context.CancelFunc
	done   chan struct{} // closed when Run has returned
	err    error         // Run's result, set before done is closed
}

// stop stops the router and returns Run's result.
func (rr *runningRouter) stop() error {
	rr.cancel()
	<-rr.done
	return rr.err
}

// runRouterWith starts a router on store and waits until it is ready; it
// is stopped when the test ends, before the store is closed.
func (b *backbone) runRouterWith(cfg routersvc.Config, store routersvc.Store) *runningRouter {
	b.t.Helper()
	r, err := routersvc.New(cfg, b.client, store, testLog(b.t), func() time.Time { return t0 })
	if err != nil {
		b.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.t.Context())
	rr := &runningRouter{Router: r, cancel: cancel, done: make(chan struct{})}
	go func() { rr.err = r.Run(ctx); close(rr.done) }()
	b.t.Cleanup(func() { _ = rr.stop() }) // on a failure too
	eventually.True(b.t, e2eTimeout, "router ready", func() bool {
		if r.Ready() {
			return true
		}
		select {
		case <-rr.done:
			b.t.Fatalf("router stopped before it was ready: %v", rr.err)
		default:
		}
		return false
	})
	return rr
}

// deliveries reads shoal.deliveries from the offsets in from until n
// deliveries have arrived and then for quiet longer, and returns them with
// the next offsets.
func (b *backbone) deliveries(from map[int32]int64, n int, quiet time.Duration) ([]dlv, map[int32]int64) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.t.Context(), e2eTimeout)
	defer cancel()
	var (
		mu   sync.Mutex
		got  []dlv
		next = map[int32]int64{}
	)
	for p, o := range from {
		next[p] = o
	}
	full := make(chan struct{})
	parts := make([]int32, b.parts)
	for i := range parts {
		parts[i] = int32(i)
	}
	errc := make(chan error, 1)
	go func() {
		errc <- b.client.Consume(ctx, kafka.ConsumeConfig{
			Topic:      kafka.TopicDeliveries,
			Partitions: parts,
			Start:      func(p int32) int64 { return from[p] },
		}, func(_ context.Context, batch kafka.Batch) error {
			mu.Lock()
			defer mu.Unlock()
			for _, rec := range batch.Records {
				env := &eventspb.Envelope{}
				if err := kafka.DecodeEnvelope(rec, env); err != nil {
					return err
				}
				d := env.GetDelivery()
				if d == nil {
					return errors.New("not a delivery")
				}
				if src := d.GetSource(); src == nil || src.Partition < 0 || src.Partition >= b.parts {
					return fmt.Errorf("delivery without a valid source record: %v", src)
				}
				// A delivery of a live publish continues its trace; a
				// retained message sent for a subscription has none.
				if tp := kafka.Traceparent(rec); tp != "" {
					if tracectx.TraceID([]byte(tp)) != tracectx.TraceID([]byte(testTraceparent)) || tp[36:52] == testTraceparent[36:52] {
						return fmt.Errorf("delivery traceparent %q does not continue %q", tp, testTraceparent)
					}
					b.traced.Add(1)
				}
				x := dlv{Slot: rec.Partition, Tenant: env.Tenant, Topic: d.Message.GetTopic(), Payload: string(d.Message.GetPayload())}
				for _, tg := range d.Targets {
					ids := tg.SubscriptionIds
					if len(ids) == 0 {
						ids = nil
					}
					x.Targets = append(x.Targets, tgt{Client: tg.ClientId, Conn: tg.Connection, QoS: tg.Qos, Retain: tg.Retain, IDs: ids})
				}
				got = append(got, x)
				next[rec.Partition] = rec.Offset + 1
				if len(got) == n {
					close(full)
				}
			}
			return nil
		})
	}()
	select {
	case <-full:
		time.Sleep(quiet) // a quiet period: nothing tells that no more deliveries come, and one more would be too many
	case <-ctx.Done():
	}
	cancel()
	if err := <-errc; err != nil {
		b.t.Fatalf("consume deliveries: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return sortDeliveries(got), next
}

// waitStored polls the store until every partition's offset is the one in
// want (the last offset written there).
func (b *backbone) waitStored(want map[int32]int64) {
	b.t.Helper()
	eventually.OK(b.t, e2eTimeout, func() string {
		for p := range b.parts {
			w, ok := want[p]
			if !ok {
				w = -1
			}
			snap, err := storetest.Load(b.t.Context(), b.db, p)
			if err != nil {
				b.t.Fatal(err)
			}
			if snap.Offset != w {
				return fmt.Sprintf("partition %d: stored offset %d, want %d", p, snap.Offset, w)
			}
		}
		return ""
	})
}

func e2eConfig(group string) routersvc.Config {
	cfg := routersvc.DefaultConfig()
	cfg.Group = group
	cfg.PresenceTimeout = 10 * time.Second
	cfg.RetryBackoff = 10 * time.Millisecond
	return cfg
}

// TestRouterEndToEnd runs the router against the embedded backbone and
// the Pebble store: subscription changes and publishes in, deliveries out,
// then a restart (in consumer group mode) that keeps the state and resumes
// after the stored offsets.
func TestRouterEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end with the embedded backbone: skipped with -short")
	}
	b := newBackbone(t)
	last := map[int32]int64{}

	// c9 is offline before the router starts: read from shoal.presence.
	b.presence("t", "c9", &eventspb.Presence{Online: false, Route: &eventspb.Route{Slot: 3, Connection: 99, Generation: 5}})
	b.produce(last,
		add("t", "c1", "sensors/+/temp", qos(1), id(11), slot(0)),
		add("t", "c2", "sensors/1/temp", slot(1)),
		add("u", "c3", "#", slot(2)),
		add("t", "c9", "sensors/#", gen(5), slot(3)),
		pub("t", "pub", "sensors/1/temp"),
		pub("t", "pub", "sensors/2/temp", retain(), payload("19"), pqos(1)),
		add("t", "c4", "sensors/#", slot(3)),
		pub("u", "pub", "x"),
		pub("t", "pub", "other"),
	)
	r, stop := b.runRouter(e2eConfig(""))
	got, next := b.deliveries(map[int32]int64{}, 5, 300*time.Millisecond)
	diffDeliveries(t, "first run", []dlv{
		{Slot: 0, Tenant: "t", Topic: "sensors/1/temp", Payload: "m:sensors/1/temp", Targets: []tgt{T("c1", 1, false, 11)}},
		{Slot: 1, Tenant: "t", Topic: "sensors/1/temp", Payload: "m:sensors/1/temp", Targets: []tgt{T("c2", 2, false)}},
		P(0, "t", "sensors/2/temp", "19", T("c1", 1, false, 11)),
		P(3, "t", "sensors/2/temp", "19", T("c4", 1, true)),
		D(2, "u", "x", T("c3", 2, false)),
	}, got)

	// A presence read while running: c2 goes offline.
	b.presence("t", "c2", &eventspb.Presence{Online: false, Route: route("c2")})
	eventually.True(t, e2eTimeout, "the presence of c2 read", func() bool {
		p, ok := r.Presence().Lookup("t", "c2")
		return ok && !p.Online
	})
	b.produce(last, pub("t", "pub", "sensors/1/temp", payload("22")))
	got, next = b.deliveries(next, 2, 300*time.Millisecond)
	diffDeliveries(t, "after c2 went offline", []dlv{
		P(0, "t", "sensors/1/temp", "22", T("c1", 1, false, 11)),
		P(3, "t", "sensors/1/temp", "22", T("c4", 2, false)),
	}, got)

	// A tombstone forgets c2's presence: its subscription's route counts.
	if err := b.client.ProduceSync(t.Context(), &kafka.Record{Topic: kafka.TopicPresence, Key: []byte("t/c2"), Partition: kafka.PartitionByKey}); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, e2eTimeout, "the tombstone of c2 read", func() bool {
		_, ok := r.Presence().Lookup("t", "c2")
		return !ok
	})
	b.produce(last, pub("t", "pub", "sensors/1/temp", payload("22.5")))
	got, next = b.deliveries(next, 3, 300*time.Millisecond)
	diffDeliveries(t, "after the tombstone", []dlv{
		P(0, "t", "sensors/1/temp", "22.5", T("c1", 1, false, 11)),
		P(1, "t", "sensors/1/temp", "22.5", T("c2", 2, false)),
		P(3, "t", "sensors/1/temp", "22.5", T("c4", 2, false)),
	}, got)
	// Publishes change no state: their offsets are stored within
	// router.offset_interval, and at the latest when the router stops.
	stop()
	b.waitStored(last)

	// Records written while no router runs, then a restart in group mode
	// on the same store: the state is intact and nothing before the stored
	// offsets is delivered again.
	b.produce(last,
		pub("t", "pub", "sensors/3/temp", payload("23")),
		add("t", "c5", "sensors/2/temp", slot(1), qos(2)),
		remove("t", "c4", "sensors/#"),
		pub("t", "pub", "sensors/2/temp", payload("24")),
	)
	// c2 goes offline again for the second run.
	b.presence("t", "c2", &eventspb.Presence{Online: false, Route: route("c2")})
	cfg := e2eConfig("routers")
	cfg.OffsetInterval = 0 // every poll's offset is stored
	_, stop = b.runRouter(cfg)
	got, _ = b.deliveries(next, 5, 500*time.Millisecond)
	diffDeliveries(t, "after the restart", []dlv{
		P(0, "t", "sensors/3/temp", "23", T("c1", 1, false, 11)),
		P(3, "t", "sensors/3/temp", "23", T("c4", 2, false)),
		P(1, "t", "sensors/2/temp", "19", T("c5", 1, true)),
		P(0, "t", "sensors/2/temp", "24", T("c1", 1, false, 11)),
		P(1, "t", "sensors/2/temp", "24", T("c5", 2, false)),
	}, got)
	b.waitStored(last)
	stop()
	if b.traced.Load() == 0 {
		t.Error("no delivery carried the publishes' trace context")
	}
}

// TestRouterReadyAfterPresenceRead checks the readiness rule: a router is
// ready only once it has read shoal.presence up to the end offsets it had
// at start, so every presence written before it started is known.
func TestRouterReadyAfterPresenceRead(t *testing.T) {
	b := newBackbone(t)
	const n = 3000
	recs := make([]*kafka.Record, 0, n)
	for i := range n {
		client := fmt.Sprintf("c%d", i)
		env := &eventspb.Envelope{Tenant: "t", ClientId: client, Event: &eventspb.Envelope_Presence{
			Presence: &eventspb.Presence{Online: i%2 == 0, Route: &eventspb.Route{Slot: 1, Connection: uint64(i + 1), Generation: 1}},
		}}
		recs = append(recs, kafka.NewRecord(kafka.TopicPresence, []byte("t/"+client), kafka.PartitionByKey, env))
	}
	if err := b.client.ProduceSync(t.Context(), recs...); err != nil {
		t.Fatal(err)
	}
	r, stop := b.runRouter(e2eConfig(""))
	defer stop()
	if got := r.Presence().Len(); got != n {
		t.Fatalf("ready with %d presences read, want all %d", got, n)
	}
	if p, ok := r.Presence().Lookup("t", fmt.Sprintf("c%d", n-1)); !ok || p.Online || p.Route.GetConnection() != n {
		t.Fatalf("presence of the last client = %v, %v", p, ok)
	}
}
