package routersvc

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

func presenceOf(online bool, slot int32, gen uint64) *eventspb.Presence {
	return &eventspb.Presence{Online: online, Route: &eventspb.Route{Slot: slot, Connection: gen * 10, Generation: gen}}
}

func mustDeleteRecordKey(t *testing.T, p *Presence, key []byte) {
	t.Helper()
	if err := p.deleteRecordKey(key); err != nil {
		t.Fatalf("tombstone %q: %v", key, err)
	}
}

func TestPresenceNewestGeneration(t *testing.T) {
	p := NewPresence()
	p.Update("t", "c", presenceOf(true, 1, 2))
	p.Update("t", "c", presenceOf(true, 9, 1)) // older: ignored
	if got, _ := p.Lookup("t", "c"); got.GetRoute().GetSlot() != 1 || !got.Online {
		t.Errorf("after an older update: %v", got)
	}
	p.Update("t", "c", presenceOf(false, 1, 2)) // same generation: replaces
	if got, _ := p.Lookup("t", "c"); got.Online {
		t.Errorf("after offline of the same generation: %v", got)
	}
	p.Update("t", "c", presenceOf(true, 4, 3))
	if got, _ := p.Lookup("t", "c"); got.GetRoute().GetSlot() != 4 || !got.Online {
		t.Errorf("after a newer update: %v", got)
	}
	// Tenants and the separator cannot be confused.
	p.Update("t/c", "", presenceOf(true, 7, 1))
	p.Update("", "t/c", presenceOf(true, 8, 1))
	if p.Len() != 3 {
		t.Errorf("%d clients, want 3", p.Len())
	}
	if got, _ := p.Lookup("t/c", ""); got.GetRoute().GetSlot() != 7 {
		t.Errorf("t/c + \"\": %v", got)
	}
	mustDeleteRecordKey(t, p, []byte("t/c"))
	if _, ok := p.Lookup("t", "c"); ok {
		t.Error("tombstone t/c left t + c")
	}
	mustDeleteRecordKey(t, p, kafka.Key("a/b", "c")) // unknown: nothing
	p.Update("a/b", "c", presenceOf(true, 1, 1))
	mustDeleteRecordKey(t, p, kafka.Key("a/b", "c"))
	if _, ok := p.Lookup("a/b", "c"); ok {
		t.Error("tombstone a%2Fb/c left a/b + c")
	}
	if err := p.deleteRecordKey([]byte("no client")); err == nil {
		t.Error("a tombstone whose key names no client: no error")
	}
	p.Delete("", "t/c")
	if p.Len() != 1 {
		t.Errorf("%d clients left, want 1", p.Len())
	}
}

// TestPresenceConcurrentWithShards runs presence updates while shards
// route through it (run with -race).
func TestPresenceConcurrentWithShards(t *testing.T) {
	p := NewPresence()
	clock := func() time.Time { return time.Unix(1_700_000_000, 0) }
	sub := func(client string) *eventspb.Envelope {
		return &eventspb.Envelope{ClientId: client, Event: &eventspb.Envelope_SubscriptionChange{SubscriptionChange: &eventspb.SubscriptionChange{
			Op: eventspb.SubscriptionChange_OP_ADD, Filter: "a/#", Options: &eventspb.SubscriptionOptions{Qos: 1},
			Route: &eventspb.Route{Slot: 1, Connection: 1, Generation: 1},
		}}}
	}
	publish := &eventspb.Envelope{ClientId: "p", Event: &eventspb.Envelope_Publish{Publish: &eventspb.Publish{
		Message: &eventspb.Message{Topic: "a/b", Payload: []byte("x"), Qos: 1},
	}}}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for g := uint64(1); ; g++ {
			select {
			case <-stop:
				return
			default:
			}
			for i := range 10 {
				p.Update("", fmt.Sprintf("c%d", i), presenceOf(g%2 == 0, int32(g%4), g))
			}
		}
	})
	var shards sync.WaitGroup
	for part := range int32(4) {
		shards.Go(func() {
			s := NewShard(part, p, clock)
			out := NewOutput()
			for i := range 10 {
				if err := s.Apply(sub(fmt.Sprintf("c%d", i)), int64(i), out); err != nil {
					t.Error(err)
				}
			}
			for off := int64(10); off < 2000; off++ {
				out.Reset()
				if err := s.Apply(publish, off, out); err != nil {
					t.Error(err)
				}
			}
		})
	}
	shards.Wait()
	close(stop)
	wg.Wait()
}
