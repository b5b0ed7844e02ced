package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// Captured is an event kept beyond its Write: its own copy of the
// envelope.
type Captured struct {
	Event
}

// capture is a Sink that keeps copies of every event.
type capture struct{ evs []*Captured }

func (c *capture) Write(e *Event) error {
	cp := &Captured{Event: *e}
	cp.Env = e.Env.CloneVT()
	cp.Message = messageOf(cp.Env)
	c.evs = append(c.evs, cp)
	return nil
}

func (c *capture) Flush() error { return nil }

// ErrNoMessage is Trace's error when the log holds no publish of the
// message.
var ErrNoMessage = errors.New("no such message in the log")

// TrimmedError is Trace's error when the log holds no publish of the
// message and retention has deleted the oldest records of shoal.messages,
// where its publish was if it was published before them. It wraps
// ErrNoMessage.
type TrimmedError struct {
	ID *eventspb.MessageID
	// Oldest is the trimmed partition whose oldest record is the oldest,
	// Newest the one whose oldest record is the newest: retention deleted
	// what every trimmed partition held before Oldest.Time, and from
	// Newest.Time on every partition holds all it was written.
	Oldest, Newest LogStart
	// Trimmed counts the partitions retention trimmed, of Partitions.
	Trimmed, Partitions int
	// Later is the oldest publish of the message's gateway instance (its
	// epoch) the search found, at LaterTime, when it has a higher sequence
	// number than the message and none lower was found: the gateway took
	// the message in before it, so the message was published before the
	// log's start. nil when the log holds no such publish.
	Later     *eventspb.MessageID
	LaterTime time.Time
}

// LogStart is where a partition starts after retention: its start offset
// and the time of the record there.
type LogStart struct {
	Topic     string
	Partition int32
	Offset    int64
	// Time is zero when the partition holds no record: retention deleted
	// all it had.
	Time time.Time
}

func (e *TrimmedError) Error() string {
	var b strings.Builder
	id := kafka.FormatMessageID(e.ID)
	if e.Later != nil {
		fmt.Fprintf(&b, "%s: no such message in the log any more: it was published before %s (%s), the oldest message of its gateway still in the log, and the log now starts later: ",
			id, kafka.FormatMessageID(e.Later), formatTime(e.LaterTime))
	} else {
		fmt.Fprintf(&b, "%s: %s, which now starts later: ", id, ErrNoMessage)
	}
	b.WriteString(e.Oldest.String())
	if e.Newest.Partition != e.Oldest.Partition && !e.Newest.Time.Equal(e.Oldest.Time) {
		fmt.Fprintf(&b, ", and partition %d", e.Newest.Partition)
		e.Newest.where(&b)
	}
	fmt.Fprintf(&b, ": the records before are past the topic's retention (in %d of its %d partitions)", e.Trimmed, e.Partitions)
	if e.Later == nil {
		b.WriteString("; a message published before then may have been one of them")
	}
	return b.String()
}

func (e *TrimmedError) Unwrap() error { return ErrNoMessage }

// String says where the partition starts: "shoal.messages partition 2
// starts at offset 1234, a record of 2026-11-25T10:00:00.000Z".
func (s LogStart) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s partition %d", s.Topic, s.Partition)
	s.where(&b)
	return b.String()
}

func (s LogStart) where(b *strings.Builder) {
	fmt.Fprintf(b, " starts at offset %d", s.Offset)
	if s.Time.IsZero() {
		b.WriteString(" and holds no record")
	} else {
		fmt.Fprintf(b, ", a record of %s", formatTime(s.Time))
	}
}

func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// gatewayPublishes keeps, while Trace searches, the publish of the
// traced message's gateway instance with the lowest sequence number.
type gatewayPublishes struct {
	id       *eventspb.MessageID
	messages string // shoal.messages's name

	mu     sync.Mutex
	oldest *eventspb.MessageID
	at     time.Time
}

func (g *gatewayPublishes) observe(r *kafka.Record, env *eventspb.Envelope) {
	id := env.GetMessageId()
	if r.Topic != g.messages || env.GetPublish() == nil || id.GetGatewayEpoch() != g.id.GatewayEpoch {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.oldest == nil || id.Seq < g.oldest.Seq {
		var e Event
		e.fill(r, env)
		g.oldest, g.at = &eventspb.MessageID{GatewayEpoch: id.GatewayEpoch, Seq: id.Seq}, e.Time
	}
}

// firstRecordTimeout bounds how long notInLog waits for the first record
// of a trimmed partition (which retention may delete meanwhile).
const firstRecordTimeout = 10 * time.Second

// notInLog is Trace's error for a message whose publish it did not find:
// a *TrimmedError when retention trimmed shoal.messages and the search
// reached back to where it did, else ErrNoMessage.
func notInLog(ctx context.Context, log *kafka.Client, id *eventspb.MessageID, o Options, gw *gatewayPublishes) error {
	plain := fmt.Errorf("%s: %w", kafka.FormatMessageID(id), ErrNoMessage)
	topic := log.Catalogue().Messages.Name
	starts, err := log.StartOffsets(ctx, topic)
	if err != nil {
		return errors.Join(plain, err)
	}
	ends, err := log.EndOffsets(ctx, topic)
	if err != nil {
		return errors.Join(plain, err)
	}
	var trimmed []int32
	for _, p := range slices.Sorted(maps.Keys(starts)) {
		if starts[p] > 0 {
			trimmed = append(trimmed, p)
		}
	}
	if len(trimmed) == 0 {
		return plain
	}
	firsts, err := firstRecords(ctx, log, topic, starts, ends, trimmed)
	if err != nil {
		return errors.Join(plain, err)
	}
	te := &TrimmedError{ID: id, Trimmed: len(trimmed), Partitions: len(starts)}
	for i, p := range trimmed {
		s, ok := firsts[p]
		if !ok {
			s = LogStart{Topic: topic, Partition: p, Offset: starts[p]}
		}
		if i == 0 || (!s.Time.IsZero() && (te.Oldest.Time.IsZero() || s.Time.Before(te.Oldest.Time))) {
			te.Oldest = s
		}
		if i == 0 || s.Time.IsZero() || (!te.Newest.Time.IsZero() && s.Time.After(te.Newest.Time)) {
			te.Newest = s
		}
	}
	// A search that began after every partition's new start did not miss
	// the message for retention's sake.
	if !o.From.IsZero() && !te.Newest.Time.IsZero() && !o.From.Before(te.Newest.Time) {
		return plain
	}
	if gw.oldest != nil && gw.oldest.Seq > id.Seq {
		te.Later, te.LaterTime = gw.oldest, gw.at
	}
	return te
}

// firstRecords returns where each of partitions of topic starts: its
// first record, for those that hold one.
func firstRecords(ctx context.Context, log *kafka.Client, topic string, starts, ends map[int32]int64, partitions []int32) (map[int32]LogStart, error) {
	want := slices.DeleteFunc(slices.Clone(partitions), func(p int32) bool { return starts[p] >= ends[p] })
	out := make(map[int32]LogStart, len(want))
	if len(want) == 0 {
		return out, nil
	}
	cctx, cancel := context.WithTimeout(ctx, firstRecordTimeout)
	defer cancel()
	env := new(eventspb.Envelope)
	err := log.Consume(cctx, kafka.ConsumeConfig{
		Topic: topic, Partitions: want, Reuse: true,
		Start: func(p int32) int64 { return starts[p] },
	}, func(_ context.Context, b kafka.Batch) error {
		if _, ok := out[b.Partition]; ok {
			return nil
		}
		r := b.Records[0]
		if kafka.DecodeEnvelope(r, env) != nil {
			env.Reset() // the record's own timestamp, then
		}
		var e Event
		e.fill(r, env)
		out[b.Partition] = LogStart{Topic: topic, Partition: r.Partition, Offset: r.Offset, Time: e.Time}
		if len(out) == len(want) {
			cancel()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the start of %s: %w", topic, err)
	}
	return out, nil
}

// Trace follows one message through the log: its publish (and the
// publisher's connection, for its address), every delivery the router
// planned for it (each target: the matched subscription, the shared
// group's choice), every message it put in a session's inbox, the
// deliveries the session service made of those entries, and their
// acknowledgements. o narrows the search
// (a time range, the tenant); its topic and type settings are replaced.
// The events come back in time order. When the log holds no publish of
// the message the error is ErrNoMessage, or a *TrimmedError (which wraps
// it) when retention may have deleted it.
func Trace(ctx context.Context, log *kafka.Client, id *eventspb.MessageID, o Options) ([]*Captured, error) {
	o.MessageID = id
	o.Topics = []string{"messages", "deliveries", "sessions"}
	o.Types, o.TopicFilter, o.QoS, o.ClientID = nil, "", -1, ""
	var c capture
	gw := gatewayPublishes{id: id, messages: log.Catalogue().Messages.Name}
	if _, err := run(ctx, log, o, &c, nil, gw.observe); err != nil && !errors.Is(err, ErrNoEvents) {
		return nil, err
	}
	var pub *Captured
	for _, e := range c.evs {
		if e.Type == kafka.EventPublish {
			pub = e
		}
	}
	if pub == nil {
		return nil, notInLog(ctx, log, id, o, &gw)
	}
	out := c.evs
	// The publisher's connection: its Connect, in the client's partition.
	if conn := pub.Env.GetPublish().GetConnection(); conn != 0 {
		cs, err := related(ctx, log, o, pub.Env.Tenant, pub.Env.ClientId, kafka.EventConnect, pub.Time, func(e *eventspb.Envelope) bool {
			return e.GetConnect().GetRoute().GetConnection() == conn
		})
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	// The acknowledgements of inbox entries, in each client's partition:
	// the session service numbers an entry when it keeps it, and the
	// deliveries it makes of it carry that number (Target.inbox_seq).
	type entry struct {
		client string
		seq    uint64
	}
	seen := map[entry]bool{}
	for _, e := range c.evs {
		for _, t := range e.Env.GetDelivery().GetTargets() {
			k := entry{t.ClientId, t.InboxSeq}
			if t.Qos == 0 || seen[k] {
				continue
			}
			seen[k] = true
			// Another delivery's acknowledgement is in the log only with
			// audit.record_acks (DeliveryAck, with the message's id).
			typ, keep := kafka.EventInboxAck, func(a *eventspb.Envelope) bool { return a.GetInboxAck().GetSeq() == k.seq }
			if k.seq == 0 {
				typ, keep = kafka.EventDeliveryAck, func(a *eventspb.Envelope) bool {
					m := a.GetMessageId()
					return m.GetGatewayEpoch() == id.GatewayEpoch && m.GetSeq() == id.Seq
				}
			}
			acks, err := related(ctx, log, o, e.Env.Tenant, t.ClientId, typ, e.Time, keep)
			if err != nil {
				return nil, err
			}
			out = append(out, acks...)
		}
	}
	slices.SortStableFunc(out, func(a, b *Captured) int { return a.Time.Compare(b.Time) })
	return out, nil
}

// related reads one client's events of type typ in shoal.sessions (its one
// partition) from a minute before at, and keeps those keep accepts.
func related(ctx context.Context, log *kafka.Client, o Options, tenant, client, typ string, at time.Time, keep func(*eventspb.Envelope) bool) ([]*Captured, error) {
	q := DefaultOptions()
	q.Topics, q.Types = []string{"sessions"}, []string{typ}
	q.Tenant, q.TenantSet, q.ClientID = tenant, true, client
	q.From, q.To = at.Add(-time.Minute), o.To
	var c capture
	if _, err := Run(ctx, log, q, &c, nil); err != nil && !errors.Is(err, ErrNoEvents) {
		return nil, err
	}
	return slices.DeleteFunc(c.evs, func(e *Captured) bool { return !keep(e.Env) }), nil
}

// Step is one line of a trace's timeline, for people.
type Step struct {
	Time time.Time
	// Since is the time from the publish ("+1.2ms"), "" before it is
	// known.
	Since string
	// Kind is connect, publish, delivery, inbox, acknowledged, redispatch
	// or the event's type; Text says what happened, with the clients and
	// topics as the log holds them (escape them for HTML).
	Kind, Text string
	// Where is the record's place in the log: messages:3/1042.
	Where string
}

// Timeline turns a trace's events into its steps, in their order.
func Timeline(evs []*Captured) []Step {
	var start time.Time
	for _, e := range evs {
		if e.Type == kafka.EventPublish && start.IsZero() {
			start = e.Time
		}
	}
	out := make([]Step, 0, len(evs))
	for _, e := range evs {
		st := Step{Time: e.Time.UTC(), Where: fmt.Sprintf("%s:%d/%d", strings.TrimPrefix(e.KafkaTopic, "shoal."), e.Partition, e.Offset)}
		if !start.IsZero() {
			st.Since = fmt.Sprintf("%+.1fms", float64(e.Time.Sub(start))/float64(time.Millisecond))
		}
		st.Kind, st.Text = describeStep(e)
		out = append(out, st)
	}
	return out
}

// WriteTimeline writes a trace for people: one line per step, in time
// order, with where in the log each step is.
func WriteTimeline(w io.Writer, evs []*Captured) error {
	var b strings.Builder
	for _, st := range Timeline(evs) {
		rel := ""
		if st.Since != "" {
			rel = fmt.Sprintf("%10s", st.Since)
		}
		fmt.Fprintf(&b, "%s %s  %-12s %s  [%s]\n", st.Time.Format("2006-01-02T15:04:05.000000Z"), rel, st.Kind, st.Text, st.Where)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// describeStep is the kind and the text of a trace's event.
func describeStep(e *Captured) (kind, text string) {
	var b strings.Builder
	env := e.Env
	switch ev := env.Event.(type) {
	case *eventspb.Envelope_Connect:
		c := ev.Connect
		kind = "connect"
		fmt.Fprintf(&b, "%s from %s, user %q, MQTT %s, connection %d", env.ClientId, orDash(c.ClientAddress), c.Username, protocolName(c.ProtocolVersion), c.GetRoute().GetConnection())
	case *eventspb.Envelope_Publish:
		m := ev.Publish.GetMessage()
		kind = "publish"
		fmt.Fprintf(&b, "%s on %q, QoS %d, retain %v, %d bytes, via %s (connection %d)", env.ClientId, m.Topic, m.Qos, m.Retain, len(m.Payload), env.Gateway, ev.Publish.Connection)
		if m.Qos > 0 {
			b.WriteString("; acknowledged to the publisher once this record was written")
		}
		if m.Retain {
			fmt.Fprintf(&b, "; kept as the retained message of %q by router shard %d", m.Topic, e.Partition)
		}
	case *eventspb.Envelope_Delivery:
		d := ev.Delivery
		kind = "delivery"
		fmt.Fprintf(&b, "to gateway slot %d, %d target(s):", e.Partition, len(d.Targets))
		for _, t := range d.Targets {
			fmt.Fprintf(&b, " %s (QoS %d", t.ClientId, t.Qos)
			if t.ShareGroup != "" {
				fmt.Fprintf(&b, ", shared group %q of %q, chosen", t.ShareGroup, t.ShareFilter)
			}
			if len(t.SubscriptionIds) > 0 {
				fmt.Fprintf(&b, ", subscription ids %v", t.SubscriptionIds)
			}
			if t.PacketId != 0 {
				fmt.Fprintf(&b, ", packet id %d", t.PacketId)
			}
			if t.InboxSeq != 0 {
				fmt.Fprintf(&b, ", inbox entry %d", t.InboxSeq)
			}
			if t.Dup {
				b.WriteString(", again (DUP)")
			}
			b.WriteString(")")
		}
	case *eventspb.Envelope_InboxAppend:
		ia := ev.InboxAppend
		kind = "inbox"
		fmt.Fprintf(&b, "%s, QoS %d: the session service keeps it for the client, or forwards it to its connection", env.ClientId, ia.GetTarget().GetQos())
	case *eventspb.Envelope_InboxAck:
		a := ev.InboxAck
		what := "PUBACK"
		if a.Received {
			what = "PUBREC"
		}
		kind = "acknowledged"
		fmt.Fprintf(&b, "%s: %s of inbox entry %d", env.ClientId, what, a.Seq)
	case *eventspb.Envelope_DeliveryAck:
		a := ev.DeliveryAck
		what := "PUBACK"
		if a.Qos == 2 {
			what = "PUBCOMP"
		}
		kind = "acknowledged"
		fmt.Fprintf(&b, "%s: %s of packet id %d", env.ClientId, what, a.PacketId)
		if a.ReasonCode != 0 {
			fmt.Fprintf(&b, ", refused with reason code 0x%02x", a.ReasonCode)
		}
	case *eventspb.Envelope_SharedRedispatch:
		r := ev.SharedRedispatch
		kind = "redispatch"
		fmt.Fprintf(&b, "shared group %q of %q, away from %s", r.ShareGroup, r.Filter, r.ExcludeClient)
	default:
		kind = e.Type
		b.WriteString(env.ClientId)
	}
	return kind, b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func protocolName(v uint32) string {
	switch v {
	case 4:
		return "3.1.1"
	case 5:
		return "5.0"
	}
	return strconv.Itoa(int(v))
}
