package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/shoal-mqtt/shoal/gateway/quota"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// Tenant quotas counted across the gateways of a distributed deployment
// (quota.Shared: the counting and the sharing, and their slack). Here is
// what a gateway does for it with the log: it writes a QuotaReport per
// tenant it holds something of to shoal.quotas (compacted, key
// tenant/gateway id) every gateway.heartbeat, and as soon as Shared says
// a tenant's count moved far enough (at most every quarter heartbeat); a
// tombstone under the key once it holds nothing of the tenant, and for
// every tenant when it stops. It reads every partition of shoal.quotas
// from the start (explicit assignment, no group) and applies each report
// to Shared. Before its listeners open it waits, a bounded time, until it
// has read the reports that were there when it started, so that its
// first clients are counted with the others'.

// quotaCatchUp bounds the wait for the reports already in shoal.quotas at
// start; past it the gateway opens its listeners and reads on.
const quotaCatchUp = 5 * time.Second

// quotaLeaveTimeout bounds the write of the tombstones when the gateway
// stops.
const quotaLeaveTimeout = 2 * time.Second

// endOffsetLister is what the gateway uses of its log, when it has it
// (*kafka.Client does), to know when it has read the reports at start.
type endOffsetLister interface {
	EndOffsets(ctx context.Context, topic string) (map[int32]int64, error)
}

// shareQuotas starts, on goroutines of wg until ctx ends, the consumer of
// shoal.quotas and the report writer, and waits until the consumer has
// read what the topic held (at most quotaCatchUp).
func (g *Gateway) shareQuotas(ctx context.Context, wg *sync.WaitGroup) {
	caught := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := g.consumeQuotas(ctx, caught); err != nil && ctx.Err() == nil {
			g.log.Error("quota reports of the other gateways no longer read: tenants' limits count this gateway's clients and the reports read so far", "err", err)
		}
	}()
	go func() { defer wg.Done(); g.reportQuotas(ctx) }()
	t := time.NewTimer(quotaCatchUp)
	defer t.Stop()
	select {
	case <-caught:
	case <-t.C:
		g.log.Warn("quota reports of the other gateways not read yet; serving meanwhile", "topic", g.topics.Quotas.Name, "waited", quotaCatchUp)
	case <-ctx.Done():
	}
}

// consumeQuotas reads every partition of shoal.quotas from its start and
// applies each report, until ctx ends; it closes caught once it has read
// up to the end offsets the topic had when it started (at once when the
// log cannot tell them).
func (g *Gateway) consumeQuotas(ctx context.Context, caught chan struct{}) error {
	topic := g.topics.Quotas.Name
	parts := make([]int32, g.eventLog.Partitions(topic))
	for i := range parts {
		parts[i] = int32(i)
	}
	var ends map[int32]int64 // partitions not read up to their end yet
	if l, ok := g.eventLog.(endOffsetLister); ok {
		var err error
		if ends, err = l.EndOffsets(ctx, topic); err != nil {
			g.log.Warn("end offsets of the quota reports", "topic", topic, "err", err)
		}
	}
	for p, end := range ends {
		if end <= 0 {
			delete(ends, p)
		}
	}
	if len(ends) == 0 {
		close(caught)
	}
	return g.eventLog.Consume(ctx, kafka.ConsumeConfig{Topic: topic, Partitions: parts}, func(_ context.Context, b kafka.Batch) error {
		now := g.clock()
		for _, r := range b.Records {
			rep, err := decodeQuotaReport(r)
			if err != nil {
				g.log.Warn("quota report skipped", "partition", r.Partition, "offset", r.Offset, "err", err)
				continue
			}
			g.share.Apply(rep, now)
		}
		if end, ok := ends[b.Partition]; ok && b.Records[len(b.Records)-1].Offset+1 >= end {
			delete(ends, b.Partition)
			if len(ends) == 0 {
				close(caught)
			}
		}
		return nil
	})
}

// reportQuotas writes this gateway's reports every heartbeat, and early
// when Shared says (at most every quarter heartbeat), until ctx ends.
func (g *Gateway) reportQuotas(ctx context.Context) {
	interval := g.cfg.Heartbeat
	gap := interval / 4
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var early <-chan time.Time // an early report waiting for the gap
	var last time.Time         // when the last reports were written
	var buf []quota.Report
	write := func(all bool) {
		buf = g.share.Reports(buf[:0], g.clock(), interval, all)
		g.writeQuotaReports(ctx, buf)
		last = time.Now()
	}
	write(true) // tombstones for what an earlier run under this name held
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			write(true)
		case <-g.share.Due():
			if wait := gap - time.Since(last); wait > 0 {
				if early == nil {
					early = time.After(wait)
				}
				continue
			}
			write(false)
		case <-early:
			early = nil
			write(false)
		}
	}
}

// leaveQuotas writes a tombstone for every tenant this gateway reported:
// it stops, and the others need not wait for its reports to go stale.
func (g *Gateway) leaveQuotas() {
	reps := g.share.Leave(nil, g.clock())
	if len(reps) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), quotaLeaveTimeout)
	defer cancel()
	g.writeQuotaReports(ctx, reps)
}

// writeQuotaReports writes reps to shoal.quotas and waits for them; a
// failure is logged (the next interval writes again).
func (g *Gateway) writeQuotaReports(ctx context.Context, reps []quota.Report) {
	if len(reps) == 0 {
		return
	}
	topic := g.topics.Quotas.Name
	rs := make([]*kafka.Record, len(reps))
	for i := range reps {
		rep := &reps[i]
		key := kafka.Key(rep.Tenant, rep.Gateway)
		if rep.Gone {
			rs[i] = &kafka.Record{Topic: topic, Key: key, Partition: kafka.PartitionByKey}
			continue
		}
		rs[i] = kafka.NewRecord(topic, key, kafka.PartitionByKey, &eventspb.Envelope{
			Tenant: rep.Tenant, Gateway: rep.Gateway, TimestampUs: rep.At.UnixMicro(),
			Event: &eventspb.Envelope_QuotaReport{QuotaReport: &eventspb.QuotaReport{
				IntervalMs:     rep.Interval.Milliseconds(),
				Connections:    rep.Connections,
				Messages:       usageProto(rep.Rates[quota.Messages]),
				Bytes:          usageProto(rep.Rates[quota.Bytes]),
				ConnectionRate: usageProto(rep.Rates[quota.ConnectionRate]),
			}},
		})
	}
	if err := g.eventLog.ProduceSync(ctx, rs...); err != nil && ctx.Err() == nil {
		g.log.Warn("write quota reports", "topic", topic, "reports", len(rs), "err", err)
	}
}

// decodeQuotaReport reads a record of shoal.quotas: a QuotaReport, or a
// tombstone (Gone), of the tenant and gateway its key names.
func decodeQuotaReport(r *kafka.Record) (quota.Report, error) {
	tenant, gw, err := kafka.SplitKey(r.Key)
	if err != nil {
		return quota.Report{}, err
	}
	rep := quota.Report{Tenant: string(tenant), Gateway: string(gw)}
	if len(r.Value) == 0 {
		rep.Gone = true
		return rep, nil
	}
	var env eventspb.Envelope
	if err := kafka.DecodeEnvelope(r, &env); err != nil {
		return quota.Report{}, err
	}
	qr := env.GetQuotaReport()
	if qr == nil {
		return quota.Report{}, fmt.Errorf("a %q event, not a quota report", kafka.EnvelopeType(&env))
	}
	rep.At = time.UnixMicro(env.GetTimestampUs())
	rep.Interval = time.Duration(qr.GetIntervalMs()) * time.Millisecond
	rep.Connections = qr.GetConnections()
	rep.Rates[quota.Messages] = usageOf(qr.GetMessages())
	rep.Rates[quota.Bytes] = usageOf(qr.GetBytes())
	rep.Rates[quota.ConnectionRate] = usageOf(qr.GetConnectionRate())
	return rep, nil
}

func usageProto(u quota.Usage) *eventspb.QuotaUsage {
	if !u.Limited {
		return nil
	}
	return &eventspb.QuotaUsage{PerSecond: u.PerSecond, Saturated: u.Saturated}
}

func usageOf(u *eventspb.QuotaUsage) quota.Usage {
	if u == nil {
		return quota.Usage{}
	}
	return quota.Usage{Limited: true, PerSecond: u.GetPerSecond(), Saturated: u.GetSaturated()}
}
