package load

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
)

// Metric is one figure the comparison reports.
type Metric struct {
	Name string
	// Get returns the figure of one run, or NaN when the run does not
	// have it.
	Get func(*Result) float64
}

func nan() float64 { return math.NaN() }

func latency(r *Result, p func(*LatencySummary) float64) float64 {
	if r.Latency == nil {
		return nan()
	}
	return p(r.Latency)
}

func broker(r *Result, f func(*ProcUsage) float64) float64 {
	if r.Broker == nil {
		return nan()
	}
	return f(r.Broker)
}

// trafficMetrics are reported for every scenario but connections.
func trafficMetrics() []Metric {
	return []Metric{
		{"deliveries/s", func(r *Result) float64 { return r.Measured.DeliveriesPerSec }},
		{"deliveries per broker CPU-s", func(r *Result) float64 {
			return broker(r, func(u *ProcUsage) float64 {
				if u.DeliveriesPerCPUSecond == 0 {
					return nan()
				}
				return u.DeliveriesPerCPUSecond
			})
		}},
		{"broker CPU %", func(r *Result) float64 { return broker(r, func(u *ProcUsage) float64 { return u.CPUPercent }) }},
		{"p50 latency µs", func(r *Result) float64 { return latency(r, func(l *LatencySummary) float64 { return l.P50 }) }},
		{"p99 latency µs", func(r *Result) float64 { return latency(r, func(l *LatencySummary) float64 { return l.P99 }) }},
		{"p99.9 latency µs", func(r *Result) float64 { return latency(r, func(l *LatencySummary) float64 { return l.P999 }) }},
		{"broker RSS max MiB", func(r *Result) float64 {
			return broker(r, func(u *ProcUsage) float64 { return float64(u.RSSMax) / (1 << 20) })
		}},
		{"lost + undelivered", func(r *Result) float64 { return float64(r.Lost + r.Tail) }},
	}
}

// connectionMetrics are reported for the connections scenario.
func connectionMetrics() []Metric {
	return []Metric{
		{"connects/s", func(r *Result) float64 {
			if r.Connect == nil {
				return nan()
			}
			return r.Connect.PerSec
		}},
		{"connect p50 µs", func(r *Result) float64 {
			if r.Connect == nil || r.Connect.Latency == nil {
				return nan()
			}
			return r.Connect.Latency.P50
		}},
		{"connect p99 µs", func(r *Result) float64 {
			if r.Connect == nil || r.Connect.Latency == nil {
				return nan()
			}
			return r.Connect.Latency.P99
		}},
		{"broker CPU µs per connect", func(r *Result) float64 {
			if r.Connect == nil || r.Connect.CPUPerConnUs == 0 {
				return nan()
			}
			return r.Connect.CPUPerConnUs
		}},
		{"broker RSS per connection KiB", func(r *Result) float64 {
			return broker(r, func(u *ProcUsage) float64 {
				if u.RSSPerConnection == 0 {
					return nan()
				}
				return u.RSSPerConnection / 1024
			})
		}},
		{"broker RSS end MiB", func(r *Result) float64 {
			return broker(r, func(u *ProcUsage) float64 { return float64(u.RSSEnd) / (1 << 20) })
		}},
		{"connections lost", func(r *Result) float64 { return float64(r.LostConns) }},
	}
}

// subscriptionMetrics are reported for the connections scenario with
// subscriptions.
func subscriptionMetrics() []Metric {
	sub := func(f func(*ConnectStats) float64) func(*Result) float64 {
		return func(r *Result) float64 {
			if r.Connect == nil || r.Connect.Subscribed == 0 {
				return nan()
			}
			if v := f(r.Connect); v != 0 {
				return v
			}
			return nan()
		}
	}
	lat := func(p func(*LatencySummary) float64) func(*Result) float64 {
		return sub(func(c *ConnectStats) float64 {
			if c.SubscribeLatency == nil {
				return 0
			}
			return p(c.SubscribeLatency)
		})
	}
	return []Metric{
		{"subscribes/s", sub(func(c *ConnectStats) float64 { return c.SubscribePerSec })},
		{"subscribe p50 µs", lat(func(l *LatencySummary) float64 { return l.P50 })},
		{"subscribe p99 µs", lat(func(l *LatencySummary) float64 { return l.P99 })},
		{"broker CPU µs per subscription", sub(func(c *ConnectStats) float64 { return c.SubscribeCPUPerSubUs })},
		{"broker RSS per connection KiB (its filters included)", func(r *Result) float64 {
			return broker(r, func(u *ProcUsage) float64 {
				if u.RSSPerConnection == 0 {
					return nan()
				}
				return u.RSSPerConnection / 1024
			})
		}},
		{"subscriptions acknowledged", sub(func(c *ConnectStats) float64 { return float64(c.Subscribed) })},
		{"connections lost", func(r *Result) float64 { return float64(r.LostConns) }},
	}
}

// offlineMetrics are reported for the offline scenario.
func offlineMetrics() []Metric {
	off := func(f func(*OfflineStats) float64) func(*Result) float64 {
		return func(r *Result) float64 {
			if r.Offline == nil {
				return nan()
			}
			if v := f(r.Offline); v != 0 {
				return v
			}
			return nan()
		}
	}
	first := func(p func(*LatencySummary) float64) func(*Result) float64 {
		return off(func(o *OfflineStats) float64 {
			if o.FirstDelivery == nil {
				return 0
			}
			return p(o.FirstDelivery)
		})
	}
	return []Metric{
		{"queued/s", off(func(o *OfflineStats) float64 { return o.QueuedPerSec })},
		{"backlog delivered/s", off(func(o *OfflineStats) float64 { return o.DeliveredPerSec })},
		{"first queued message p50 µs", first(func(l *LatencySummary) float64 { return l.P50 })},
		{"first queued message p99 µs", first(func(l *LatencySummary) float64 { return l.P99 })},
		{"broker CPU µs per queued message", off(func(o *OfflineStats) float64 { return o.BrokerCPUQueueUs })},
		{"broker CPU µs per backlog delivery", off(func(o *OfflineStats) float64 { return o.BrokerCPUDeliverUs })},
		{"lost + undelivered", func(r *Result) float64 { return float64(r.Lost + r.Tail) }},
	}
}

// Row is one line of the comparison: a metric of one scenario for the two
// brokers, and the ratio of their medians (A / B).
type Row struct {
	Scenario string
	Metric   string
	A, B     Spread
	Ratio    float64
}

// groupName is the comparison name of a result: its Name, else its
// scenario.
func groupName(r *Result) string {
	if r.Name != "" {
		return r.Name
	}
	return r.Scenario
}

// Compare builds the comparison of the runs labelled a and b, one group
// per result name, in the order the groups were first run.
func Compare(results []*Result, a, b string) []Row {
	byName := map[string][]*Result{}
	var names []string
	first := map[string]string{}
	for _, r := range results {
		n := groupName(r)
		if _, ok := byName[n]; !ok {
			names = append(names, n)
			first[n] = r.Started
		}
		byName[n] = append(byName[n], r)
		first[n] = min(first[n], r.Started)
	}
	slices.SortStableFunc(names, func(x, y string) int { return strings.Compare(first[x], first[y]) })
	var rows []Row
	for _, n := range names {
		group := byName[n]
		metrics := trafficMetrics()
		switch group[0].Scenario {
		case ScenarioConnections:
			metrics = connectionMetrics()
			if group[0].Connect != nil && group[0].Connect.Subscribed > 0 {
				metrics = subscriptionMetrics()
			}
		case ScenarioOffline:
			metrics = offlineMetrics()
		}
		for _, m := range metrics {
			var xa, xb []float64
			for _, r := range group {
				switch r.Label {
				case a:
					xa = append(xa, m.Get(r))
				case b:
					xb = append(xb, m.Get(r))
				}
			}
			row := Row{Scenario: n, Metric: m.Name, A: Summarize(xa), B: Summarize(xb)}
			if row.A.N == 0 && row.B.N == 0 {
				continue
			}
			row.Ratio = Ratio(row.A.Median, row.B.Median)
			rows = append(rows, row)
		}
	}
	return rows
}

// LoadResults reads every *.json file of dir that holds a Result.
func LoadResults(dir string) ([]*Result, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("list results: %w", err)
	}
	var out []*Result
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read result: %w", err)
		}
		var r Result
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("decode result %s: %w", f, err)
		}
		if r.Scenario == "" {
			continue // not a generator result
		}
		out = append(out, &r)
	}
	return out, nil
}

// fmtNum formats a figure with 3 significant digits and thousands
// separators for large values.
func fmtNum(x float64) string {
	switch {
	case math.IsNaN(x):
		return "–"
	case x == 0:
		return "0"
	case math.Abs(x) >= 1000:
		return thousands(int64(math.Round(x)))
	case math.Abs(x) >= 100:
		return fmt.Sprintf("%.0f", x)
	case math.Abs(x) >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func fmtSpread(s Spread) string {
	switch s.N {
	case 0:
		return "–"
	case 1:
		return fmtNum(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", fmtNum(s.Median), fmtNum(s.Min), fmtNum(s.Max))
}

func fmtRatio(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.2f", x)
}

// WriteText writes rows as an aligned table.
func WriteText(w io.Writer, rows []Row, a, b string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "scenario\tmetric\t%s median (min–max)\t%s median (min–max)\tratio %s/%s\n", a, b, a, b)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Scenario, r.Metric, fmtSpread(r.A), fmtSpread(r.B), fmtRatio(r.Ratio))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// WriteMarkdown writes rows as a markdown table.
func WriteMarkdown(w io.Writer, rows []Row, a, b string) {
	fmt.Fprintf(w, "| scenario | metric | %s median (min–max) | %s median (min–max) | %s / %s |\n", a, b, a, b)
	fmt.Fprintln(w, "|---|---|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.Scenario, r.Metric, fmtSpread(r.A), fmtSpread(r.B), fmtRatio(r.Ratio))
	}
}

// WriteRuns writes one markdown line per run: what was sent and delivered,
// what went missing, and the first errors, so that a failure is visible
// next to the figures.
func WriteRuns(w io.Writer, results []*Result) {
	rs := slices.Clone(results)
	slices.SortStableFunc(rs, func(x, y *Result) int { return strings.Compare(x.Started, y.Started) })
	fmt.Fprintln(w, "| run | broker | round | sent | expected | unique delivered | lost | undelivered at end | duplicates | connections lost | errors |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range rs {
		errs := "–"
		if r.ErrorsN > 0 {
			errs = fmt.Sprintf("%d: %s", r.ErrorsN, strings.ReplaceAll(strings.Join(r.Errors[:min(3, len(r.Errors))], "; "), "|", "\\|"))
		}
		sent, exp, uniq := thousands(int64(r.Sent)), thousands(int64(r.Expected)), thousands(int64(r.Unique))
		if r.Scenario == ScenarioConnections && r.Connect != nil {
			sent, exp, uniq = "–", thousands(int64(r.Connect.Attempted)), thousands(int64(r.Connect.Connected))+" connected"
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %d | %s |\n", groupName(r), r.Label, r.Round,
			sent, exp, uniq, thousands(int64(r.Lost)), thousands(int64(r.Tail)),
			thousands(int64(r.Duplicates)), r.LostConns, errs)
	}
}
