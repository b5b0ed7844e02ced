package gateway

import (
	"context"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// A gateway cut off from Kafka can do nothing for its clients: their
// CONNECTs are requests over the log, their QoS 1 and 2 publishes wait for
// the log before they are acknowledged, and their deliveries come from it.
// Its clients would sit on a gateway that still answers their PINGREQs
// while every other gateway could serve them. So the gateway asks its
// brokers every second whether any of them answers (kafka.Client.Reachable:
// each broker at once, so one dead or frozen broker does not count), and
// once none did for Config.KafkaTimeout it
//   - reports not ready (/readyz 503: HAProxy's health check marks it down
//     and shuts its sessions, Kubernetes takes it out of the Service),
//   - ends every connection with DISCONNECT 0x9C, use another server (3.1.1:
//     the connection is closed), so a client reconnects, through the load
//     balancer, to a gateway that reaches Kafka and resumes its session
//     there; its unacknowledged publishes are sent again as MQTT requires,
//   - refuses new CONNECTs at once with 0x88, server unavailable (3.1.1:
//     0x03), instead of letting them wait for the connect timeout.
//
// At the first answer again it is ready and accepts clients. What it had
// handed to its producer before the cut is written when the link heals
// (the producer retries without limit): nothing acknowledged is lost, and
// a publish the client sent again elsewhere may be delivered twice at QoS
// 1. The timeout outlasts a broker's failover (a leader killed: the others
// answer at once), so only a partition or a whole cluster down ends the
// connections (docs/gateway.md, "Cut off from Kafka").

// kafkaProber is a Log that can tell whether any of its brokers answers
// (*kafka.Client).
type kafkaProber interface {
	Reachable(ctx context.Context) error
}

// kafkaProbePeriod is how often the gateway asks its brokers, and how long
// it waits for an answer.
const kafkaProbePeriod = time.Second

// watchKafka probes the log until ctx ends, and takes the gateway out of
// service while no broker answered for Config.KafkaTimeout.
func (g *Gateway) watchKafka(ctx context.Context, p kafkaProber) {
	period := min(kafkaProbePeriod, g.cfg.KafkaTimeout/4)
	t := time.NewTicker(period)
	defer t.Stop()
	lastAnswer := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, period)
		err := p.Reachable(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		switch {
		case err == nil:
			lastAnswer = now
			if g.kafkaCut.Swap(false) {
				g.log.Info("kafka reachable again: ready, accepting clients", "slot", g.slot.Load())
			}
		case now.Sub(lastAnswer) >= g.cfg.KafkaTimeout && !g.kafkaCut.Load():
			g.kafkaCut.Store(true)
			conns := g.appendConns(nil)
			g.log.Warn("kafka unreachable: not ready, moving the clients to other gateways",
				"slot", g.slot.Load(), "for", now.Sub(lastAnswer).Round(time.Millisecond), "connections", len(conns), "err", err)
			for _, c := range conns {
				c.serverClose(packet.CodeUseAnotherServer)
			}
		}
	}
}
