package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
	"github.com/shoal-mqtt/shoal/internal/localserver/realcql"
	"github.com/shoal-mqtt/shoal/internal/localserver/realkafka"
)

// unitSample is what the units scenario reads before and after a phase.
type unitSample struct {
	at      time.Time
	cpu     map[string]time.Duration // by process name
	rss     map[string]uint64        // by process name, bytes
	records map[string]int64         // by topic: the sum of its partitions' end offsets
	bytes   map[string]int64         // by topic: the size of its logs
	cql     cqlCounts
	// heap is each Shoal process's live heap after a collection, bytes;
	// taken for the subscribe phases only (a forced collection costs CPU).
	heap map[string]uint64
}

// cqlCounts are the requests Cassandra coordinated on Shoal's keyspace.
type cqlCounts struct{ reads, writes, scans int64 }

// unitMeter reads the samples.
type unitMeter struct {
	procs   []load.Process
	readers map[string]*load.Proc
	brokers []string
	cqlHost string
	// debug is each Shoal process's HTTP address (its /debug/ endpoints:
	// the units scenario starts the roles with pprof on).
	debug map[string]string
}

func newUnitMeter(bb *backbone, procs []load.Process, shoal []*proc) (*unitMeter, error) {
	m := &unitMeter{procs: procs, readers: make(map[string]*load.Proc), brokers: bb.brokers, cqlHost: bb.cqlHosts[0], debug: map[string]string{}}
	for _, p := range shoal {
		m.debug[p.name] = p.http
	}
	for _, p := range procs {
		r, err := load.NewProc(p.PID)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		m.readers[p.Name] = r
	}
	return m, nil
}

func (m *unitMeter) sample(ctx context.Context) (unitSample, error) {
	s := unitSample{at: time.Now(), cpu: map[string]time.Duration{}, rss: map[string]uint64{}}
	for _, p := range m.procs {
		ps, err := m.readers[p.Name].Sample()
		if err != nil {
			return s, fmt.Errorf("%s: %w", p.Name, err)
		}
		s.cpu[p.Name] = ps.CPU
		s.rss[p.Name] = ps.RSS
	}
	var err error
	if s.records, s.bytes, err = realkafka.TopicTotals(ctx, m.brokers, "shoal."); err != nil {
		return s, err
	}
	if s.cql, err = m.cqlCounts(ctx); err != nil {
		return s, err
	}
	return s, nil
}

// liveHeap collects each Shoal process's garbage (the heap profile's
// gc=1) and returns its live heap then (/debug/memory's
// /gc/heap/live:bytes), by process name: what its state holds, without
// the garbage and free pages an RSS counts.
func (m *unitMeter) liveHeap(ctx context.Context) (map[string]uint64, error) {
	heap := map[string]uint64{}
	client := &http.Client{Timeout: 30 * time.Second}
	get := func(url string) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s: %s", url, resp.Status)
		}
		return b, err
	}
	for name, addr := range m.debug {
		if _, err := get("http://" + addr + "/debug/pprof/heap?gc=1"); err != nil {
			return nil, fmt.Errorf("%s: collect garbage: %w", name, err)
		}
		b, err := get("http://" + addr + "/debug/memory")
		if err != nil {
			return nil, fmt.Errorf("%s: memory classes: %w", name, err)
		}
		v, ok := memoryClass(b, "/gc/heap/live:bytes")
		if !ok {
			return nil, fmt.Errorf("%s: no /gc/heap/live:bytes in /debug/memory", name)
		}
		heap[name] = v
	}
	return heap, nil
}

// memoryClass finds one value of /debug/memory's "name value" lines.
func memoryClass(b []byte, name string) (uint64, bool) {
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && k == name {
			n, err := strconv.ParseUint(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// cqlCounts sums the requests Cassandra's coordinators served on the
// bench's keyspace since they started (its system_views tables).
func (m *unitMeter) cqlCounts(ctx context.Context) (cqlCounts, error) {
	var c cqlCounts
	for _, t := range []struct {
		table string
		into  *int64
	}{{"coordinator_read_latency", &c.reads}, {"coordinator_write_latency", &c.writes}, {"coordinator_scan_latency", &c.scans}} {
		rows, err := realcql.Query(ctx, m.cqlHost, "SELECT CAST(count AS text) FROM system_views."+t.table+" WHERE keyspace_name = '"+keyspace+"'")
		if err != nil {
			return c, fmt.Errorf("cassandra %s: %w", t.table, err)
		}
		for _, r := range rows {
			n, err := strconv.ParseInt(r[0], 10, 64)
			if err != nil {
				return c, fmt.Errorf("cassandra %s: count %q: %w", t.table, r[0], err)
			}
			*t.into += n
		}
	}
	return c, nil
}
