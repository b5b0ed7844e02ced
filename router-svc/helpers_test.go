package routersvc_test

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// t0 is the tests' fixed time.
var t0 = time.Unix(1_700_000_000, 0)

// testClock is a settable clock.
type testClock struct{ now time.Time }

func (c *testClock) Now() time.Time { return c.now }

// route returns the default route of a client in these tests: slot 1, a
// connection id derived from the name, generation 1.
func route(client string) *eventspb.Route {
	var h uint64
	for _, b := range []byte(client) {
		h = h*31 + uint64(b)
	}
	return &eventspb.Route{Slot: 1, Connection: h, Generation: 1}
}

// conn is the connection id of route(client).
func conn(client string) uint64 { return route(client).Connection }

type changeOpt func(*eventspb.SubscriptionChange)

func qos(q uint32) changeOpt { return func(c *eventspb.SubscriptionChange) { c.Options.Qos = q } }
func id(i uint32) changeOpt {
	return func(c *eventspb.SubscriptionChange) { c.Options.SubscriptionId = i }
}
func rh(h uint32) changeOpt {
	return func(c *eventspb.SubscriptionChange) { c.Options.RetainHandling = h }
}
func group(g string) changeOpt { return func(c *eventspb.SubscriptionChange) { c.ShareGroup = g } }
func noLocal() changeOpt       { return func(c *eventspb.SubscriptionChange) { c.Options.NoLocal = true } }
func rap() changeOpt {
	return func(c *eventspb.SubscriptionChange) { c.Options.RetainAsPublished = true }
}
func gen(g uint64) changeOpt { return func(c *eventspb.SubscriptionChange) { c.Route.Generation = g } }

// began sets the generation the ADD's session began with
// (SubscriptionChange.session_generation).
func began(g uint64) changeOpt {
	return func(c *eventspb.SubscriptionChange) { c.SessionGeneration = g }
}
func slot(s int32) changeOpt { return func(c *eventspb.SubscriptionChange) { c.Route.Slot = s } }

// persistentSession marks an ADD as one of a session that outlives its
// connection (SubscriptionChange.persistent_session).
func persistentSession() changeOpt {
	return func(c *eventspb.SubscriptionChange) { c.PersistentSession = true }
}

func change(op eventspb.SubscriptionChange_Op, tenant, client, filter string, opts ...changeOpt) *eventspb.Envelope {
	ch := &eventspb.SubscriptionChange{
		Op:      op,
		Filter:  filter,
		Options: &eventspb.SubscriptionOptions{Qos: 2},
		Route:   route(client),
	}
	for _, o := range opts {
		o(ch)
	}
	return &eventspb.Envelope{
		Tenant:      tenant,
		ClientId:    client,
		TimestampUs: t0.UnixMicro(),
		Event:       &eventspb.Envelope_SubscriptionChange{SubscriptionChange: ch},
	}
}

func add(tenant, client, filter string, opts ...changeOpt) *eventspb.Envelope {
	return change(eventspb.SubscriptionChange_OP_ADD, tenant, client, filter, opts...)
}

func remove(tenant, client, filter string, opts ...changeOpt) *eventspb.Envelope {
	return change(eventspb.SubscriptionChange_OP_REMOVE, tenant, client, filter, opts...)
}

func removeAll(tenant, client string, g uint64) *eventspb.Envelope {
	return change(eventspb.SubscriptionChange_OP_REMOVE_ALL, tenant, client, "", gen(g))
}

type msgOpt func(*eventspb.Message)

func pqos(q uint32) msgOpt    { return func(m *eventspb.Message) { m.Qos = q } }
func retain() msgOpt          { return func(m *eventspb.Message) { m.Retain = true } }
func expires(at int64) msgOpt { return func(m *eventspb.Message) { m.ExpiresAtMs = at } }
func payload(p string) msgOpt { return func(m *eventspb.Message) { m.Payload = []byte(p) } }
func noPayload() msgOpt       { return func(m *eventspb.Message) { m.Payload = nil } }
func pub(tenant, client, topic string, opts ...msgOpt) *eventspb.Envelope {
	m := &eventspb.Message{Topic: topic, Payload: []byte("m:" + topic), Qos: 2}
	for _, o := range opts {
		o(m)
	}
	return &eventspb.Envelope{
		Tenant:      tenant,
		ClientId:    client,
		TimestampUs: t0.UnixMicro(),
		MessageId:   &eventspb.MessageID{GatewayEpoch: 1, Seq: uint64(len(m.Payload))},
		Event:       &eventspb.Envelope_Publish{Publish: &eventspb.Publish{Message: m, Connection: conn(client)}},
	}
}

// dlv is a delivery in a comparable form.
type dlv struct {
	Slot    int32
	Inbox   bool
	Tenant  string
	Topic   string
	Payload string
	Targets []tgt
}

type tgt struct {
	Client string
	Conn   uint64
	QoS    uint32
	Retain bool
	IDs    []uint32
}

// T is a target on the client's default route.
func T(client string, qos uint32, retain bool, ids ...uint32) tgt {
	return tgt{Client: client, Conn: conn(client), QoS: qos, Retain: retain, IDs: ids}
}

// D is a delivery of the default payload of topic.
func D(slot int32, tenant, topic string, targets ...tgt) dlv {
	return dlv{Slot: slot, Tenant: tenant, Topic: topic, Payload: "m:" + topic, Targets: targets}
}

// normalize returns out's deliveries sorted, with their targets sorted,
// checking the invariants every delivery keeps.
func normalize(t *testing.T, out *routersvc.Output) []dlv {
	t.Helper()
	var ds []dlv
	for _, d := range out.Deliveries {
		env := d.Envelope
		del := env.GetDelivery()
		if del == nil {
			t.Fatalf("delivery envelope without a delivery: %v", env)
		}
		if env.Gateway != "" || env.ClientId != "" {
			t.Errorf("delivery envelope names gateway %q client %q", env.Gateway, env.ClientId)
		}
		if env.TimestampUs == 0 || env.MessageId == nil {
			t.Errorf("delivery envelope without timestamp or message id: %v", env)
		}
		x := dlv{Slot: d.Slot, Inbox: d.Inbox, Tenant: env.Tenant, Topic: del.Message.GetTopic(), Payload: string(del.Message.GetPayload())}
		seen := map[string]bool{}
		for _, tg := range del.Targets {
			if seen[tg.ClientId] {
				t.Errorf("client %q twice in one delivery", tg.ClientId)
			}
			seen[tg.ClientId] = true
			ids := slices.Clone(tg.SubscriptionIds) // in the order sent: ascending
			if len(ids) == 0 {
				ids = nil
			}
			x.Targets = append(x.Targets, tgt{Client: tg.ClientId, Conn: tg.Connection, QoS: tg.Qos, Retain: tg.Retain, IDs: ids})
		}
		ds = append(ds, x)
	}
	return sortDeliveries(ds)
}

// sortDeliveries puts ds and their targets in a canonical order.
func sortDeliveries(ds []dlv) []dlv {
	for i := range ds {
		slices.SortFunc(ds[i].Targets, func(a, b tgt) int { return cmp.Compare(a.Client, b.Client) })
	}
	slices.SortStableFunc(ds, func(a, b dlv) int {
		return cmp.Or(cmp.Compare(a.Slot, b.Slot), cmp.Compare(fmt.Sprint(a.Inbox), fmt.Sprint(b.Inbox)), cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Topic, b.Topic),
			cmp.Compare(a.Payload, b.Payload), cmp.Compare(fmt.Sprint(a.Targets), fmt.Sprint(b.Targets)))
	})
	return ds
}

func diffDeliveries(t *testing.T, what string, want, got []dlv) {
	t.Helper()
	if len(want) == 0 && len(got) == 0 {
		return
	}
	if d := gocmp.Diff(sortDeliveries(want), got); d != "" {
		t.Errorf("%s: deliveries (-want +got):\n%s", what, d)
	}
}
