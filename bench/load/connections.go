package load

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// connCounts returns how many idle connections are up and how many of
// them are still alive.
func (r *runner) connCounts() (connected, alive int) {
	for _, c := range r.snapshotConns() {
		connected++
		if c.alive() {
			alive++
		}
	}
	return connected, alive
}

// runConnections opens cfg.Clients idle connections (the connect rate and
// CONNECT → CONNACK latency), lets the broker settle for the warm-up, holds
// them for the duration, and reads the broker's RSS before and after: RSS
// per connection is the growth divided by the connections.
func (r *runner) runConnections(ctx context.Context, res *Result) error {
	n := r.plan.idle
	before := r.sampleBroker()
	r.t0 = r.now()
	mon := r.startMonitor()
	setup, cancel := context.WithTimeout(ctx, r.cfg.SetupTimeout)
	defer cancel()
	lat := newHistShards(8)
	var connected, present atomic.Int64
	failed := r.connectAll(n, func(i int) error {
		start := r.now()
		c, err := dial(setup, r.dialConfig(r.pubAddrs[i%len(r.pubAddrs)], fmt.Sprintf("%s-c-%d", r.cfg.Prefix, i), idleBuf, idleBuf))
		if err != nil {
			return err
		}
		lat.record(i, int64(r.now()-start))
		connected.Add(1)
		if c.sessionPresent {
			present.Add(1)
		}
		r.register(c)
		if r.cfg.Subscriptions == 0 {
			c.start()
		}
		return nil
	})
	connectSecs := (r.now() - r.t0).Seconds()
	afterConnect := r.sampleBroker()
	cs := &ConnectStats{
		Attempted: n,
		Connected: int(connected.Load()),
		Failed:    failed,
		Seconds:   connectSecs,
		Latency:   summarize(lat.merged()),

		SessionPresent: int(present.Load()),
	}
	if connectSecs > 0 {
		cs.PerSec = float64(cs.Connected) / connectSecs
	}
	if before != nil && afterConnect != nil {
		cs.CPUSeconds = (afterConnect.CPU - before.CPU).Seconds()
		if cs.Connected > 0 {
			cs.CPUPerConnUs = cs.CPUSeconds * 1e6 / float64(cs.Connected)
		}
	}
	res.Connect = cs
	if r.cfg.Subscriptions > 0 {
		mon.setPhase("subscribe")
		r.subscribeAll(ctx, cs)
	}

	mon.setPhase("settle")
	ok := Sleep(ctx, r.cfg.Warmup)
	var held, end windowMark
	if ok {
		if r.cfg.Subscriptions > 0 && r.cfg.OnStage != nil {
			r.cfg.OnStage("hold")
		}
		held = r.mark()
		if r.cfg.OnMeasure != nil {
			r.cfg.OnMeasure(r.cfg.Duration)
		}
		mon.setPhase("hold")
		ok = Sleep(ctx, r.cfg.Duration)
		end = r.mark()
	}
	mon.stopAndWait()
	res.Series = mon.series
	_, cs.AliveAtEnd = r.connCounts()
	for _, c := range r.snapshotConns() {
		if err := c.lostErr(); err != nil {
			res.LostConns++
			r.addErr(fmt.Errorf("idle connection lost: %w", err))
		}
	}
	closeStart := time.Now()
	r.closeAll(true)
	r.waitReaders()
	if d := time.Since(closeStart); d > 5*time.Second {
		r.addErr(fmt.Errorf("closing %d connections took %s", cs.Connected, d.Round(time.Millisecond)))
	}
	if !ok {
		return fmt.Errorf("run cut short before the end of the hold: %w", ctx.Err())
	}
	res.Measured.Seconds = (end.at - held.at).Seconds()
	res.Generator = usage(held.self, end.self, res.Measured.Seconds, 0)
	if before != nil && end.broker != nil {
		res.Broker = &ProcUsage{
			PID:      r.cfg.BrokerPID,
			RSSStart: before.RSS,
			RSSEnd:   end.broker.RSS,
			RSSMax:   max(before.RSS, end.broker.RSS, mon.brokerRSSMax),
		}
		if held.broker != nil {
			res.Broker.CPUSeconds = (end.broker.CPU - held.broker.CPU).Seconds()
			res.Broker.CPUPercent = 100 * res.Broker.CPUSeconds / res.Measured.Seconds
		}
		base := before.RSS
		if r.cfg.BrokerRSSBase > 0 {
			base = r.cfg.BrokerRSSBase
		}
		if cs.Connected > 0 && end.broker.RSS > base {
			res.Broker.RSSPerConnection = float64(end.broker.RSS-base) / float64(cs.Connected)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d connections failed", failed, n)
	}
	return nil
}

// subscriptionFilter is connection i's filter j of the connections
// scenario: its own topic, or with wildcards a '+' level below it.
func subscriptionFilter(prefix string, i, j int, wildcard bool) string {
	if wildcard {
		return fmt.Sprintf("%s/sub/%d/%d/+", prefix, i, j)
	}
	return fmt.Sprintf("%s/sub/%d/%d", prefix, i, j)
}

// subscribeAll sends, on every connection, cfg.Subscriptions SUBSCRIBEs of
// one filter each, one after another, and then starts its reader.
func (r *runner) subscribeAll(ctx context.Context, cs *ConnectStats) {
	if r.cfg.OnStage != nil {
		r.cfg.OnStage("subscribe")
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.SetupTimeout)
	defer cancel()
	before := r.sampleBroker()
	conns := r.snapshotConns()
	lat := newHistShards(8)
	var subscribed atomic.Int64
	start := r.now()
	r.connectAll(len(conns), func(i int) error {
		c := conns[i]
		defer c.start()
		for j := range r.cfg.Subscriptions {
			t := r.now()
			if err := c.subscribe(ctx, []string{subscriptionFilter(r.cfg.Prefix, i, j, r.cfg.WildcardFilters)}, r.cfg.QoS); err != nil {
				return fmt.Errorf("connection %d, filter %d: %w", i, j, err)
			}
			lat.record(i, int64(r.now()-t))
			subscribed.Add(1)
		}
		return nil
	})
	cs.Subscribed = int(subscribed.Load())
	cs.SubscribeSec = (r.now() - start).Seconds()
	if cs.SubscribeSec > 0 {
		cs.SubscribePerSec = float64(cs.Subscribed) / cs.SubscribeSec
	}
	if cs.SubscribeLatency = summarize(lat.merged()); cs.SubscribeLatency != nil {
		cs.SubscribeLatency.CDF = nil
	}
	cs.SubscribeCPUPerSubUs = cpuPer(before, r.sampleBroker(), uint64(cs.Subscribed))
}
