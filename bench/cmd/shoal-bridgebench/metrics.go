package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The metrics of Shoal's /metrics the benchmark reads (Prometheus names of
// docs/bridge.md's shoal.bridge.records and shoal.bridge.lag, and the
// gateway's count of PUBLISH received).
const (
	metricBridgeRecords = "shoal_bridge_records_total"
	metricBridgeLag     = "shoal_bridge_lag"
	metricReceived      = "shoal_gateway_messages_received_total"
)

// sample is what one scrape of /metrics read.
type sample struct {
	at       time.Duration // on the benchmark's clock
	records  float64       // out records the bridge wrote
	lag      float64       // the out group's lag, as the bridge last measured it
	hasLag   bool          // the bridge has measured it (every 5 s)
	received float64       // PUBLISH the gateway received (shoal all only)
}

// metricSum returns the sum of the values of metric name over the series
// whose labels include every one of want (name="value" pairs), and
// whether there was any. It reads the Prometheus text format, one sample
// per line.
func metricSum(text []byte, name string, want ...string) (float64, bool) {
	var sum float64
	found := false
	for line := range bytes.Lines(text) {
		line = bytes.TrimSpace(line)
		rest, ok := bytes.CutPrefix(line, []byte(name))
		if !ok || len(rest) == 0 || (rest[0] != '{' && rest[0] != ' ') {
			continue // a comment, another metric, or one whose name starts with name
		}
		var labels []byte
		if rest[0] == '{' {
			end := bytes.IndexByte(rest, '}')
			if end < 0 {
				continue
			}
			labels, rest = rest[1:end], rest[end+1:]
		}
		if !hasLabels(labels, want) {
			continue
		}
		fields := bytes.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(string(fields[0]), 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}

// hasLabels reports whether the label list (a="x",b="y") holds every
// pair of want. Label values here are plain names: no escaped quotes or
// commas.
func hasLabels(labels []byte, want []string) bool {
	have := strings.Split(string(labels), ",")
	for _, w := range want {
		found := false
		for _, h := range have {
			if strings.TrimSpace(h) == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// parseSample reads the bridge's figures from a /metrics page.
func parseSample(text []byte) sample {
	var s sample
	s.records, _ = metricSum(text, metricBridgeRecords, `direction="out"`)
	s.lag, s.hasLag = metricSum(text, metricBridgeLag, `direction="out"`)
	s.received, _ = metricSum(text, metricReceived)
	return s
}

// scraper reads /metrics of one process.
type scraper struct {
	url    string
	client *http.Client
	clock  func() time.Duration
}

func newScraper(url string, clock func() time.Duration) *scraper {
	return &scraper{url: url, client: &http.Client{Timeout: 5 * time.Second}, clock: clock}
}

// scrape reads the page once.
func (s *scraper) scrape(ctx context.Context) (sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return sample{}, fmt.Errorf("scrape %s: %w", s.url, err)
	}
	at := s.clock()
	resp, err := s.client.Do(req)
	if err != nil {
		return sample{}, fmt.Errorf("scrape %s: %w", s.url, err)
	}
	defer func() { _ = resp.Body.Close() }() // read to the end below
	if resp.StatusCode != http.StatusOK {
		return sample{}, fmt.Errorf("scrape %s: %s", s.url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return sample{}, fmt.Errorf("scrape %s: %w", s.url, err)
	}
	smp := parseSample(b)
	smp.at = at
	return smp, nil
}
