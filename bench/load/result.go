package load

import (
	"math"
	"sync"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Result is what one run measured; it is written as JSON.
type Result struct {
	// Name labels the run in a comparison (e.g. "pairs-qos0"); Label the
	// broker (e.g. "shoal", "mosquitto"); Round the round number.
	Name  string `json:"name,omitempty"`
	Label string `json:"label,omitempty"`
	Round int    `json:"round,omitempty"`

	Scenario string `json:"scenario"`
	Addr     string `json:"addr"`
	// SubscriberAddr is where the subscribers connected when not to Addr.
	SubscriberAddr string  `json:"subscriber_addr,omitempty"`
	Protocol       string  `json:"protocol"`
	QoS            int     `json:"qos"`
	PayloadBytes   int     `json:"payload_bytes"`
	Publishers     int     `json:"publishers"`
	Subscribers    int     `json:"subscribers"`
	Connections    int     `json:"connections"`
	Rate           float64 `json:"rate"` // messages/s in total; 0 = unpaced
	Inflight       int     `json:"inflight,omitempty"`
	Window         int     `json:"window,omitempty"`
	WarmupSec      float64 `json:"warmup_s"`
	DurationSec    float64 `json:"duration_s"`
	Started        string  `json:"started"` // RFC 3339
	ElapsedSec     float64 `json:"elapsed_s"`

	// Whole run (warm-up, measured window and drain).
	Sent     uint64 `json:"sent"`
	Expected uint64 `json:"expected"` // sum over messages sent of their subscribers
	Received uint64 `json:"received"` // deliveries, duplicates included
	TrackCounts
	Malformed uint64 `json:"malformed,omitempty"` // payloads without a stamp
	Foreign   uint64 `json:"foreign,omitempty"`   // from a publisher the subscriber should not hear
	Refused   uint64 `json:"refused,omitempty"`   // PUBACK/PUBREC with a failure code
	LostConns uint64 `json:"lost_connections,omitempty"`

	Measured Window          `json:"measured"`
	Latency  *LatencySummary `json:"latency_us,omitempty"`
	// SendLag is, at a fixed rate, how late the generator sent messages
	// after their scheduled time (it is part of Latency, which counts from
	// the scheduled time): a large value means the generator, not the
	// broker, was short of CPU.
	SendLag   *LatencySummary `json:"send_lag_us,omitempty"`
	Broker    *ProcUsage      `json:"broker,omitempty"`
	Generator *ProcUsage      `json:"generator,omitempty"`
	// Processes are Config.Processes over the measured window, in order.
	Processes []ProcUsage `json:"processes,omitempty"`
	// LoadAvg is the machine's load average at the edges of the measured
	// window: how busy the shared machine was.
	LoadAvg *LoadAvg      `json:"loadavg,omitempty"`
	Connect *ConnectStats `json:"connect,omitempty"`
	Offline *OfflineStats `json:"offline,omitempty"`
	Series  []Point       `json:"series"`
	Errors  []string      `json:"errors,omitempty"`
	ErrorsN int           `json:"errors_total,omitempty"`
}

// Window is what happened in the measured window (after the warm-up).
type Window struct {
	Seconds          float64 `json:"seconds"`
	Sent             uint64  `json:"sent"`
	Deliveries       uint64  `json:"deliveries"`
	SentPerSec       float64 `json:"sent_per_s"`
	DeliveriesPerSec float64 `json:"deliveries_per_s"`
}

// ProcUsage is a process's CPU and memory during the measured window (for
// the connections scenario: while connecting, and RSS after).
type ProcUsage struct {
	Name                   string  `json:"name,omitempty"`
	PID                    int     `json:"pid,omitempty"`
	CPUSeconds             float64 `json:"cpu_s"`
	CPUPercent             float64 `json:"cpu_percent"`
	DeliveriesPerCPUSecond float64 `json:"deliveries_per_cpu_s,omitempty"`
	RSSStart               uint64  `json:"rss_start_bytes"`
	RSSEnd                 uint64  `json:"rss_end_bytes"`
	RSSMax                 uint64  `json:"rss_max_bytes"`
	RSSPerConnection       float64 `json:"rss_per_connection_bytes,omitempty"`
}

// LoadAvg is /proc/loadavg's 1, 5 and 15 minute load averages read at
// the start and the end of the measured window.
type LoadAvg struct {
	Start [3]float64 `json:"start"`
	End   [3]float64 `json:"end"`
}

// ConnectStats is the connections scenario's connect phase.
type ConnectStats struct {
	Attempted    int             `json:"attempted"`
	Connected    int             `json:"connected"`
	Failed       int             `json:"failed"`
	AliveAtEnd   int             `json:"alive_at_end"`
	Seconds      float64         `json:"seconds"`
	PerSec       float64         `json:"per_s"`
	Latency      *LatencySummary `json:"latency_us,omitempty"`
	CPUSeconds   float64         `json:"broker_cpu_s,omitempty"`
	CPUPerConnUs float64         `json:"broker_cpu_us_per_connect,omitempty"`
	// SessionPresent is the CONNACKs that said Session Present (a resumed
	// persistent session).
	SessionPresent int `json:"session_present,omitempty"`
	// Subscribed is the filters acknowledged (Config.Subscriptions per
	// connection), over SubscribeSec; SubscribeLatency is SUBSCRIBE →
	// SUBACK.
	Subscribed       int             `json:"subscribed,omitempty"`
	SubscribeSec     float64         `json:"subscribe_s,omitempty"`
	SubscribePerSec  float64         `json:"subscribe_per_s,omitempty"`
	SubscribeLatency *LatencySummary `json:"subscribe_latency_us,omitempty"`
	// SubscribeCPUPerSubUs is the broker's CPU-µs per filter subscribed
	// (with Config.BrokerPID).
	SubscribeCPUPerSubUs float64 `json:"broker_cpu_us_per_subscription,omitempty"`
}

// Point is one second of the run.
type Point struct {
	T         float64 `json:"t"` // seconds since publishing started
	Phase     string  `json:"phase"`
	Sent      uint64  `json:"sent"`     // since the previous point (a second; the last point: up to the stop)
	Received  uint64  `json:"received"` // deliveries since the previous point
	Alive     int     `json:"alive,omitempty"`
	BrokerCPU float64 `json:"broker_cpu_percent,omitempty"`
	BrokerRSS uint64  `json:"broker_rss_bytes,omitempty"`
	GenCPU    float64 `json:"generator_cpu_percent,omitempty"`
	Connected int     `json:"connected,omitempty"`
}

// LatencySummary is an HDR histogram's percentiles in microseconds, and a
// CDF for plots: the value at percentiles spaced evenly in "nines"
// (-log10(1-q)), up to the maximum.
type LatencySummary struct {
	Count int64      `json:"count"`
	Min   float64    `json:"min"`
	Mean  float64    `json:"mean"`
	P50   float64    `json:"p50"`
	P90   float64    `json:"p90"`
	P99   float64    `json:"p99"`
	P999  float64    `json:"p99_9"`
	Max   float64    `json:"max"`
	CDF   []Quantile `json:"cdf,omitempty"`
}

// Quantile is one point of a latency CDF.
type Quantile struct {
	Percentile float64 `json:"p"`
	Us         float64 `json:"us"`
}

// Latency histogram range: 1 µs to 100 s, 3 significant digits.
const (
	histMin    = 1
	histMax    = 100_000_000
	histDigits = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histDigits) }

// histShards is a few mutex-guarded histograms that reader goroutines
// record into (reader i into shard i mod n), merged at the end.
type histShards struct {
	shards []histShard
}

type histShard struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
	_  [40]byte // keep shards on separate cache lines
}

func newHistShards(n int) *histShards {
	s := &histShards{shards: make([]histShard, n)}
	for i := range s.shards {
		s.shards[i].h = newHist()
	}
	return s
}

// record records a latency in nanoseconds into shard i mod n.
func (s *histShards) record(i int, ns int64) {
	us := max(ns/1000, histMin)
	sh := &s.shards[i%len(s.shards)]
	sh.mu.Lock()
	_ = sh.h.RecordValue(min(us, histMax)) // in range by construction
	sh.mu.Unlock()
}

// merged returns the sum of the shards.
func (s *histShards) merged() *hdrhistogram.Histogram {
	h := newHist()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		h.Merge(sh.h)
		sh.mu.Unlock()
	}
	return h
}

// summarize returns h's summary, or nil when it is empty.
func summarize(h *hdrhistogram.Histogram) *LatencySummary {
	if h.TotalCount() == 0 {
		return nil
	}
	s := &LatencySummary{
		Count: h.TotalCount(),
		Min:   float64(h.Min()),
		Mean:  h.Mean(),
		P50:   float64(h.ValueAtPercentile(50)),
		P90:   float64(h.ValueAtPercentile(90)),
		P99:   float64(h.ValueAtPercentile(99)),
		P999:  float64(h.ValueAtPercentile(99.9)),
		Max:   float64(h.Max()),
	}
	// 0, 0.1, 0.2 … nines, as far as the sample count resolves.
	maxNines := math.Log10(float64(h.TotalCount()))
	for k := 0; ; k++ {
		nines := float64(k) / 10
		if nines > maxNines || k > 100 {
			break
		}
		p := 100 * (1 - math.Pow(10, -nines))
		s.CDF = append(s.CDF, Quantile{Percentile: p, Us: float64(h.ValueAtPercentile(p))})
	}
	s.CDF = append(s.CDF, Quantile{Percentile: 100, Us: s.Max})
	return s
}
