package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// The brokers of the throughput part.
const (
	brokerMosquitto   = "mosquitto"
	brokerShoal       = "shoal"        // shoal all without mappings
	brokerShoalBridge = "shoal-bridge" // shoal all bridging every message
)

var throughputBrokers = []string{brokerMosquitto, brokerShoal, brokerShoalBridge}

// throughputScenario is one of scripts/bench-compare.sh's saturating
// scenarios.
type throughputScenario struct {
	name     string
	qos      packet.QoS
	window   int // end-to-end window per publisher (0: none)
	inflight int
}

var throughputScenarios = []throughputScenario{
	{name: "pairs-qos0", qos: 0, window: 100, inflight: 64},
	{name: "pairs-qos1", qos: 1, inflight: 64},
}

// outYAML is the out mapping that bridges every message of the tenant of
// the generator's clients ("bench": a client's tenant is its id up to the
// first '-', and the generator's ids are bench-…).
const outYAML = `log_level: info
bridges:
  kafka:
    instance_id: bench
    out:
      - name: all
        tenant: bench
        mqtt_filter: "#"
        kafka_topic: "bench.out"
        key: "{topic}"
`

// bridgedTopic is the topic outYAML writes.
const bridgedTopic = "bench.out"

// throughputRun is one run of the throughput part.
type throughputRun struct {
	Scenario string `json:"scenario"`
	Broker   string `json:"broker"`
	Round    int    `json:"round"`
	// The generator's figures over the measured window; its whole result
	// is in Result (a file of the output directory).
	DeliveriesPerSec    float64 `json:"deliveries_per_s"`
	SentPerSec          float64 `json:"sent_per_s"`
	BrokerCPUPercent    float64 `json:"broker_cpu_percent"`
	DeliveriesPerCPUSec float64 `json:"deliveries_per_cpu_s"`
	Sent                uint64  `json:"sent"`
	Lost                uint64  `json:"lost"`
	Undelivered         uint64  `json:"undelivered"`
	Duplicates          uint64  `json:"duplicates"`
	Result              string  `json:"result"`
	// Bridge is what the bridge did (shoal-bridge only).
	Bridge *bridgeWindow `json:"bridge,omitempty"`
}

// bridgeWindow is the bridge's part of a throughput run, from Shoal's
// /metrics read at the edges of the measured window, and the topic read
// at the end.
type bridgeWindow struct {
	// Records is what the bridge wrote in the measured window, and
	// Received the PUBLISH the gateway received in it.
	Records          uint64  `json:"records"`
	RecordsPerSec    float64 `json:"records_per_s"`
	Received         uint64  `json:"received"`
	ReceivedPerSec   float64 `json:"received_per_s"`
	ScrapeSkewMillis float64 `json:"scrape_skew_ms"` // how far the scrapes were from the window's edges
	// LagAtEnd is the messages received and not yet bridged at the end
	// of the window (one scrape: the gateway's count minus the bridge's).
	LagAtEnd int64 `json:"lag_at_end"`
	// LagMetricAtEnd is shoal.bridge.lag as read then: the bridge measures
	// it every 5 s, so it may be that old; nil before the first measure.
	LagMetricAtEnd *float64 `json:"lag_metric_at_end,omitempty"`
	// CaughtUpSec is how long after the end of the window the bridge had
	// written a record for every message received; nil if it had not by
	// the end of the wait (CaughtUpWaitSec).
	CaughtUpSec     *float64 `json:"caught_up_s,omitempty"`
	CaughtUpWaitSec float64  `json:"caught_up_wait_s"`
	// TotalReceived is the gateway's count when the bridge had caught up
	// (or the wait ended); TotalRecords the bridge's; TopicRecords the
	// committed records of the topic read by kcat then.
	TotalReceived uint64 `json:"total_received"`
	TotalRecords  uint64 `json:"total_records"`
	TopicRecords  uint64 `json:"topic_records"`
	Errors        string `json:"errors,omitempty"`
}

// runThroughput runs every scenario on every broker for opt.rounds
// rounds; the brokers' order rotates each round.
func runThroughput(ctx context.Context, h *harness, opt options, clk *clock, stdout io.Writer) ([]throughputRun, error) {
	var runs []throughputRun
	for round := 1; round <= opt.rounds; round++ {
		for _, sc := range throughputScenarios {
			order := make([]string, len(throughputBrokers))
			for i := range throughputBrokers {
				order[i] = throughputBrokers[(i+round-1)%len(throughputBrokers)]
			}
			for _, b := range order {
				r, err := throughputOnce(ctx, h, opt, clk, sc, b, round)
				if err != nil {
					return runs, fmt.Errorf("%s on %s, round %d: %w", sc.name, b, round, err)
				}
				writeThroughputLine(stdout, r)
				runs = append(runs, r)
			}
		}
	}
	return runs, nil
}

// throughputOnce runs scenario sc on a fresh broker.
func throughputOnce(ctx context.Context, h *harness, opt options, clk *clock, sc throughputScenario, which string, round int) (run throughputRun, err error) {
	name := fmt.Sprintf("%s-%s-r%d", sc.name, which, round)
	fmt.Fprintf(h.stderr, "throughput: %s\n", name)
	var b *broker
	switch which {
	case brokerMosquitto:
		b, err = h.startMosquitto(ctx, name)
	case brokerShoal:
		b, err = h.startShoalAll(ctx, name, "log_level: info\n")
	default:
		b, err = h.startShoalAll(ctx, name, outYAML)
	}
	if err != nil {
		return run, err
	}
	defer func() { err = errors.Join(err, b.stop()) }()

	cfg := load.DefaultConfig()
	cfg.Addr = b.mqtt
	cfg.Scenario = load.ScenarioPairs
	cfg.Clients, cfg.Payload = 50, 64
	cfg.QoS, cfg.Window, cfg.Inflight = sc.qos, sc.window, sc.inflight
	cfg.Warmup, cfg.Duration, cfg.Drain = opt.warmup, opt.duration, opt.drain
	cfg.Prefix = "bench"
	cfg.BrokerPID = b.pid()
	cfg.Name, cfg.Label, cfg.Round = sc.name, which, round

	var watch *windowWatch
	if which == brokerShoalBridge {
		watch = &windowWatch{s: newScraper(b.metricsURL(), clk.since), wait: 2 * time.Minute}
		cfg.OnMeasure = func(d time.Duration) { watch.start(ctx, d) }
	}
	res, runErr := load.Run(ctx, cfg, io.Discard)
	if res != nil {
		file := name + ".json"
		if werr := writeJSON(filepath.Join(h.outDir, file), res); werr != nil {
			runErr = errors.Join(runErr, werr)
		}
		run = throughputRun{Scenario: sc.name, Broker: which, Round: round, Result: file,
			DeliveriesPerSec: res.Measured.DeliveriesPerSec, SentPerSec: res.Measured.SentPerSec,
			Sent: res.Sent, Lost: res.Lost, Undelivered: res.Tail, Duplicates: res.Duplicates}
		if res.Broker != nil {
			run.BrokerCPUPercent, run.DeliveriesPerCPUSec = res.Broker.CPUPercent, res.Broker.DeliveriesPerCPUSecond
		}
	}
	if runErr != nil {
		return run, runErr
	}
	if watch != nil {
		bw := watch.result()
		n, cerr := h.countTopic(ctx, b, bridgedTopic)
		bw.TopicRecords = n
		if cerr != nil {
			bw.Errors = joinText(bw.Errors, cerr.Error())
		}
		run.Bridge = bw
	}
	return run, b.alive()
}

// windowWatch scrapes the bridge's /metrics at the edges of the measured
// window, then until it has caught up.
type windowWatch struct {
	s    *scraper
	wait time.Duration // longest wait for the catch-up

	wg  sync.WaitGroup
	bw  bridgeWindow
	err []string
}

// start is the generator's OnMeasure: it must return at once.
func (w *windowWatch) start(ctx context.Context, d time.Duration) {
	t0 := w.s.clock()
	w.wg.Go(func() {
		first, err := w.s.scrape(ctx)
		if err != nil {
			w.err = append(w.err, err.Error())
			return
		}
		if !load.Sleep(ctx, t0+d-w.s.clock()) {
			return
		}
		last, err := w.s.scrape(ctx)
		if err != nil {
			w.err = append(w.err, err.Error())
			return
		}
		secs := (last.at - first.at).Seconds()
		w.bw.Records = uint64(last.records - first.records)
		w.bw.Received = uint64(last.received - first.received)
		w.bw.RecordsPerSec = float64(w.bw.Records) / secs
		w.bw.ReceivedPerSec = float64(w.bw.Received) / secs
		w.bw.ScrapeSkewMillis = float64(max(first.at-t0, last.at-(t0+d)).Microseconds()) / 1000
		w.bw.LagAtEnd = int64(last.received) - int64(last.records)
		if last.hasLag {
			v := last.lag
			w.bw.LagMetricAtEnd = &v
		}
		w.bw.CaughtUpWaitSec = w.wait.Seconds()
		end := last.at
		for cur := last; ; {
			w.bw.TotalReceived, w.bw.TotalRecords = uint64(cur.received), uint64(cur.records)
			if cur.records >= cur.received {
				v := (cur.at - end).Seconds()
				w.bw.CaughtUpSec = &v
				return
			}
			if cur.at-end > w.wait || !load.Sleep(ctx, 100*time.Millisecond) {
				return
			}
			if cur, err = w.s.scrape(ctx); err != nil {
				w.err = append(w.err, err.Error())
				return
			}
		}
	})
}

// result waits for the watch and returns what it saw.
func (w *windowWatch) result() *bridgeWindow {
	w.wg.Wait()
	bw := w.bw
	for _, e := range w.err {
		bw.Errors = joinText(bw.Errors, e)
	}
	return &bw
}

func joinText(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func writeThroughputLine(w io.Writer, r throughputRun) {
	fmt.Fprintf(w, "%s on %s, round %d: %.0f deliveries/s, broker %.0f%% CPU, %.0f deliveries/CPU-s, %d lost, %d undelivered",
		r.Scenario, r.Broker, r.Round, r.DeliveriesPerSec, r.BrokerCPUPercent, r.DeliveriesPerCPUSec, r.Lost, r.Undelivered)
	if bw := r.Bridge; bw != nil {
		fmt.Fprintf(w, "; bridge %d records in the window (%.0f/s, %.0f received/s), lag %d at its end",
			bw.Records, bw.RecordsPerSec, bw.ReceivedPerSec, bw.LagAtEnd)
		if bw.CaughtUpSec != nil {
			fmt.Fprintf(w, ", caught up %.1fs after it", *bw.CaughtUpSec)
		} else {
			fmt.Fprintf(w, ", not caught up %.0fs after it", bw.CaughtUpWaitSec)
		}
		fmt.Fprintf(w, ", %d records in %s (%d received)", bw.TopicRecords, bridgedTopic, bw.TotalReceived)
	}
	fmt.Fprintln(w)
}
