package gateway

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/gateway/quota"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// quotaHeartbeat is the gateways' reporting interval in these tests.
const quotaHeartbeat = 100 * time.Millisecond

// runSharing runs gateway id on slot of kl with limits for tenant "t",
// counted with the other gateways' through shoal.quotas.
func runSharing(t *testing.T, kl *kafka.Client, id string, slot int32, limits quota.Limits) *gatewayRun {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ID, cfg.Slot, cfg.Heartbeat = id, slot, quotaHeartbeat
	r := runOnBackboneWith(t, kl, cfg, func(g *Gateway) {
		WithQuotas(quota.New(quota.Config{Tenants: map[string]quota.Limits{"t": limits}}, quota.NewShared(id)))(g)
	})
	r.waitReady(t)
	return r
}

// tenantTotal is the connections of tenant "t" as r's gateway counts
// them against max_connections.
func (r *gatewayRun) tenantTotal() int64 {
	return r.g.Quotas().Tenant("t").Stats().TenantConnections
}

// waitTotal polls until r's gateway counts want connections of tenant
// "t".
func (r *gatewayRun) waitTotal(t *testing.T, want int64) {
	t.Helper()
	eventually.OK(t, testTimeout, func() string {
		if got := r.tenantTotal(); got != want {
			return fmt.Sprintf("%s counts %d connections of the tenant, want %d", r.g.cfg.ID, got, want)
		}
		return ""
	})
}

// connackCode connects client "t-<name>" to r's gateway and returns its
// CONNACK's reason code; an accepted connection is left open.
func connackCode(t *testing.T, r *gatewayRun, name string) (packet.ReasonCode, *mqttConn) {
	t.Helper()
	nc, rd := r.dial(t)
	write(t, nc, &packet.Connect{Version: packet.V5, ClientID: []byte("t-" + name), CleanStart: true})
	ca, ok := read(t, nc, rd, testTimeout).(*packet.Connack)
	if !ok {
		t.Fatalf("connect t-%s: got %+v, want CONNACK", name, ca)
	}
	return ca.Code, &mqttConn{nc: nc, rd: rd}
}

// quotaRecords reads shoal.quotas's partition of tenant "t" and gateway id
// until stop says it has what it waits for (or the test timeout).
func quotaRecords(t *testing.T, kl *kafka.Client, id string, stop func([]*kafka.Record) bool) []*kafka.Record {
	t.Helper()
	p := kafka.PartitionForKey(kafka.Key("t", id), kl.Partitions(kafka.TopicQuotas))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var mu sync.Mutex
	var recs []*kafka.Record
	err := kl.Consume(ctx, kafka.ConsumeConfig{Topic: kafka.TopicQuotas, Partitions: []int32{p}}, func(_ context.Context, b kafka.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range b.Records {
			if string(r.Key) == "t/"+id {
				recs = append(recs, r)
			}
		}
		if stop(recs) {
			cancel()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !stop(recs) {
		t.Fatalf("shoal.quotas: %d records of t/%s within %v, not what was awaited", len(recs), id, testTimeout)
	}
	return recs
}

// lastReport decodes the last of recs; nil for a tombstone.
func lastReport(t *testing.T, recs []*kafka.Record) *eventspb.Envelope {
	t.Helper()
	r := recs[len(recs)-1]
	if r.Value == nil {
		return nil
	}
	env := new(eventspb.Envelope)
	if err := kafka.DecodeEnvelopeCopy(r, env); err != nil {
		t.Fatal(err)
	}
	return env
}

// Two gateways on one Kafka count a tenant's max_connections together
// through shoal.quotas: once each has read the other's report, both
// refuse the connection beyond the limit with 0x97; a connection that
// ends on one frees a place on the other; a gateway that starts reads
// the reports before it serves; a gateway that stops leaves tombstones;
// and the report of a gateway that goes silent stops counting after
// three of its intervals.
func TestQuotasSharedAcrossGateways(t *testing.T) {
	kl := startBackbone(t)
	answerConnects(t, kl)
	limits := quota.Limits{MaxConnections: 3}
	a := runSharing(t, kl, "gw-a", 0, limits)
	b := runSharing(t, kl, "gw-b", 1, limits)

	a1 := connectTo(t, a, "a1")
	connectTo(t, a, "a2")
	connectTo(t, b, "b1")
	a.waitTotal(t, 3)
	b.waitTotal(t, 3)
	for _, c := range []struct {
		r    *gatewayRun
		name string
	}{{a, "a3"}, {b, "b2"}} {
		if code, _ := connackCode(t, c.r, c.name); code != packet.CodeQuotaExceeded {
			t.Fatalf("a fourth connection on %s: CONNACK %#x, want 0x97 (quota exceeded)", c.r.g.cfg.ID, code)
		}
	}
	// What b read is in the topic: gw-a's report of its 2.
	recs := quotaRecords(t, kl, "gw-a", func(recs []*kafka.Record) bool {
		env := func() *eventspb.Envelope {
			if len(recs) == 0 {
				return nil
			}
			return lastReport(t, recs)
		}()
		return env.GetQuotaReport().GetConnections() == 2
	})
	if env := lastReport(t, recs); env.GetTenant() != "t" || env.GetGateway() != "gw-a" ||
		env.GetQuotaReport().GetIntervalMs() != quotaHeartbeat.Milliseconds() {
		t.Fatalf("gw-a's report: %v", env)
	}

	// a1 leaves gw-a: gw-b admits one more.
	_ = a1.nc.Close()
	b.waitTotal(t, 2)
	if code, _ := connackCode(t, b, "b2"); code != 0 {
		t.Fatalf("a connection on gw-b after one ended on gw-a: CONNACK %#x, want 0", code)
	}
	a.waitTotal(t, 3)

	// A gateway that starts has read the others' reports when it is
	// ready: it counts their 3 before any client of its own.
	c := runSharing(t, kl, "gw-c", 2, limits)
	if got := c.tenantTotal(); got != 3 {
		t.Fatalf("gw-c, ready: counts %d connections of the tenant, want the others' 3", got)
	}
	if code, _ := connackCode(t, c, "c1"); code != packet.CodeQuotaExceeded {
		t.Fatalf("a connection on gw-c at the limit: CONNACK %#x, want 0x97", code)
	}

	// gw-a stops: it writes a tombstone, and the others count without it.
	a.cancel()
	<-a.ended
	quotaRecords(t, kl, "gw-a", func(recs []*kafka.Record) bool {
		return len(recs) > 0 && recs[len(recs)-1].Value == nil
	})
	b.waitTotal(t, 2)
	c.waitTotal(t, 2)

	// A gateway that reports and goes silent (killed) counts for three of
	// its intervals from when it was read.
	silent := kafka.NewRecord(kafka.TopicQuotas, kafka.Key("t", "gw-x"), kafka.PartitionByKey, &eventspb.Envelope{
		Tenant: "t", Gateway: "gw-x", TimestampUs: time.Now().UnixMicro(),
		Event: &eventspb.Envelope_QuotaReport{QuotaReport: &eventspb.QuotaReport{IntervalMs: 300, Connections: 1}},
	})
	if err := kl.ProduceSync(context.Background(), silent); err != nil {
		t.Fatal(err)
	}
	b.waitTotal(t, 3)
	seen := time.Now()
	if code, _ := connackCode(t, b, "b3"); code != packet.CodeQuotaExceeded {
		t.Fatalf("a connection on gw-b while gw-x's report counts: CONNACK %#x, want 0x97", code)
	}
	b.waitTotal(t, 2)
	if el := time.Since(seen); el < 800*time.Millisecond {
		t.Fatalf("gw-x's report, of a 300 ms interval, stopped counting %v after gw-b read it, want about 900ms", el)
	}
}
