package gateway

import (
	"sync"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/kafka"
)

// TestSubscribeReadFirstIsWrittenFirst: a SUBSCRIBE the
// gateway read before a PUBLISH on another connection reaches the log
// first, however the two connections' goroutines are scheduled. The
// SUBSCRIBE is held after it was read (subscribeRead); the PUBLISH read
// meanwhile is not written until the subscription change is.
func TestSubscribeReadFirstIsWrittenFirst(t *testing.T) {
	fl := newFakeLog()
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	g, stop := runGatewayWith(t, fl, func(g *Gateway) {
		g.subscribeRead = func(c *conn) {
			if c.clientID == "t-sub" {
				once.Do(func() {
					close(held)
					<-release
				})
			}
		}
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	subC, _ := connectAs(t, g, "t-sub", 0)
	pubC, _ := connectAs(t, g, "t-pub", 0)

	write(t, subC, &packet.Subscribe{PacketID: 1, Filters: []packet.Subscription{{Filter: []byte("a"), QoS: 1}}})
	select {
	case <-held:
	case <-time.After(5 * time.Second):
		t.Fatal("the SUBSCRIBE was not read")
	}
	write(t, pubC, &packet.Publish{QoS: 0, Topic: []byte("a"), Payload: []byte("m")})
	select {
	case <-fl.produced:
		_, env := fl.heldEnvelope(t, 0)
		t.Fatalf("%s written while a SUBSCRIBE read before it was not", kafka.EnvelopeType(env))
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	// The subscription change (its partition's record and the session's)
	// and then the publish.
	fl.waitProduced(t, 3)
	var types []string
	for i := range 3 {
		rec, env := fl.heldEnvelope(t, i)
		types = append(types, rec.Topic+":"+kafka.EnvelopeType(env))
	}
	for i := range 3 {
		fl.complete(i, nil)
	}
	if types[2] != kafka.TopicMessages+":"+kafka.EventPublish {
		t.Fatalf("records in the order %v, want the publish last", types)
	}
}

// readOrder gives tickets back in any order; a waiter is released once
// every ticket up to its mark is back, not before.
func TestReadOrderTickets(t *testing.T) {
	var o readOrder
	o.init()
	a, b, c := o.begin(), o.begin(), o.begin()
	m := o.mark()
	done := make(chan struct{})
	go func() { o.wait(m); close(done) }()
	for _, tk := range []uint64{c, a} {
		o.end(tk)
		select {
		case <-done:
			t.Fatalf("wait returned with ticket %d still out", b)
		case <-time.After(20 * time.Millisecond):
		}
	}
	o.end(b)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("wait did not return once every ticket was back")
	}
	if d := o.done.Load(); d != c {
		t.Errorf("done = %d, want %d", d, c)
	}
	// A mark with nothing out does not wait; a later ticket is not waited for.
	m = o.mark()
	o.begin()
	o.wait(m)
}

// TestReadOrderMovesWithSubscriptions: readers yield only while
// subscriptions move (order.go): for readOrderWindow after a CONNECT or a
// SUBSCRIBE the gateway read, not before the first nor once it passed.
func TestReadOrderMovesWithSubscriptions(t *testing.T) {
	fl := newFakeLog()
	g, _, clock, _ := loggedGateway(t, fl, nil)
	moving := func() bool { return g.order.moving(g.clock().UnixNano()) }
	if moving() {
		t.Fatal("moving before any CONNECT")
	}
	c, _ := connectAs(t, g, "t-sub", 0)
	if !moving() {
		t.Fatal("not moving just after a CONNECT")
	}
	clock.advance(readOrderWindow + time.Millisecond)
	if moving() {
		t.Fatal("still moving a window after the CONNECT")
	}
	write(t, c, &packet.Subscribe{PacketID: 1, Filters: []packet.Subscription{{Filter: []byte("a"), QoS: 0}}})
	fl.waitProduced(t, 2) // the subscription change and the session's record
	for i := range 2 {
		fl.complete(i, nil)
	}
	if !moving() {
		t.Fatal("not moving just after a SUBSCRIBE")
	}
	clock.advance(readOrderWindow - 10*time.Millisecond)
	if !moving() {
		t.Fatal("not moving within the window")
	}
	clock.advance(20 * time.Millisecond)
	if moving() {
		t.Fatal("still moving a window after the SUBSCRIBE")
	}
}
