package gateway

import (
	"context"
	"strconv"
	"time"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// tenantStats returns the counters of one tenant, creating them.
func (g *Gateway) tenantStats(tenant string) *Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.tenants[tenant]
	if s == nil {
		s = new(Stats)
		g.tenants[tenant] = s
	}
	return s
}

// sysLoop publishes the $SYS/broker topics every interval, for every tenant
// this gateway has seen, with that tenant's own counters (a tenant never
// sees another's activity): retained, QoS 0, through the log like any
// message, so $SYS subscribers use ordinary subscriptions.
func (g *Gateway) sysLoop(ctx context.Context, version string) {
	if g.cfg.SysInterval <= 0 {
		return
	}
	start := g.clock()
	t := time.NewTicker(g.cfg.SysInterval)
	defer t.Stop()
	for {
		g.publishSys(ctx, version, start)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (g *Gateway) publishSys(ctx context.Context, version string, start time.Time) {
	now := g.clock()
	g.mu.RLock()
	tenants := make(map[string]*Stats, len(g.tenants))
	for k, v := range g.tenants {
		tenants[k] = v
	}
	g.mu.RUnlock()
	uptime := strconv.FormatInt(int64(now.Sub(start)/time.Second), 10)
	for tenant, s := range tenants {
		for _, kv := range [...]struct{ topic, value string }{
			{"$SYS/broker/version", "shoal " + version},
			{"$SYS/broker/uptime", uptime + " seconds"},
			{"$SYS/broker/clients/connected", itoa(s.Load(ConnectionsCurrent))},
			{"$SYS/broker/clients/total", itoa(s.Load(ConnectionsTotal))},
			{"$SYS/broker/messages/received", itoa(s.Load(MessagesReceived))},
			{"$SYS/broker/messages/sent", itoa(s.Load(MessagesSent))},
			{"$SYS/broker/bytes/received", itoa(s.Load(BytesReceived))},
			{"$SYS/broker/bytes/sent", itoa(s.Load(BytesSent))},
			{"$SYS/broker/messages/dropped", itoa(s.Load(Dropped))},
		} {
			rec := kafka.NewRecord(g.topics.Messages.Name, kafka.Key(tenant, kv.topic), -1, &eventspb.Envelope{
				Tenant:      tenant,
				Gateway:     g.cfg.ID,
				TimestampUs: now.UnixMicro(),
				MessageId:   g.nextMessageID(),
				Event: &eventspb.Envelope_Publish{Publish: &eventspb.Publish{Message: &eventspb.Message{
					Topic: kv.topic, Payload: []byte(kv.value), Retain: true, PayloadUtf8: true,
				}}},
			})
			g.eventLog.Produce(ctx, rec, func(_ *kafka.Record, err error) {
				if err != nil && ctx.Err() == nil {
					g.log.Warn("publish $SYS", "topic", kv.topic, "err", err)
				}
			})
		}
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
