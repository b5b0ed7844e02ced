package load

import (
	"fmt"
	"sync"
	"time"
)

// monitor samples the run every second: a Point of the series, a progress
// line, and the broker's peak RSS.
type monitor struct {
	r      *runner
	mu     sync.Mutex
	phase  string
	stopCh chan struct{}
	doneCh chan struct{}

	// Owned by the monitor goroutine until doneCh is closed.
	series       []Point
	brokerRSSMax uint64
}

func (r *runner) startMonitor() *monitor {
	m := &monitor{r: r, phase: "warmup", stopCh: make(chan struct{}), doneCh: make(chan struct{})}
	if r.cfg.Scenario == ScenarioConnections {
		m.phase = "connect"
	}
	go m.loop()
	return m
}

func (m *monitor) setPhase(p string) {
	m.mu.Lock()
	m.phase = p
	m.mu.Unlock()
}

func (m *monitor) getPhase() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.phase
}

// stopAndWait ends the monitor; its series and peak are then readable.
func (m *monitor) stopAndWait() {
	close(m.stopCh)
	<-m.doneCh
}

func (m *monitor) loop() {
	defer close(m.doneCh)
	r := m.r
	t := time.NewTicker(time.Second)
	defer t.Stop()
	prevAt := r.now()
	prevSent, prevRecv := r.totals()
	prevBroker := r.sampleBroker()
	prevSelf, _ := r.self.Sample()
	// sample appends the point since the previous one. The last point, at
	// the stop, covers what is left of a second, so that a run shorter
	// than a second still has a series.
	sample := func() {
		at := r.now()
		dt := (at - prevAt).Seconds()
		sent, recv := r.totals()
		p := Point{
			T:     (at - r.t0).Seconds(),
			Phase: m.getPhase(),
			// A publisher whose last flush failed takes back what it
			// had counted as sent: its total can go down.
			Sent:     sent - min(prevSent, sent),
			Received: recv - min(prevRecv, recv),
		}
		if b := r.sampleBroker(); b != nil {
			p.BrokerRSS = b.RSS
			m.brokerRSSMax = max(m.brokerRSSMax, b.RSS)
			if prevBroker != nil && dt > 0 {
				p.BrokerCPU = 100 * (b.CPU - prevBroker.CPU).Seconds() / dt
			}
			prevBroker = b
		}
		if s, err := r.self.Sample(); err == nil {
			if dt > 0 {
				p.GenCPU = 100 * (s.CPU - prevSelf.CPU).Seconds() / dt
			}
			prevSelf = s
		}
		if r.cfg.Scenario == ScenarioConnections {
			p.Connected, p.Alive = r.connCounts()
		}
		m.series = append(m.series, p)
		m.print(p, sent, recv, dt)
		prevAt, prevSent, prevRecv = at, sent, recv
	}
	for {
		select {
		case <-m.stopCh:
			if r.now()-prevAt >= minFinalSample {
				sample()
			}
			return
		case <-t.C:
			sample()
		}
	}
}

// minFinalSample is the shortest stretch the stop's last point covers:
// shorter ones say nothing about a rate.
const minFinalSample = 50 * time.Millisecond

func (m *monitor) print(p Point, sent, recv uint64, dt float64) {
	r := m.r
	name := r.cfg.Scenario
	if r.cfg.Name != "" {
		name = r.cfg.Name
	}
	if r.cfg.Label != "" {
		name += " " + r.cfg.Label
	}
	broker := ""
	if p.BrokerRSS > 0 {
		broker = fmt.Sprintf(" broker cpu %3.0f%% rss %s", p.BrokerCPU, mib(p.BrokerRSS))
	}
	if r.cfg.Scenario == ScenarioConnections {
		fmt.Fprintf(r.progress, "[%s] %4.0fs %-7s connected %d alive %d%s gen cpu %3.0f%%\n",
			name, p.T, p.Phase, p.Connected, p.Alive, broker, p.GenCPU)
		return
	}
	fmt.Fprintf(r.progress, "[%s] %4.0fs %-7s sent %7.0f/s recv %8.0f/s total sent %d recv %d%s gen cpu %3.0f%%\n",
		name, p.T, p.Phase, float64(p.Sent)/dt, float64(p.Received)/dt, sent, recv, broker, p.GenCPU)
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
