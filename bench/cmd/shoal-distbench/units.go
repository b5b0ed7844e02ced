package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
	"github.com/shoal-mqtt/shoal/internal/localserver/realcql"
	"github.com/shoal-mqtt/shoal/internal/localserver/realkafka"
)

// scenUnits measures what one message and one connect cost each kind of
// process (CPU from /proc), the log (records and bytes per topic, from
// Kafka) and the database (requests, from Cassandra's own tables), one
// phase after another on one topology.
const scenUnits = "units"

// unitPhase is one phase of the units scenario: a generator run, and what
// its costs are divided by.
type unitPhase struct {
	name string
	// per is what a cost is per: "message" (a publish), "connect" or
	// "subscription".
	per string
	cfg load.Config
	// takeover: the connects take over sessions live on another gateway.
	takeover bool
}

// unitSessionExpiry is the session expiry of the phases with persistent
// sessions: longer than any phase, and the clients end their sessions
// when a phase ends (but for connect-persistent-new's, which the next
// phase takes up).
const unitSessionExpiry = 10 * time.Minute

// unitPhases are the units scenario's phases on topo, in order.
func (o *options) unitPhases(topo string) []unitPhase {
	pairs := func(name string, qos, payload int) unitPhase {
		cfg := o.loadConfig(topo, 0, 1)
		cfg.Scenario = load.ScenarioPairs
		cfg.QoS = 0
		cfg.Rate = 0
		if qos == 0 {
			cfg.Window = o.window
		} else {
			cfg.QoS, cfg.Window = 1, 0
		}
		cfg.Payload = payload
		cfg.Prefix = "bench-u" + name
		cfg.Name = name
		return unitPhase{name: name, per: "message", cfg: cfg}
	}
	fan := o.loadConfig(topo, 0, 1)
	fan.Scenario = load.ScenarioFanout
	fan.Clients = o.fanout
	fan.Rate = o.fanoutRate
	fan.Window = 0
	fan.Prefix = "bench-ufan"
	fan.Name = fmt.Sprintf("fanout-%d-qos0", o.fanout)
	persistent := pairs("pairs-qos1-persistent", 1, 62)
	persistent.cfg.SessionExpiry = unitSessionExpiry
	// An end-to-end window as at QoS 0: a persistent session's QoS 1
	// messages go through its inbox, and a publisher acknowledged as soon
	// as its message is in the log runs ahead of the inbox's forwarding
	// until session.max_inbox drops the excess (docs/capacity.md).
	persistent.cfg.Window = o.window
	// The offline phase: 500 persistent sessions offline while their
	// publishers send -unit-queued messages each, then back for them.
	off := o.loadConfig(topo, 1, 1)
	off.Clients = 500
	off.Scenario = load.ScenarioOffline
	off.Rate, off.Window, off.Payload = 0, 0, 62
	off.SessionExpiry = unitSessionExpiry
	off.Queued = o.unitQueued
	off.Warmup = 3 * time.Second // each settle: the stores caught up
	off.Duration = time.Minute   // each stage's bound
	off.Prefix = "bench-uoff"
	off.Name = "offline-qos1"
	conns := func(name, prefix string) unitPhase {
		cfg := load.DefaultConfig()
		cfg.Scenario = load.ScenarioConnections
		cfg.Clients = o.unitConnects
		cfg.Warmup, cfg.Duration = time.Second, time.Second
		cfg.SetupTimeout = setupTimeout
		cfg.Prefix = prefix
		cfg.Name = name
		cfg.Label, cfg.Round = topo, 1
		return unitPhase{name: name, per: "connect", cfg: cfg}
	}
	subs := func(name, prefix string, filters int, wildcard bool) unitPhase {
		ph := conns(name, prefix)
		ph.per = "subscription"
		ph.cfg.Clients, ph.cfg.Subscriptions, ph.cfg.WildcardFilters = o.unitSubscribers, filters, wildcard
		ph.cfg.QoS = 1
		ph.cfg.Warmup = 3 * time.Second // the stores caught up
		ph.cfg.SetupTimeout = 5 * time.Minute
		return ph
	}
	takeover := conns("connect-takeover", "bench-utake")
	takeover.takeover = true
	persNew := conns("connect-persistent-new", "bench-upers")
	persNew.cfg.SessionExpiry, persNew.cfg.KeepSessions = unitSessionExpiry, true
	persBack := conns("connect-persistent-resumed", "bench-upers")
	persBack.cfg.SessionExpiry, persBack.cfg.Resume = unitSessionExpiry, true
	return []unitPhase{
		pairs("pairs-qos0", 0, 64),
		// TBMQ's point-to-point payload.
		pairs("pairs-qos1", 1, 62),
		persistent,
		{name: off.Name, per: "message", cfg: off},
		{name: fan.Name, per: "message", cfg: fan},
		// The same ids twice: new, then returning to a session that ended.
		conns("connect-new", "bench-uconn"),
		conns("connect-returning", "bench-uconn"),
		// Persistent sessions, kept offline, then taken up.
		persNew,
		persBack,
		takeover,
		subs("subscribe-concrete", "bench-usubc", o.unitFilters, false),
		subs("subscribe-wildcard", "bench-usubw", o.unitWildcards, true),
	}
}

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

// unitResult is one phase's costs, per message or per connect.
type unitResult struct {
	Name string `json:"name"`
	Per  string `json:"per"`
	// Count is what the costs are divided by: messages published, or
	// connects made.
	Count      uint64  `json:"count"`
	Deliveries uint64  `json:"deliveries,omitempty"`
	Seconds    float64 `json:"seconds"`
	Payload    int     `json:"payload_bytes,omitempty"`
	QoS        int     `json:"qos"`
	// CPUMicros is CPU-µs per Count by kind of process (gateway, router,
	// session, kafka, cassandra: the processes of a kind summed), and
	// "shoal", the three roles together.
	CPUMicros map[string]float64 `json:"cpu_us"`
	// CPUMicrosPerDelivery is the same per delivery (fan-out).
	CPUMicrosPerDelivery map[string]float64 `json:"cpu_us_per_delivery,omitempty"`
	// GatewayRSSBytes is the growth of the gateway's RSS per idle
	// connection (connects), measured while the connections are held.
	GatewayRSSBytes float64 `json:"gateway_rss_bytes,omitempty"`
	// KafkaRecords is records per Count by topic, and "total".
	KafkaRecords map[string]float64 `json:"kafka_records"`
	// KafkaBytes is the growth of the topics' logs per Count, once (the
	// topics here have one replica; a replication factor of 3 writes it
	// three times).
	KafkaBytes float64 `json:"kafka_bytes"`
	// CQL is the requests per Count Cassandra coordinated.
	CQLReads  float64 `json:"cql_reads"`
	CQLWrites float64 `json:"cql_writes"`
	CQLScans  float64 `json:"cql_scans"`
	Lost      uint64  `json:"lost_or_undelivered"`
	// RSSBytes is, for subscriptions, the growth of each kind's RSS per
	// subscription (the processes of a kind summed), from before the
	// first SUBSCRIBE to the settle after the last SUBACK.
	RSSBytes map[string]float64 `json:"rss_bytes,omitempty"`
	// HeapBytes is, for subscriptions, the growth of each Shoal role's live
	// heap per subscription (the processes of a kind summed), between
	// collections before the first SUBSCRIBE and after the settle: what
	// its state holds for one.
	HeapBytes map[string]float64 `json:"heap_live_bytes,omitempty"`
	// SessionPresent is the connects that resumed a kept session.
	SessionPresent int `json:"session_present,omitempty"`
	// Offline is the offline phase's account (on its deliver result).
	Offline *load.OfflineStats `json:"offline,omitempty"`
}

// idleRates is each process's CPU-seconds per second without load, from
// two samples.
func idleRates(a, b unitSample) map[string]float64 {
	secs := b.at.Sub(a.at).Seconds()
	r := map[string]float64{}
	if secs <= 0 {
		return r
	}
	for name, cpu := range b.cpu {
		r[name] = (cpu - a.cpu[name]).Seconds() / secs
	}
	return r
}

// unitCosts divides what changed from a to b by count (and deliveries),
// less what each process spends idle (idle: CPU-seconds per second, by
// process) over the time between the samples.
func unitCosts(ph unitPhase, res *load.Result, a, b unitSample, idle map[string]float64) unitResult {
	u := unitResult{Name: ph.name, Per: ph.per, Payload: res.PayloadBytes, QoS: res.QoS,
		CPUMicros: map[string]float64{}, KafkaRecords: map[string]float64{}}
	switch ph.per {
	case "connect":
		if res.Connect != nil {
			u.Count = uint64(res.Connect.Connected)
		}
		u.Payload = 0
	case "subscription":
		if res.Connect != nil {
			u.Count = uint64(res.Connect.Subscribed)
		}
		u.Payload = 0
	default:
		u.Count, u.Deliveries = res.Sent, res.Received
		if res.Expected > res.Received {
			u.Lost = res.Expected - res.Received
		}
	}
	u.Seconds = res.ElapsedSec
	if u.Count == 0 {
		return u
	}
	n := float64(u.Count)
	// A connect phase's CPU is the whole phase's (the connects, the idle
	// hold, the disconnects), from the samples; a message phase's is its
	// measured window's (the generator's samples), without the connecting
	// and subscribing of its clients, per message and delivery of that
	// window.
	cpu, secs := map[string]float64{}, b.at.Sub(a.at).Seconds()
	count, deliveries := n, float64(u.Deliveries)
	if ph.per == "message" && len(res.Processes) > 0 {
		for _, p := range res.Processes {
			cpu[p.Name] = p.CPUSeconds
		}
		secs = res.Measured.Seconds
		count, deliveries = float64(res.Measured.Sent), float64(res.Measured.Deliveries)
	} else {
		for name, c := range b.cpu {
			cpu[name] = (c - a.cpu[name]).Seconds()
		}
	}
	per := map[string]float64{}
	for name, c := range cpu {
		k := kindOf(name)
		d := max(c-idle[name]*secs, 0) // noise: what a phase did is never negative
		per[k] += d
		if isShoal(k) {
			per["shoal"] += d
		}
	}
	if count > 0 {
		for k, d := range per {
			u.CPUMicros[k] = d * 1e6 / count
		}
	}
	if ph.per == "message" && res.Expected > res.Sent { // a fan-out
		u.CPUMicrosPerDelivery = map[string]float64{}
		for k, d := range per {
			u.CPUMicrosPerDelivery[k] = d * 1e6 / deliveries
		}
	}
	if ph.per == "connect" && res.Broker != nil {
		u.GatewayRSSBytes = res.Broker.RSSPerConnection
	}
	if ph.per == "connect" && res.Connect != nil {
		u.SessionPresent = res.Connect.SessionPresent
	}
	if ph.per == "subscription" {
		u.RSSBytes = growthPer(a.rss, b.rss, n)
		if a.heap != nil && b.heap != nil {
			u.HeapBytes = growthPer(a.heap, b.heap, n)
		}
	}
	if ph.per == "message" && len(res.Processes) > 0 && res.Measured.Sent > 0 {
		n = float64(res.Measured.Sent) // the samples are of the measured window
	}
	var records, bytes int64
	for t, r := range b.records {
		if d := r - a.records[t]; d != 0 {
			u.KafkaRecords[t] = float64(d) / n
			records += d
		}
	}
	u.KafkaRecords["total"] = float64(records) / n
	for t, s := range b.bytes {
		bytes += s - a.bytes[t]
	}
	u.KafkaBytes = float64(bytes) / n
	u.CQLReads = float64(b.cql.reads-a.cql.reads) / n
	u.CQLWrites = float64(b.cql.writes-a.cql.writes) / n
	u.CQLScans = float64(b.cql.scans-a.cql.scans) / n
	return u
}

// plainPhase runs a message or connect phase: its costs are those of the
// generator's measured window (messages) or of the whole run (connects).
func plainPhase(ctx context.Context, ph unitPhase, cfg load.Config, m *unitMeter, idle map[string]float64, stderr io.Writer) (*load.Result, []unitResult, error) {
	before, err := m.sample(ctx)
	if err != nil {
		return nil, nil, err
	}
	// A message phase's log and database counts are those of its
	// measured window, as its CPU is: not its clients' connects and
	// subscriptions.
	window := make(chan [2]unitSample, 1)
	werr := make(chan error, 1)
	if ph.per == "message" {
		cfg.OnMeasure = func(d time.Duration) {
			go func() {
				a, err := m.sample(ctx)
				if err == nil && load.Sleep(ctx, d) {
					var b unitSample
					if b, err = m.sample(ctx); err == nil {
						window <- [2]unitSample{a, b}
						return
					}
				}
				werr <- errors.Join(err, ctx.Err())
			}()
		}
	}
	res, err := load.Run(ctx, cfg, stderr)
	if err != nil {
		return res, nil, err
	}
	after, err := m.sample(ctx)
	if err != nil {
		return res, nil, err
	}
	if ph.per == "message" {
		select {
		case w := <-window:
			before, after = w[0], w[1]
		case err := <-werr:
			return res, nil, fmt.Errorf("measured window: %w", err)
		case <-ctx.Done():
			return res, nil, ctx.Err()
		}
	}
	return res, []unitResult{unitCosts(ph, res, before, after, idle)}, nil
}

// stagedPhase runs a phase whose costs are taken between the stages the
// generator calls out (load.Config.OnStage): the offline phase's queue and
// delivery, a subscribe phase's subscriptions.
func stagedPhase(ctx context.Context, ph unitPhase, cfg load.Config, m *unitMeter, idle map[string]float64, stderr io.Writer) (*load.Result, []unitResult, error) {
	stages := map[string]unitSample{}
	var serr error
	cfg.OnStage = func(stage string) {
		// A subscribe phase's live heaps: collected before the CPU sample
		// at its start and after it at its end, so that the forced
		// collections are outside what it measures.
		var heap map[string]uint64
		var herr error
		if ph.per == "subscription" && stage == "subscribe" {
			heap, herr = m.liveHeap(ctx)
		}
		s, err := m.sample(ctx)
		if ph.per == "subscription" && stage == "hold" {
			heap, herr = m.liveHeap(ctx)
		}
		s.heap = heap
		stages[stage], serr = s, errors.Join(serr, err, herr)
	}
	res, err := load.Run(ctx, cfg, stderr)
	if err != nil {
		return res, nil, err
	}
	if serr != nil {
		return res, nil, fmt.Errorf("stage samples: %w", serr)
	}
	if ph.cfg.Scenario == load.ScenarioOffline {
		us, err := offlineCosts(ph, res, stages, idle)
		return res, us, err
	}
	a, okA := stages["subscribe"]
	b, okB := stages["hold"]
	if !okA || !okB || res.Connect == nil {
		return res, nil, fmt.Errorf("no samples of the subscriptions (errors: %v)", res.Errors)
	}
	u := unitCosts(ph, res, a, b, idle)
	if want := ph.cfg.Clients * ph.cfg.Subscriptions; res.Connect.Subscribed < want {
		return res, nil, fmt.Errorf("%d of %d filters subscribed (errors: %v)", res.Connect.Subscribed, want, res.Errors)
	}
	return res, []unitResult{u}, nil
}

// takeoverPhase connects ph.cfg's clients to the first gateway and, while
// they are held, the same identifiers to the second: each connect of the
// second run takes a session over from a live connection on another
// gateway. The costs are the second run's, per connect.
func (c *cluster) takeoverPhase(ctx context.Context, ph unitPhase, cfg load.Config, m *unitMeter, idle map[string]float64, stderr io.Writer) (*load.Result, []unitResult, error) {
	if len(c.gws) < 2 {
		return nil, nil, errors.New("a takeover needs two gateways")
	}
	first := cfg
	first.Name = ph.name + "-held"
	first.Duration = 5 * time.Minute // cut short once the takeovers are done
	held := make(chan struct{})
	first.OnMeasure = func(time.Duration) { close(held) }
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := load.Run(hctx, first, io.Discard)
		done <- err
	}()
	select {
	case <-held:
	case err := <-done:
		return nil, nil, fmt.Errorf("the connections to take over: %w", err)
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	second := cfg
	second.Addr = c.gws[1].mqtt
	second.BrokerPID = c.gws[1].pid()
	res, us, err := plainPhase(ctx, ph, second, m, idle, stderr)
	cancel()
	if err := <-done; err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "%s: the held connections' run: %v (expected: cut short)\n", ph.name, err)
	}
	return res, us, err
}

// growthPer is the growth from a to b (bytes by process name) per n, by
// kind of process (the processes of a kind summed); a shrink is negative.
func growthPer(a, b map[string]uint64, n float64) map[string]float64 {
	per := map[string]float64{}
	for name, v := range b {
		per[kindOf(name)] += float64(int64(v)-int64(a[name])) / n
	}
	return per
}

// offlineCosts splits the offline phase into its two stages' costs: per
// message queued for an offline session (from the first publish to a
// settle after the last acknowledgement), and per message of the backlog
// delivered when the sessions came back (their reconnects included, from
// the first to a settle after the last delivery).
func offlineCosts(ph unitPhase, res *load.Result, stages map[string]unitSample, idle map[string]float64) ([]unitResult, error) {
	o := res.Offline
	if o == nil {
		return nil, fmt.Errorf("%s: no offline account in the result", ph.name)
	}
	for _, s := range []string{"queue", "deliver", "end"} {
		if _, ok := stages[s]; !ok {
			return nil, fmt.Errorf("%s: no sample at the %q stage (errors: %v)", ph.name, s, res.Errors)
		}
	}
	stage := func(name string, count uint64, a, b unitSample) unitResult {
		r := *res
		r.Processes, r.Sent, r.Received, r.Expected = nil, count, 0, 0
		return unitCosts(unitPhase{name: ph.name + "-" + name, per: "message"}, &r, a, b, idle)
	}
	q := stage("queue", o.Queued, stages["queue"], stages["deliver"])
	q.Seconds = o.QueueSec
	d := stage("deliver", o.Delivered, stages["deliver"], stages["end"])
	d.Seconds, d.Offline, d.SessionPresent = o.DeliverSec, o, o.Resumed
	d.Lost = res.Lost + res.Tail
	return []unitResult{q, d}, nil
}

// unitsFile is bench/units.json.
type unitsFile struct {
	Date       string  `json:"date"`
	Command    string  `json:"command"`
	Commit     string  `json:"commit"`
	CPU        string  `json:"cpu"`
	Cores      int     `json:"cores"`
	MemGiB     float64 `json:"mem_gib"`
	Kernel     string  `json:"kernel"`
	Go         string  `json:"go"`
	Kafka      string  `json:"kafka"`
	Cassandra  string  `json:"cassandra"`
	Topology   string  `json:"topology"`
	Partitions int     `json:"partitions"`
	// IdleCPUPercent is each kind's CPU without load (subtracted from
	// every phase), over IdleSeconds before the first phase.
	IdleCPUPercent map[string]float64 `json:"idle_cpu_percent"`
	IdleSeconds    float64            `json:"idle_s"`
	Units          []unitResult       `json:"units"`
}

// units runs the units scenario's phases on the started topology and
// writes their costs to opt.unitsOut and stdout.
func (c *cluster) units(ctx context.Context, opt options, topo string, bb *backbone, stdout, stderr io.Writer) ([]*load.Result, error) {
	m, err := newUnitMeter(bb, c.named, c.procs)
	if err != nil {
		return nil, err
	}
	meta := machineInfo(opt)
	f := unitsFile{Date: meta.date, Command: meta.command, Commit: meta.commit, CPU: meta.cpu, Cores: meta.cores,
		MemGiB: meta.memGiB, Kernel: meta.kernel, Go: meta.goVersion, Kafka: realkafka.Version, Cassandra: bb.cqlVersion,
		Topology: topo, Partitions: opt.partitions}
	fmt.Fprintf(stderr, "%s: units, idle for %s\n", topo, opt.unitIdle)
	s0, err := m.sample(ctx)
	if err != nil {
		return nil, err
	}
	if !load.Sleep(ctx, opt.unitIdle) {
		return nil, ctx.Err()
	}
	s1, err := m.sample(ctx)
	if err != nil {
		return nil, err
	}
	idle := idleRates(s0, s1)
	f.IdleSeconds = s1.at.Sub(s0.at).Seconds()
	f.IdleCPUPercent = map[string]float64{}
	for name, r := range idle {
		f.IdleCPUPercent[kindOf(name)] += 100 * r
	}
	var results []*load.Result
	for _, ph := range opt.unitPhases(topo) {
		for _, p := range c.procs {
			if err := p.alive(); err != nil {
				return results, err
			}
		}
		cfg := ph.cfg
		c.addrs(&cfg)
		if ph.per != "message" {
			cfg.Addr, cfg.SubscriberAddr = c.gws[0].mqtt, ""
		}
		cfg.BrokerPID = c.gws[0].pid()
		cfg.Processes = c.named
		fmt.Fprintf(stderr, "%s: units, %s\n", topo, ph.name)
		var us []unitResult
		var res *load.Result
		switch {
		case ph.takeover:
			res, us, err = c.takeoverPhase(ctx, ph, cfg, m, idle, stderr)
		case ph.cfg.Scenario == load.ScenarioOffline || ph.cfg.Subscriptions > 0:
			res, us, err = stagedPhase(ctx, ph, cfg, m, idle, stderr)
		default:
			res, us, err = plainPhase(ctx, ph, cfg, m, idle, stderr)
		}
		if res != nil {
			results = append(results, res)
			if werr := writeJSON(filepath.Join(opt.out, topo+"-units-"+ph.name+".json"), res); werr != nil {
				return results, werr
			}
		}
		if err != nil {
			return results, fmt.Errorf("%s: %w", ph.name, err)
		}
		for _, u := range us {
			f.Units = append(f.Units, u)
			writeUnitLine(stdout, u)
		}
		if !load.Sleep(ctx, opt.pause+3*time.Second) { // disconnects applied, queues drained
			return results, ctx.Err()
		}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return results, fmt.Errorf("encode units: %w", err)
	}
	if err := os.WriteFile(opt.unitsOut, append(b, '\n'), 0o644); err != nil {
		return results, fmt.Errorf("write units: %w", err)
	}
	fmt.Fprintln(stderr, "units written to", opt.unitsOut)
	fmt.Fprintln(stdout)
	writeUnitsTable(stdout, f.Units)
	if err := os.WriteFile(filepath.Join(opt.out, "README.md"), []byte(unitsReadme(f)), 0o644); err != nil {
		return results, fmt.Errorf("write README: %w", err)
	}
	return results, nil
}

// unitsReadme is the README of a units run's results.
func unitsReadme(f unitsFile) string {
	var rd strings.Builder
	fmt.Fprintf(&rd, "# What a message, a connect and a subscription cost (%s)\n\n```\n%s\n```\n\n", f.Date[:10], f.Command)
	fmt.Fprintf(&rd, "- Machine: %s, %d cores, %.0f GiB, kernel %s, %s; Kafka %s, Cassandra %s, one node each, on loopback.\n- Shoal: `%s`, topology `%s` (%s), %d partitions per event topic.\n- The costs: %s\n\n",
		f.CPU, f.Cores, f.MemGiB, f.Kernel, f.Go, f.Kafka, f.Cassandra, f.Commit, f.Topology, topoText(f.Topology), f.Partitions, unitsMethod)
	writeUnitsTable(&rd, f.Units)
	fmt.Fprintln(&rd)
	writeUnitsMemory(&rd, f.Units)
	return rd.String()
}

// writeUnitsMemory writes, for the subscribe phases, each role's memory
// per subscription, and for the offline phase its rates.
func writeUnitsMemory(w io.Writer, us []unitResult) {
	fmt.Fprintln(w, "| phase | live heap per subscription, bytes: gateway | router | session | RSS per subscription, bytes: gateway | router | session | Cassandra |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, u := range us {
		if u.Per != "subscription" {
			continue
		}
		h := func(k string) string {
			if u.HeapBytes == nil {
				return "—"
			}
			return fmt.Sprintf("%.0f", u.HeapBytes[k])
		}
		r := func(k string) string { return fmt.Sprintf("%.0f", u.RSSBytes[k]) }
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", u.Name, h("gateway"), h("router"), h("session"), r("gateway"), r("router"), r("session"), r("cassandra"))
	}
	for _, u := range us {
		if o := u.Offline; o != nil {
			first := "—"
			if o.FirstDelivery != nil {
				first = fmt.Sprintf("p50 %.0f µs, p99 %.0f µs", o.FirstDelivery.P50, o.FirstDelivery.P99)
			}
			fmt.Fprintf(w, "\n%s: %d sessions, %d messages queued at %.0f/s; %d of the sessions present on return, the backlog delivered at %.0f/s; CONNACK to the first queued message %s.\n",
				strings.TrimSuffix(u.Name, "-deliver"), o.Sessions, o.Queued, o.QueuedPerSec, o.Resumed, o.DeliveredPerSec, first)
		}
	}
}

// unitsMethod says how the units are measured, for the README.
const unitsMethod = "CPU from /proc (user + system) of every process, less what the process spends idle over as long (measured for -unit-idle before the first phase): for messages over the generator's measured window, divided by the messages published in it (the fan-out's also by its deliveries); for connects over the whole phase (the connects, an idle hold, the disconnects), divided by the connects. Kafka records (over the same window for messages, the whole phase for connects) are the growth of the topics' end offsets, bytes the growth of their logs (one replica here: a replication factor of 3 writes them three times; compaction can shrink a log during a phase). CQL requests are those Cassandra's coordinators counted on Shoal's keyspace (`system_views.coordinator_*_latency`; lightweight transactions are not among the writes). A gateway's memory per connection is its RSS growth while the connections are held. The offline phase's two rows are its stages, from stage samples: the queue (first publish to a settle after the last PUBACK) per message queued, the delivery (the sessions' return, their reconnects included, to a settle after the last delivery) per message delivered. A subscription's CPU, records and requests are those from before the first SUBSCRIBE to a settle after the last SUBACK, per filter (one SUBSCRIBE each); its memory is each role's live heap after a forced collection (`/debug/pprof/heap?gc=1`, then `/debug/memory`) before and after, and the RSS growth over the same span."

// writeUnitsTable writes the costs as a Markdown table.
func writeUnitsTable(w io.Writer, us []unitResult) {
	fmt.Fprintln(w, "| phase | per | count | CPU-µs: gateway | router | session | Shoal | Kafka | Cassandra | Kafka records | Kafka bytes | CQL reads | CQL writes | gateway bytes per connection | lost |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, u := range us {
		c := func(k string) string { return fmt.Sprintf("%.1f", u.CPUMicros[k]) }
		mem := "—"
		if u.GatewayRSSBytes > 0 {
			mem = fmt.Sprintf("%.0f", u.GatewayRSSBytes)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %.2f | %.0f | %.2f | %.2f | %s | %d |\n",
			u.Name, u.Per, u.Count, c("gateway"), c("router"), c("session"), c("shoal"), c("kafka"), c("cassandra"),
			u.KafkaRecords["total"], u.KafkaBytes, u.CQLReads, u.CQLWrites, mem, u.Lost)
		if u.CPUMicrosPerDelivery != nil {
			d := func(k string) string { return fmt.Sprintf("%.2f", u.CPUMicrosPerDelivery[k]) }
			fmt.Fprintf(w, "| %s | delivery | %d | %s | %s | %s | %s | %s | %s | | | | | | |\n",
				u.Name, u.Deliveries, d("gateway"), d("router"), d("session"), d("shoal"), d("kafka"), d("cassandra"))
		}
	}
}

// writeUnitLine prints one phase's costs.
func writeUnitLine(w io.Writer, u unitResult) {
	kinds := make([]string, 0, len(u.CPUMicros))
	for k := range u.CPUMicros {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	var cpu []string
	for _, k := range kinds {
		cpu = append(cpu, fmt.Sprintf("%s %.1f", k, u.CPUMicros[k]))
	}
	fmt.Fprintf(w, "%s: %d %ss; CPU-µs per %s: %s; kafka %.2f records, %.0f bytes; cql %.2f reads, %.2f writes; %d lost\n",
		u.Name, u.Count, u.Per, u.Per, strings.Join(cpu, ", "), u.KafkaRecords["total"], u.KafkaBytes, u.CQLReads, u.CQLWrites, u.Lost)
}
