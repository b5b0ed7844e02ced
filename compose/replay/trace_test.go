package replay

import (
	"bytes"
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/compose/broker/brokertest"
	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// TestTrace follows one message to a live subscriber, one member of a
// shared group and a persistent session that was offline, which then
// comes back and acknowledges it; with audit.record_acks the live
// subscribers' acknowledgements are in the log too.
func TestTrace(t *testing.T) {
	dir := t.TempDir()
	b, stop := brokertest.Run(t, func(c *config.Config) { c.DataDir, c.Audit.RecordAcks = dir, true })
	addr := b.Addr("mqtt").String()
	got := make(chan *paho.Publish, 16)
	sub := func(id, filter string, clean bool) *paho.Client {
		c := dialTrace(t, addr, id, clean, func(p *paho.Publish) { got <- p })
		if _, err := c.Subscribe(t.Context(), &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 1}}}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	sub("acme-live", "t/#", true)
	sub("acme-m1", "$share/g/t/#", true)
	sub("acme-m2", "$share/g/t/#", true)
	off := sub("acme-offline", "t/x", false)
	_ = off.Disconnect(&paho.Disconnect{})
	publish(t, addr, "acme-pub", msg{"t/x", "traced", 1})
	for range 2 { // the live subscriber and one member
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("the message did not reach the live subscribers")
		}
	}
	dialTrace(t, addr, "acme-offline", false, func(p *paho.Publish) { got <- p })
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the offline session's inbox did not deliver the message")
	}
	time.Sleep(500 * time.Millisecond) // real time: its PUBACK reaches the log, which tells the test nothing when it has
	stop()

	l := openLog(t, dir)
	o := DefaultOptions()
	o.Tenant, o.TenantSet, o.Types, o.ClientID = "acme", true, []string{kafka.EventPublish}, "acme-pub"
	lines, _, _, err := read(t, l.Client, o)
	if err != nil || len(lines) != 1 {
		t.Fatalf("the publish: %v, %v", lines, err)
	}
	id, _ := kafka.ParseMessageID(lines[0].MessageID)
	evs, err := Trace(t.Context(), l.Client, id, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var types, targets []string
	shared := ""
	for _, e := range evs {
		types = append(types, e.Type)
		for _, tg := range e.Env.GetDelivery().GetTargets() {
			targets = append(targets, tg.ClientId)
			if tg.ShareGroup != "" {
				shared = tg.ClientId
			}
		}
		if e.Type == kafka.EventConnect && !strings.HasPrefix(e.Env.GetConnect().ClientAddress, "127.0.0.1:") {
			t.Errorf("publisher's address %q", e.Env.GetConnect().ClientAddress)
		}
	}
	acked := map[string]bool{}
	for _, e := range evs {
		if e.Type == kafka.EventDeliveryAck {
			acked[e.Env.ClientId] = true
		}
	}
	if !acked["acme-live"] || !acked[shared] || len(acked) != 2 {
		t.Errorf("recorded acknowledgements of %v, want acme-live's and %s's", acked, shared)
	}
	for _, want := range []string{kafka.EventConnect, kafka.EventPublish, kafka.EventDelivery, kafka.EventInboxAppend, kafka.EventInboxAck} {
		if !slices.Contains(types, want) {
			t.Errorf("trace %v lacks %s", types, want)
		}
	}
	if !slices.Contains(targets, "acme-offline") {
		t.Errorf("delivery targets %v: the inbox's delivery to acme-offline is missing", targets)
	}
	if !slices.Contains(targets, "acme-live") || (shared != "acme-m1" && shared != "acme-m2") || slices.Contains(targets, "acme-m1") == slices.Contains(targets, "acme-m2") {
		t.Errorf("delivery targets %v (shared choice %q): want acme-live and one member", targets, shared)
	}
	if types[0] != kafka.EventConnect || types[1] != kafka.EventPublish {
		t.Errorf("timeline order %v", types)
	}
	var out bytes.Buffer
	if err := WriteTimeline(&out, evs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"publish      acme-pub on \"t/x\"", "shared group \"g\"", "inbox        acme-offline", "acknowledged acme-offline: PUBACK", "acknowledged acme-live: PUBACK of packet id"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("timeline lacks %q:\n%s", want, out.String())
		}
	}
	// The log holds all it was written: an unknown message is no more.
	var trimmed *TrimmedError
	if _, err := Trace(t.Context(), l.Client, &eventspb.MessageID{GatewayEpoch: 1, Seq: 1}, DefaultOptions()); !errors.Is(err, ErrNoMessage) || errors.As(err, &trimmed) {
		t.Errorf("an unknown message: %v", err)
	}
}

func dialTrace(t *testing.T, addr, id string, clean bool, onPublish func(*paho.Publish)) *paho.Client {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: nc, OnClientError: func(error) {},
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			onPublish(pr.Packet)
			return true, nil
		}}})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	expiry := uint32(3600)
	if clean {
		expiry = 0
	}
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: id, CleanStart: clean, KeepAlive: 30, Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(&paho.Disconnect{}) })
	return c
}

// TestExposeMessageID: with audit.expose_message_id a 5.0 subscriber
// receives the message's id, the one shoal trace takes.
func TestExposeMessageID(t *testing.T) {
	dir := t.TempDir()
	b, stop := brokertest.Run(t, func(c *config.Config) { c.DataDir, c.Audit.ExposeMessageID = dir, true })
	addr := b.Addr("mqtt").String()
	got := make(chan *paho.Publish, 4)
	s := dialTrace(t, addr, "acme-s", true, func(p *paho.Publish) { got <- p })
	if _, err := s.Subscribe(t.Context(), &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "e/#", QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	publish(t, addr, "acme-p", msg{"e/1", "exposed", 1})
	var p *paho.Publish
	select {
	case p = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no message")
	}
	exposed := p.Properties.User.Get("shoal-message-id")
	stop()
	l := openLog(t, dir)
	o := DefaultOptions()
	o.Types, o.ClientID, o.Tenant, o.TenantSet = []string{kafka.EventPublish}, "acme-p", "acme", true
	lines, _, _, err := read(t, l.Client, o)
	if err != nil || len(lines) != 1 {
		t.Fatalf("%v %v", lines, err)
	}
	if exposed == "" || exposed != lines[0].MessageID {
		t.Errorf("the subscriber got shoal-message-id %q; the log says %q", exposed, lines[0].MessageID)
	}
	// Without audit.record_acks the live subscriber's PUBACK is not in the log.
	o = DefaultOptions()
	o.Topics, o.Types = []string{"sessions"}, []string{kafka.EventDeliveryAck}
	if _, _, _, err := read(t, l.Client, o); !errors.Is(err, ErrNoEvents) {
		t.Errorf("delivery acknowledgements recorded without audit.record_acks: %v", err)
	}
}

// TestFollow tails a running shoal all: a message published after the
// follow began shows up, and the follow ends with its context.
func TestFollow(t *testing.T) {
	dir := t.TempDir()
	b, _ := brokertest.Run(t, func(c *config.Config) { c.DataDir = dir })
	addr := b.Addr("mqtt").String()
	publish(t, addr, "acme-early", msg{"f/1", "before", 1})
	l := openLog(t, dir)
	o := DefaultOptions()
	o.Follow, o.Types, o.From = true, []string{kafka.EventPublish}, time.Now()
	var out testlog.Buffer
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, l.Client, o, NewJSONSink(&out), nil)
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), `"payload":"after"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the follow did not show the new message: %q", out.String())
		}
		publish(t, addr, "acme-late", msg{"f/2", "after", 1})
		time.Sleep(200 * time.Millisecond) // real time: one publish a round until the follow, begun at a moment the test cannot see, shows one
	}
	if strings.Contains(out.String(), "before") {
		t.Errorf("a message from before --from: %s", out.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("follow ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the follow did not end with its context")
	}
}
