package gateway

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// roomFunc is a Room of the process's router made of a function.
type roomFunc func(topic string, p int32) bool

func (f roomFunc) Room(topic string, p int32) bool { return f(topic, p) }

// TestWaitRoomHoldsPublishers: while the router of the process has no
// room on shoal.messages (kafka.Client.Room), a client's PUBLISH is not
// written, and once there is room it is; a close by the server (here the
// gateway stopping) ends the wait at once, not after roomWaitMax.
func TestWaitRoomHoldsPublishers(t *testing.T) {
	fl := newFakeLog()
	var full atomic.Bool
	full.Store(true)
	var asked atomic.Int64
	room := roomFunc(func(topic string, _ int32) bool {
		if topic != "shoal.messages" {
			t.Errorf("room asked of %s", topic)
		}
		asked.Add(1)
		return !full.Load()
	})
	g, stop := runGatewayWith(t, fl, func(g *Gateway) { g.room, g.roomGates = room, make([]roomGate, g.msgParts) })
	t.Cleanup(func() { _ = stop() })
	nc, _ := dial(t, g)

	write(t, nc, &packet.Publish{Topic: []byte("a"), Payload: []byte("1")})
	select {
	case <-fl.produced:
		t.Fatal("a PUBLISH was written while the router had no room")
	case <-time.After(300 * time.Millisecond):
	}
	if asked.Load() < 2 {
		t.Fatalf("room asked %d times in 300 ms: the reader is not waiting for it", asked.Load())
	}
	full.Store(false)
	fl.waitProduced(t, 1)
	fl.complete(0, nil)

	full.Store(true)
	write(t, nc, &packet.Publish{Topic: []byte("b"), Payload: []byte("2")})
	select {
	case <-fl.produced:
		t.Fatal("a PUBLISH was written while the router had no room")
	case <-time.After(100 * time.Millisecond):
	}
	began := time.Now()
	done := make(chan struct{})
	go func() { _ = stop(); close(done) }()
	select { // the close lets the reader go: it writes what it held
	case <-fl.produced:
		fl.complete(1, nil)
	case <-time.After(roomWaitMax / 2):
		t.Fatal("the held PUBLISH was not written when the gateway stopped")
	}
	select {
	case <-done:
	case <-time.After(roomWaitMax / 2):
		t.Fatal("the gateway did not stop")
	}
	if d := time.Since(began); d >= roomWaitMax/2 {
		t.Errorf("stopping took %v: the held reader waited on", d)
	}
}
