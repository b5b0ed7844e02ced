package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// A Connect the session service does not answer in time gets CONNACK 0x88,
// and the gateway writes an abandoned Disconnect of that connection right
// after the Connect, in the same partition of shoal.sessions: so the
// session service ends the connection should it accept the Connect later.
func TestUnansweredConnectIsAbandoned(t *testing.T) {
	kl := startBackbone(t) // no session service: nothing answers
	cfg := DefaultConfig()
	cfg.SessionTimeout = 300 * time.Millisecond
	r := runOnBackbone(t, kl, cfg, nil)
	r.waitReady(t)

	nc, rd := r.dial(t)
	write(t, nc, &packet.Connect{Version: packet.V5, ClientID: []byte("t-1"), CleanStart: true,
		WillFlag: true, WillTopic: []byte("t/will"), WillPayload: []byte("gone")})
	if ca, ok := read(t, nc, rd, 5*time.Second).(*packet.Connack); !ok || ca.Code != packet.CodeServerUnavailable {
		t.Fatalf("got %+v, want CONNACK 0x88 (server unavailable)", ca)
	}

	p := kafka.PartitionForKey([]byte("t/t-1"), kl.Partitions(kafka.TopicSessions))
	envs := readPartition(t, kl, kafka.TopicSessions, p, func(envs []*eventspb.Envelope) bool {
		return len(envs) > 0 && envs[len(envs)-1].GetDisconnect() != nil
	})
	var connect *eventspb.Connect
	var disc *eventspb.Disconnect
	for _, env := range envs {
		switch {
		case env.GetGatewayHeartbeat() != nil:
		case env.GetConnect() != nil && connect == nil && disc == nil:
			connect = env.GetConnect()
		case env.GetDisconnect() != nil && connect != nil && disc == nil:
			disc = env.GetDisconnect()
			if env.GetTenant() != "t" || env.GetClientId() != "t-1" {
				t.Errorf("disconnect of %q/%q, want t/t-1", env.GetTenant(), env.GetClientId())
			}
		default:
			t.Errorf("unexpected record %v", env)
		}
	}
	if connect == nil || disc == nil {
		t.Fatalf("records %v, want the Connect, then a Disconnect", envs)
	}
	if !disc.GetAbandoned() || disc.GetPublishWill() || disc.GetConnection() != connect.GetRoute().GetConnection() || disc.GetGeneration() != 0 {
		t.Errorf("disconnect %v after connect %v: want abandoned, no will, connection %d, no generation",
			disc, connect, connect.GetRoute().GetConnection())
	}
}

// stallLog is a fakeLog whose ProduceSync of a Connect never completes
// (Kafka unreachable): it returns when its context ends.
type stallLog struct{ *fakeLog }

func (s stallLog) ProduceSync(ctx context.Context, rs ...*kafka.Record) error {
	for _, r := range rs {
		var env eventspb.Envelope
		if err := kafka.DecodeEnvelope(r, &env); err == nil && env.GetConnect() != nil {
			<-ctx.Done()
			return ctx.Err()
		}
	}
	return s.fakeLog.ProduceSync(ctx, rs...)
}

// A Connect whose write does not complete in time is abandoned too: the
// record may still be written once Kafka is back.
func TestStalledConnectIsAbandoned(t *testing.T) {
	fl := newFakeLog()
	cfg := DefaultConfig()
	cfg.SessionTimeout = 200 * time.Millisecond
	r := runOnBackbone(t, stallLog{fl}, cfg, nil)
	r.waitReady(t)
	nc, rd := r.dial(t)
	write(t, nc, &packet.Connect{Version: packet.V5, ClientID: []byte("t-2"), CleanStart: true})
	if ca, ok := read(t, nc, rd, 5*time.Second).(*packet.Connack); !ok || ca.Code != packet.CodeServerUnavailable {
		t.Fatalf("got %+v, want CONNACK 0x88", ca)
	}
	fl.waitProduced(t, 1)
	rec, env := fl.heldEnvelope(t, 0)
	if d := env.GetDisconnect(); d == nil || !d.GetAbandoned() || d.GetPublishWill() || string(rec.Key) != "t/t-2" ||
		rec.Topic != kafka.TopicSessions || rec.Partition != kafka.PartitionByKey {
		t.Fatalf("produced %s %q partition %d: %v; want an abandoned Disconnect keyed t/t-2 on %s", rec.Topic, rec.Key, rec.Partition, env, kafka.TopicSessions)
	}
	r.g.mu.RLock()
	n := len(r.g.waiting) + len(r.g.byID)
	r.g.mu.RUnlock()
	if n != 0 {
		t.Errorf("%d connections still waiting or registered", n)
	}
}
