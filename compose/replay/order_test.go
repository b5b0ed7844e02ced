package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// newTestLog starts an embedded backbone of four partitions a topic,
// which applies retention every retentionCheck, and returns a client of
// it with the topics created.
func newTestLog(t *testing.T, retentionCheck time.Duration) *kafka.Client {
	t.Helper()
	e, err := kafka.StartEmbedded(kafka.EmbeddedConfig{Dir: t.TempDir(), RetentionCheck: retentionCheck}, testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	cat := kafka.DefaultCatalogue()
	for _, s := range []*kafka.TopicSpec{&cat.Messages, &cat.Sessions, &cat.Presence, &cat.Deliveries, &cat.Quotas} {
		s.Partitions = 4
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := kafka.NewClient(ctx, e.ClientConfig(kafka.Config{Catalogue: cat}), testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.EnsureTopics(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// rec is a record to write: an event of time at in one partition.
type rec struct {
	topic     string
	partition int32
	at        time.Time
	seq       uint64 // the message id's sequence (epoch 1), on a publish
}

// produce writes the records, each a publish on shoal.messages or a
// connect on shoal.sessions, in their order.
func produce(t *testing.T, c *kafka.Client, recs []rec) {
	t.Helper()
	const batch = 500
	for len(recs) > 0 {
		n := min(batch, len(recs))
		var rs []*kafka.Record
		for _, r := range recs[:n] {
			env := &eventspb.Envelope{Tenant: "acme", ClientId: "acme-c", TimestampUs: r.at.UnixMicro()}
			key := kafka.Key("acme", "acme-c")
			if r.topic == kafka.TopicMessages {
				env.MessageId = &eventspb.MessageID{GatewayEpoch: 1, Seq: r.seq}
				env.Event = &eventspb.Envelope_Publish{Publish: &eventspb.Publish{Message: &eventspb.Message{Topic: "t/x", Payload: []byte("p")}}}
				key = kafka.Key("acme", "t/x")
			} else {
				env.Event = &eventspb.Envelope_Connect{Connect: &eventspb.Connect{}}
			}
			rs = append(rs, kafka.NewRecord(r.topic, key, r.partition, env))
		}
		if err := c.ProduceSync(t.Context(), rs...); err != nil {
			t.Fatal(err)
		}
		recs = recs[n:]
	}
}

// where names a line by its place in the log.
func where(l line) string { return fmt.Sprintf("%s:%d/%d", l.KafkaTopic, l.Partition, l.Offset) }

// TestRunTimeOrder: events written to several partitions of two topics
// with interleaved times come out in time order, ties in topic, then
// partition order; a partition whose events all come after another's
// many events waits its turn (more of them than the merge buffers).
func TestRunTimeOrder(t *testing.T) {
	c := newTestLog(t, time.Hour)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	ms := func(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }
	var recs []rec
	// Interleaved: event i in partition i*3%4, alternating topics.
	for i := range 40 {
		topic := kafka.TopicMessages
		if i%2 == 1 {
			topic = kafka.TopicSessions
		}
		recs = append(recs, rec{topic: topic, partition: int32(i * 3 % 4), at: ms(i), seq: uint64(i + 1)})
	}
	// Ties: the same time in sessions/3, messages/2 and messages/1.
	recs = append(recs,
		rec{topic: kafka.TopicSessions, partition: 3, at: ms(100)},
		rec{topic: kafka.TopicMessages, partition: 2, at: ms(100), seq: 101},
		rec{topic: kafka.TopicMessages, partition: 1, at: ms(100), seq: 102})
	// Partition 0 gets many events later than many of partition 1's,
	// written first.
	const many = 4 * mergeBuffer
	for i := range many {
		recs = append(recs, rec{topic: kafka.TopicMessages, partition: 0, at: ms(10_000 + i), seq: uint64(1000 + i)})
	}
	for i := range many {
		recs = append(recs, rec{topic: kafka.TopicMessages, partition: 1, at: ms(1000 + i), seq: uint64(10_000 + i)})
	}
	produce(t, c, recs)

	o := DefaultOptions()
	o.Topics = []string{"messages", "sessions"}
	lines, _, st, err := read(t, c, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != len(recs) || st.Selected != int64(len(recs)) {
		t.Fatalf("%d lines (%d selected), want %d", len(lines), st.Selected, len(recs))
	}
	for i := 1; i < len(lines); i++ {
		if lines[i].Time.Before(lines[i-1].Time) {
			t.Fatalf("line %d (%s) of %s comes after line %d (%s) of %s", i, where(lines[i]), lines[i].Time.Format(time.RFC3339Nano),
				i-1, where(lines[i-1]), lines[i-1].Time.Format(time.RFC3339Nano))
		}
	}
	var tied []string
	for _, l := range lines {
		if l.Time.Equal(ms(100)) {
			tied = append(tied, where(l))
		}
	}
	if want := []string{"shoal.messages:1/0", "shoal.messages:2/10", "shoal.sessions:3/10"}; !slices.Equal(tied, want) {
		t.Errorf("events of the same time in the order %v, want %v", tied, want)
	}
	// A limit takes the earliest events.
	o.Limit = 3
	first, _, _, err := read(t, c, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 3 || !first[0].Time.Equal(ms(0)) || !first[2].Time.Equal(ms(2)) {
		t.Errorf("with --limit 3: %+v", first)
	}

	// Following: what the log held comes out in the same order, and then
	// a new event, though the other partitions have nothing new.
	o = DefaultOptions()
	o.Topics, o.Follow = []string{"messages", "sessions"}, true
	var out testlog.Buffer
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, c, o, NewJSONSink(&out), nil)
		done <- err
	}()
	waitLines := func(n int) []line {
		t.Helper()
		var got []line
		eventually.OK(t, 10*time.Second, func() string {
			got = got[:0]
			for _, s := range strings.SplitAfter(out.String(), "\n") {
				var l line
				if json.Unmarshal([]byte(s), &l) == nil {
					got = append(got, l)
				}
			}
			if len(got) < n {
				return fmt.Sprintf("following: %d lines, want %d", len(got), n)
			}
			return ""
		})
		return got
	}
	followed := waitLines(len(lines))
	for i := range lines {
		if where(followed[i]) != where(lines[i]) {
			t.Fatalf("following, line %d is %s, was %s without --follow", i, where(followed[i]), where(lines[i]))
		}
	}
	produce(t, c, []rec{{topic: kafka.TopicSessions, partition: 2, at: time.Now()}})
	if l := waitLines(len(lines) + 1)[len(lines)]; where(l) != "shoal.sessions:2/0" {
		t.Errorf("the new event: %s, want shoal.sessions:2/0", where(l))
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("the follow ended with %v", err)
	}
}
