package load

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// OfflineStats is the offline scenario's account: the messages queued for
// sessions that were offline, and their delivery when the sessions came
// back.
type OfflineStats struct {
	Sessions int `json:"sessions"`
	// Queued is the messages published (and acknowledged) while the
	// subscribers were offline; QueueSec from the first publish to the
	// last acknowledgement.
	Queued       uint64  `json:"queued"`
	Unacked      uint64  `json:"unacknowledged,omitempty"`
	QueueSec     float64 `json:"queue_s"`
	QueuedPerSec float64 `json:"queued_per_s"`
	// Resumed is the subscribers whose CONNACK said Session Present.
	Resumed int `json:"resumed"`
	// ReconnectSec is how long the subscribers took to connect again;
	// DeliverSec from the first of those connects to the last delivery.
	ReconnectSec    float64 `json:"reconnect_s"`
	Delivered       uint64  `json:"delivered"`
	DeliverSec      float64 `json:"deliver_s"`
	DeliveredPerSec float64 `json:"delivered_per_s"`
	// FirstDelivery is, per subscriber, the time from its CONNACK to the
	// first queued message (µs): how long a device that comes back waits
	// before its backlog starts to arrive.
	FirstDelivery *LatencySummary `json:"first_delivery_us,omitempty"`
	// BrokerCPUQueueUs is the broker's CPU-µs per queued message, from the
	// first publish to the end of the settle after the last
	// acknowledgement; BrokerCPUDeliverUs per delivered message, from the
	// subscribers' return to the end of the settle after the last
	// delivery (their reconnects included). With Config.BrokerPID only.
	BrokerCPUQueueUs   float64 `json:"broker_cpu_us_per_queued,omitempty"`
	BrokerCPUDeliverUs float64 `json:"broker_cpu_us_per_delivered,omitempty"`
}

// cpuPer returns the CPU-µs between two samples per n, 0 without them.
func cpuPer(a, b *ProcSample, n uint64) float64 {
	if a == nil || b == nil || n == 0 {
		return 0
	}
	return (b.CPU - a.CPU).Seconds() * 1e6 / float64(n)
}

// runOffline runs the offline scenario on the pairs plan: every
// subscriber starts a persistent session, subscribes and disconnects,
// keeping it; after the warm-up (the broker has the sessions offline)
// every publisher sends cfg.Queued messages, which the broker must keep
// for the offline sessions; once all are acknowledged and a warm-up more
// has passed, the subscribers connect again with Clean Start 0 and receive
// the backlog, until all of it arrived, nothing came for the drain time,
// or the duration passed.
func (r *runner) runOffline(ctx context.Context, res *Result) error {
	stage := func(name string) {
		if r.cfg.OnStage != nil {
			r.cfg.OnStage(name)
		}
	}
	r.limit = uint32(r.cfg.Queued)
	r.build()
	setup, cancel := context.WithTimeout(ctx, r.cfg.SetupTimeout)
	defer cancel()
	failed := r.connectAll(len(r.subs), func(i int) error {
		s := r.subs[i]
		dc := r.dialConfig(r.subAddrs[i%len(r.subAddrs)], s.spec.clientID, idleBuf, idleBuf)
		dc.EndSession = false
		c, err := dial(setup, dc)
		if err != nil {
			return err
		}
		defer c.close() // a DISCONNECT that keeps the session
		if err := c.subscribe(setup, s.spec.filters, r.cfg.QoS); err != nil {
			return fmt.Errorf("subscribe %s: %w", s.spec.clientID, err)
		}
		return nil
	})
	if failed > 0 {
		return fmt.Errorf("set up: %d of %d subscribers failed to start their sessions", failed, len(r.subs))
	}
	if err := r.connectPublishers(setup); err != nil {
		r.closeAll(true)
		r.waitReaders()
		return err
	}
	cancel()
	st := &OfflineStats{Sessions: len(r.subs)}
	res.Offline = st
	mon := r.startMonitor()
	mon.setPhase("settle")
	if !Sleep(ctx, r.cfg.Warmup) {
		mon.stopAndWait()
		r.tally(res)
		return fmt.Errorf("run cut short before publishing: %w", ctx.Err())
	}

	stage("queue")
	b0 := r.sampleBroker()
	mon.setPhase("queue")
	r.t0 = r.now()
	var wg sync.WaitGroup
	for _, p := range r.pubs {
		wg.Go(func() { r.publishLoop(p, 0, 0) })
	}
	bound := time.Now().Add(r.cfg.Duration)
	wg.Wait()
	for _, p := range r.pubs {
		for len(p.c.slots) > 0 && p.c.alive() && time.Now().Before(bound) {
			if !Sleep(ctx, 5*time.Millisecond) {
				break
			}
		}
	}
	queued := r.now()
	for _, p := range r.pubs {
		sent, acked := p.sent.Load(), p.c.acked.Load()
		st.Queued += min(sent, acked)
		st.Unacked += sent - min(sent, acked)
	}
	st.QueueSec = (queued - r.t0).Seconds()
	if st.QueueSec > 0 {
		st.QueuedPerSec = float64(st.Queued) / st.QueueSec
	}
	mon.setPhase("settle")
	ok := Sleep(ctx, r.cfg.Warmup)

	if ok {
		b1 := r.sampleBroker()
		st.BrokerCPUQueueUs = cpuPer(b0, b1, st.Queued)
		stage("deliver")
		b1 = r.sampleBroker()
		mon.setPhase("deliver")
		back := r.now()
		setup, cancel := context.WithTimeout(ctx, r.cfg.SetupTimeout)
		err := r.connectSubscribers(setup, true)
		cancel()
		st.ReconnectSec = (r.now() - back).Seconds()
		st.Resumed = int(r.resumed.Load())
		if err != nil {
			r.addErr(err)
		}
		r.waitBacklog(ctx, time.Now().Add(r.cfg.Duration))
		var last time.Duration
		firsts := newHistShards(1)
		for _, s := range r.subs {
			st.Delivered += s.recv.Load()
			last = max(last, time.Duration(s.last.Load()))
			if f := time.Duration(s.first.Load()); f > 0 {
				firsts.record(0, int64(f-s.back))
			}
		}
		if st.FirstDelivery = summarize(firsts.merged()); st.FirstDelivery != nil {
			st.FirstDelivery.CDF = nil
		}
		if last > back {
			st.DeliverSec = (last - back).Seconds()
			st.DeliveredPerSec = float64(st.Delivered) / st.DeliverSec
		}
		mon.setPhase("settle")
		ok = Sleep(ctx, r.cfg.Warmup) // the acknowledgements applied
		if ok {
			st.BrokerCPUDeliverUs = cpuPer(b1, r.sampleBroker(), st.Delivered)
			stage("end")
		}
	}
	mon.stopAndWait()
	res.Series = mon.series
	r.tally(res)
	res.Measured = Window{Seconds: st.DeliverSec, Sent: st.Queued, Deliveries: st.Delivered, DeliveriesPerSec: st.DeliveredPerSec}
	if !ok {
		return fmt.Errorf("run cut short before the backlog was delivered: %w", ctx.Err())
	}
	if st.Unacked > 0 {
		r.addErr(fmt.Errorf("%d of the queued publishes not acknowledged within %s", st.Unacked, r.cfg.Duration))
	}
	if st.Resumed < len(r.subs) {
		r.addErr(fmt.Errorf("%d of %d sessions not present when their subscribers came back", len(r.subs)-st.Resumed, len(r.subs)))
	}
	return nil
}

// waitBacklog waits for the queued messages: until every expected delivery
// arrived, nothing arrived for the drain time (counted from the first
// delivery, or from the call while none came), or until.
func (r *runner) waitBacklog(ctx context.Context, until time.Time) {
	want := r.expected()
	_, last := r.totals()
	lastChange := time.Now()
	for time.Now().Before(until) {
		_, recv := r.totals()
		if recv >= want {
			return
		}
		if recv != last {
			last, lastChange = recv, time.Now()
		} else if time.Since(lastChange) > r.cfg.Drain {
			return
		}
		if !Sleep(ctx, 10*time.Millisecond) {
			return
		}
	}
}
