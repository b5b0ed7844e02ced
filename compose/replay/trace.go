package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
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

// Trace follows one message through the log: its publish (and the
// publisher's connection, for its address), every delivery the router
// planned for it (each target: the matched subscription, the shared
// group's choice), every message it put in a session's inbox, the
// deliveries the session service made of those entries, and their
// acknowledgements. o narrows the search
// (a time range, the tenant); its topic and type settings are replaced.
// The events come back in time order.
func Trace(ctx context.Context, log *kafka.Client, id *eventspb.MessageID, o Options) ([]*Captured, error) {
	o.MessageID = id
	o.Topics = []string{"messages", "deliveries", "sessions"}
	o.Types, o.TopicFilter, o.QoS, o.ClientID = nil, "", -1, ""
	var c capture
	if _, err := Run(ctx, log, o, &c, nil); err != nil && !errors.Is(err, ErrNoEvents) {
		return nil, err
	}
	var pub *Captured
	for _, e := range c.evs {
		if e.Type == kafka.EventPublish {
			pub = e
		}
	}
	if pub == nil {
		return nil, fmt.Errorf("%s: %w", kafka.FormatMessageID(id), ErrNoMessage)
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

// WriteTimeline writes a trace for people: one line per step, in time
// order, with where in the log each step is.
func WriteTimeline(w io.Writer, evs []*Captured) error {
	var b strings.Builder
	var start time.Time
	for _, e := range evs {
		if e.Type == kafka.EventPublish && start.IsZero() {
			start = e.Time
		}
	}
	for _, e := range evs {
		env := e.Env
		rel := ""
		if !start.IsZero() {
			rel = fmt.Sprintf("%+8.1fms", float64(e.Time.Sub(start))/float64(time.Millisecond))
		}
		fmt.Fprintf(&b, "%s %s  ", e.Time.UTC().Format("2006-01-02T15:04:05.000000Z"), rel)
		switch ev := env.Event.(type) {
		case *eventspb.Envelope_Connect:
			c := ev.Connect
			fmt.Fprintf(&b, "connect      %s from %s, user %q, MQTT %s, connection %d", env.ClientId, orDash(c.ClientAddress), c.Username, protocolName(c.ProtocolVersion), c.GetRoute().GetConnection())
		case *eventspb.Envelope_Publish:
			m := ev.Publish.GetMessage()
			fmt.Fprintf(&b, "publish      %s on %q, QoS %d, retain %v, %d bytes, via %s (connection %d)", env.ClientId, m.Topic, m.Qos, m.Retain, len(m.Payload), env.Gateway, ev.Publish.Connection)
			if m.Qos > 0 {
				b.WriteString("; acknowledged to the publisher once this record was written")
			}
			if m.Retain {
				fmt.Fprintf(&b, "; kept as the retained message of %q by router shard %d", m.Topic, e.Partition)
			}
		case *eventspb.Envelope_Delivery:
			d := ev.Delivery
			fmt.Fprintf(&b, "delivery     to gateway slot %d, %d target(s):", e.Partition, len(d.Targets))
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
			fmt.Fprintf(&b, "inbox        %s, QoS %d: the session service keeps it for the client, or forwards it to its connection", env.ClientId, ia.GetTarget().GetQos())
		case *eventspb.Envelope_InboxAck:
			a := ev.InboxAck
			what := "PUBACK"
			if a.Received {
				what = "PUBREC"
			}
			fmt.Fprintf(&b, "acknowledged %s: %s of inbox entry %d", env.ClientId, what, a.Seq)
		case *eventspb.Envelope_DeliveryAck:
			a := ev.DeliveryAck
			what := "PUBACK"
			if a.Qos == 2 {
				what = "PUBCOMP"
			}
			fmt.Fprintf(&b, "acknowledged %s: %s of packet id %d", env.ClientId, what, a.PacketId)
			if a.ReasonCode != 0 {
				fmt.Fprintf(&b, ", refused with reason code 0x%02x", a.ReasonCode)
			}
		case *eventspb.Envelope_SharedRedispatch:
			r := ev.SharedRedispatch
			fmt.Fprintf(&b, "redispatch   shared group %q of %q, away from %s", r.ShareGroup, r.Filter, r.ExcludeClient)
		default:
			fmt.Fprintf(&b, "%-12s %s", e.Type, env.ClientId)
		}
		fmt.Fprintf(&b, "  [%s:%d/%d]\n", strings.TrimPrefix(e.KafkaTopic, "shoal."), e.Partition, e.Offset)
	}
	_, err := io.WriteString(w, b.String())
	return err
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
