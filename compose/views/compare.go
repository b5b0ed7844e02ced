package views

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/shoal-mqtt/shoal/kafka"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
)

// A view's rows, normalised for comparison: by row key, one value each.
// What is ignored, and why:
//
//   - A retained message whose message expiry has passed when the views
//     are compared counts as absent on both sides. The live router
//     deletes expired retained messages by its wall clock, at its next
//     poll of the partition (or never, if no record comes), the rebuild
//     by the timestamps of the records it applies: when each deletes one
//     differs, but no subscriber can get it from either.
//   - Write timestamps (CQL's writetime, Pebble's sequence numbers) are
//     not read: the store ports do not return them, and they say when a
//     row was written, not what the view holds.
//
// Nothing else is ignored: offsets, every subscription, every retained
// message, every unreleased QoS 2 packet identifier and every field of
// every session (times included: they come from the log) must match.
type snapshot struct {
	rows  map[rowKey]string
	count map[string]int // rows per kind
	// expired counts the retained messages ignored as expired.
	expired int
}

type rowKey struct {
	kind      string // router-offset, subscription, retained, unreleased, session-offset, session
	partition int32
	tenant    string
	key       string
	field     string // of a session: one row per field
}

func newSnapshot() *snapshot {
	return &snapshot{rows: make(map[rowKey]string), count: make(map[string]int)}
}

func (s *snapshot) put(k rowKey, v string) {
	s.rows[k] = v
	if k.field == "" || k.field == "generation" {
		s.count[k.kind]++
	}
}

var text = prototext.MarshalOptions{}

func msgText(m proto.Message) string { return strings.Join(strings.Fields(text.Format(m)), " ") }

// load reads a whole view through the store ports.
func load(ctx context.Context, st store, cat kafka.Catalogue, now time.Time) (*snapshot, error) {
	s := newSnapshot()
	nowMs := now.UnixMilli()
	for p := range cat.Messages.Partitions {
		l := &shardRows{s: s, p: p, nowMs: nowMs}
		off, err := st.LoadShard(ctx, p, l)
		if err != nil {
			return nil, fmt.Errorf("router view: %w", err)
		}
		s.put(rowKey{kind: "router-offset", partition: p}, strconv.FormatInt(off, 10))
	}
	for p := range cat.Sessions.Partitions {
		off, err := st.LoadSessions(ctx, p, func(sess *sessionsvc.Session) error {
			return putSession(s, p, sess)
		})
		if err != nil {
			return nil, fmt.Errorf("session view: %w", err)
		}
		s.put(rowKey{kind: "session-offset", partition: p}, strconv.FormatInt(off, 10))
	}
	return s, nil
}

// shardRows receives a shard's rows.
type shardRows struct {
	s     *snapshot
	p     int32
	nowMs int64
}

func (l *shardRows) LoadSubscription(sub routersvc.Subscription) error {
	key := "client=" + strconv.Quote(sub.Client) + " filter=" + strconv.Quote(sub.Filter)
	if sub.ShareGroup != "" {
		key += " share=" + strconv.Quote(sub.ShareGroup)
	}
	v := "options {" + msgText(sub.Options) + "} route {" + msgText(sub.Route) + "}"
	l.s.put(rowKey{kind: "subscription", partition: l.p, tenant: sub.Tenant, key: key}, v)
	return nil
}

func (l *shardRows) LoadRetained(env *eventspb.Envelope) error {
	msg := env.GetPublish().GetMessage()
	if at := msg.GetExpiresAtMs(); at != 0 && at < l.nowMs {
		l.s.expired++
		return nil
	}
	l.s.put(rowKey{kind: "retained", partition: l.p, tenant: env.GetTenant(), key: strconv.Quote(msg.GetTopic())}, msgText(env))
	return nil
}

func (l *shardRows) LoadUnreleased(u routersvc.Unreleased) error {
	key := "client=" + strconv.Quote(u.Client) + " packet_id=" + strconv.Itoa(int(u.PacketID))
	l.s.put(rowKey{kind: "unreleased", partition: l.p, tenant: u.Tenant, key: key}, "session_generation="+strconv.FormatUint(u.SessionGeneration, 10))
	return nil
}

// putSession puts one row per field of the session's stored form, so that
// a difference names the field.
func putSession(s *snapshot, p int32, sess *sessionsvc.Session) error {
	var row eventspb.StoredSession
	if err := row.UnmarshalVT(sessionsvc.AppendSessionRow(nil, sess)); err != nil {
		return fmt.Errorf("session %q: %w", sess.ClientID, err)
	}
	m := row.ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		v := "(unset)"
		if m.Has(f) {
			v = fieldText(f, m.Get(f))
		}
		s.put(rowKey{kind: "session", partition: p, tenant: sess.Tenant, key: strconv.Quote(sess.ClientID), field: string(f.Name())}, v)
	}
	return nil
}

func fieldText(f protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch {
	case f.IsList():
		l := v.List()
		parts := make([]string, l.Len())
		for i := range l.Len() {
			parts[i] = scalarText(f, l.Get(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	default:
		return scalarText(f, v)
	}
}

func scalarText(f protoreflect.FieldDescriptor, v protoreflect.Value) string {
	if f.Kind() == protoreflect.MessageKind {
		return "{" + msgText(v.Message().Interface()) + "}"
	}
	if strings.HasSuffix(string(f.Name()), "_us") {
		us := v.Int()
		return time.UnixMicro(us).UTC().Format(time.RFC3339Nano)
	}
	return v.String()
}

// compare writes one line per difference between live and rebuilt and
// returns how many.
func compare(w io.Writer, live, rebuilt *snapshot) int {
	keys := make(map[rowKey]bool, len(live.rows))
	for k := range live.rows {
		keys[k] = true
	}
	for k := range rebuilt.rows {
		keys[k] = true
	}
	sorted := slices.SortedFunc(maps.Keys(keys), func(a, b rowKey) int {
		if c := strings.Compare(a.kind, b.kind); c != 0 {
			return c
		}
		if a.partition != b.partition {
			return int(a.partition - b.partition)
		}
		return strings.Compare(a.tenant+"\x00"+a.key+"\x00"+a.field, b.tenant+"\x00"+b.key+"\x00"+b.field)
	})
	n := 0
	for _, k := range sorted {
		lv, lok := live.rows[k]
		rv, rok := rebuilt.rows[k]
		if lok && rok && lv == rv {
			continue
		}
		if !lok {
			lv = "(none)"
		}
		if !rok {
			rv = "(none)"
		}
		key := k.key
		if k.field != "" {
			key += " field=" + k.field
		}
		if k.kind == "router-offset" || k.kind == "session-offset" {
			fmt.Fprintf(w, "DIFF %s partition=%d: live %s, rebuilt %s\n", k.kind, k.partition, lv, rv)
		} else {
			fmt.Fprintf(w, "DIFF %s partition=%d tenant=%q %s: live %s, rebuilt %s\n", k.kind, k.partition, k.tenant, key, lv, rv)
		}
		n++
	}
	return n
}

// verify loads both views and compares them, writing the differences and
// a summary to w.
func verify(ctx context.Context, d *deployment, w io.Writer, now time.Time) (int, error) {
	live, err := load(ctx, d.live, d.cat, now)
	if err != nil {
		return 0, fmt.Errorf("live: %w", err)
	}
	rebuilt, err := load(ctx, d.target, d.cat, now)
	if err != nil {
		return 0, fmt.Errorf("rebuilt: %w", err)
	}
	n := compare(w, live, rebuilt)
	c := live.count
	fmt.Fprintf(w, "verified %s against %s: %d router partitions, %d subscriptions, %d retained, %d unreleased; %d session partitions, %d sessions; %d expired retained ignored (live %d, rebuilt %d): %d differences\n",
		d.liveName, d.targetName, c["router-offset"], c["subscription"], c["retained"], c["unreleased"],
		c["session-offset"], c["session"], live.expired+rebuilt.expired, live.expired, rebuilt.expired, n)
	return n, nil
}
