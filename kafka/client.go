package kafka

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/trace"

	"github.com/shoal-mqtt/shoal/internal/obs"
)

// Header is a Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// PartitionByKey as a record's Partition on a keyed topic lets the key decide
// the partition (PartitionForKey).
const PartitionByKey int32 = -1

// Record is one Kafka record, produced or consumed.
//
// Producing: set Topic, Key, Value, Headers and Partition; a zero Timestamp
// means now. On a keyed topic, Partition is PartitionByKey to let the key
// decide, or a partition ≥ 0 to force one (a broadcast of one event to
// every partition): the zero value forces partition 0. On the other topics
// it is the partition to write to. Once a record is given to
// Produce, neither it nor the bytes it refers to may change until its done
// callback runs; done sets Partition, Offset and Timestamp. A Record can be
// produced again after its done callback has run.
//
// Consuming: every field is set. Key, Value and header values alias the
// fetch response the record came in, which the client never reuses; they
// stay valid as long as anything refers to them (holding one small slice
// keeps the whole response, up to a megabyte per partition, in memory: copy
// what is kept long).
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []Header
	Timestamp time.Time
	// Context carries the record's trace when tracing is on
	// (Config.Telemetry), nil otherwise. On a record to produce it is the
	// parent of the kotel publish span (a role's span; without one, the
	// traceparent header is the parent); on a consumed record it is the
	// context of the kotel receive span, the parent of the consumer's own.
	Context context.Context

	// st is the franz-go record and bookkeeping Produce uses, allocated
	// once per Record (with it, by NewRecord) and reused.
	st *produceState
	// fs is what Fill reuses.
	fs *fillState
}

// produceState is what a Record carries through franz-go. kr.Context points
// at pc, inside the same allocation, which is how the promise finds the
// Record again without allocating a closure per produce.
type produceState struct {
	kr    kgo.Record
	pc    produceCtx
	khdrs [3]kgo.RecordHeader
}

// fillState is what Record.Fill reuses: the record's headers (the type, a
// traceparent, a hand-off mark) and the buffer of its value, header values
// and key.
type fillState struct {
	hdrs [3]Header
	buf  []byte
}

// produceCtx is the kgo.Record's Context while it is produced. As a
// context it never ends and holds no values: a buffered record is never
// cancelled, because franz-go fails every buffered record of a partition
// when the first one's context ends, which would let one caller's
// cancellation fail another's records. Its methods read no field: franz-go
// calls them from its own goroutines while the promise clears the fields.
type produceCtx struct {
	c        *Client
	r        *Record
	done     func(*Record, error)
	sync     *syncWait
	refused  error
	acquired bool
	start    time.Time  // when Produce took it, for shoal.kafka.produce.duration
	order    *partOrder // where the feed counts it (feedorder.go), or nil
}

func (*produceCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*produceCtx) Done() <-chan struct{}       { return nil }
func (*produceCtx) Err() error                  { return nil }

// Value returns the produceCtx itself for produceCtxKey: with tracing on,
// kotel wraps it in the publish span's context, through which promise
// finds it again.
func (pc *produceCtx) Value(k any) any {
	if k == (produceCtxKey{}) {
		return pc
	}
	return nil
}

// produceCtxKey is the context key of a produceCtx.
type produceCtxKey struct{}

// syncWait collects the outcome of one ProduceAll call.
type syncWait struct {
	left atomic.Int64
	mu   sync.Mutex
	err  error
	done chan struct{}
}

// load copies r into the franz-go record.
func (st *produceState) load(r *Record) {
	kr := &st.kr
	*kr = kgo.Record{
		Topic:     r.Topic,
		Partition: r.Partition,
		Key:       r.Key,
		Value:     r.Value,
		Timestamp: r.Timestamp,
	}
	if n := len(r.Headers); n > 0 {
		hs := st.khdrs[:0]
		if n > len(st.khdrs) {
			hs = make([]kgo.RecordHeader, 0, n)
		}
		for _, h := range r.Headers {
			hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		kr.Headers = hs
	}
	kr.Context = &st.pc
}

// traceParent makes the kotel publish span of st a child of r's trace:
// the span in r.Context, or the traceparent header. Only with tracing on.
func (st *produceState) traceParent(r *Record) {
	sc := trace.SpanContextFromContext(r.Context)
	if !sc.IsValid() {
		sc = obs.SpanContext(r.Header(HeaderTraceparent))
	}
	if sc.IsSampled() { // kotel records only sampled traces (sampledOnly)
		st.kr.Context = trace.ContextWithSpanContext(&st.pc, sc)
	}
}

// Client is Shoal's door to Kafka: one idempotent producer (acks=all) shared
// by the roles of a process, the topic catalogue, and Consume, which runs a
// consumer of its own per call. It is safe for concurrent use.
type Client struct {
	cfg    Config
	log    *slog.Logger
	common []kgo.Opt // seed brokers, client id, logger: shared with consumers
	cl     *kgo.Client
	adm    *kadm.Client
	sem    chan struct{}  // one token per record accepted and not yet done
	met    *clientMetrics // produce latency and errors, consumer lag (metrics.go)

	// inflight counts records given to franz-go whose promise has not
	// finished, so that Close can wait for every done callback.
	inflight atomic.Int64
	// tracing: records carry spans (Config.Telemetry.Tracing).
	tracing bool
	// bg holds ProduceBackground's records (background.go).
	bg background

	closeOnce sync.Once
	closed    chan struct{}
}

// NewClient starts a client for cfg and waits until a broker answers (or ctx
// is done), logging each failed attempt.
//
// The producer is idempotent with acks=all: a record is acknowledged once
// every in-sync replica has it, and retries never duplicate or reorder it.
// Retriable errors are retried without limit (franz-go logs each at warn
// level through log); a record fails only on a non-retriable error, an
// unknown topic, or Close. Records of keyed catalogue topics go to
// PartitionForKey(key, partitions) unless their Partition is ≥ 0, those of
// the other topics to their Partition; on topics outside the catalogue a
// record with a key is treated as keyed, one without as not.
func NewClient(ctx context.Context, cfg Config, log *slog.Logger) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new kafka client: %w", err)
	}
	cfg = cfg.withDefaults()
	codec, err := compressionCodec(cfg.Compression)
	if err != nil {
		return nil, fmt.Errorf("new kafka client: %w", err)
	}
	c := &Client{
		cfg: cfg,
		log: log,
		common: []kgo.Opt{
			kgo.SeedBrokers(cfg.Brokers...),
			kgo.ClientID(cfg.ClientID),
			kgo.WithLogger(kgoLogger{log}),
			kgo.DisableClientMetrics(),
			kgo.MetadataMinAge(metadataMinAge),
			kgo.RetryBackoffFn(retryBackoff),
			kgo.RequestTimeoutOverhead(cfg.RequestTimeout / 2),
		},
		// franz-go's own limit is twice ours so that it never blocks:
		// its count drops only after our promise released the token.
		sem:    make(chan struct{}, cfg.MaxBufferedRecords),
		closed: make(chan struct{}),
	}
	// Every connection is dialled through the quarantine, which keeps
	// new ones away from a broker that let a request time out
	// (quarantine.go); the hook tells it of those requests.
	q := newQuarantine(cfg.RequestTimeout/2, log)
	var tlsCfg *tls.Config
	if cfg.TLS != nil {
		tlsCfg = cfg.TLS.Clone()
	}
	c.common = append(c.common, kgo.Dialer(q.dialer(cfg.Dial, tlsCfg)), kgo.WithHooks(q))
	c.tracing = cfg.Telemetry.Tracing
	c.initBackground(cfg.BackgroundLinger)
	if cfg.SASL != nil {
		c.common = append(c.common, kgo.SASL(saslMechanism(*cfg.SASL)))
	}
	opts := append(c.common[:len(c.common):len(c.common)],
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProduceRequestTimeout(cfg.RequestTimeout/2),
		kgo.RecordRetries(math.MaxInt64),
		kgo.RecordDeliveryTimeout(0),
		kgo.ProducerLinger(cfg.Linger),
		kgo.MaxBufferedRecords(2*cfg.MaxBufferedRecords),
		kgo.ProducerBatchCompression(codec),
		kgo.RecordPartitioner(partitioner(cfg.Catalogue)),
	)
	if n := cfg.Catalogue.MaxMessageBytes(); n > 0 {
		// A batch as large as the topics accept: one record of the largest
		// MQTT packet the gateways take fits, where franz-go's default
		// (1,000,012 bytes) refused a PUBLISH just under 1 MiB.
		opts = append(opts, kgo.ProducerBatchMaxBytes(n))
	}
	if c.tracing {
		opts = append(opts, kgo.WithHooks(c.kotelTracer("")))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("new kafka client: %w", err)
	}
	c.cl = cl
	c.adm = kadm.NewClient(cl)
	if err := c.waitForBroker(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("new kafka client for %v: %w", cfg.Brokers, err)
	}
	if cfg.AdoptPartitions {
		if err := c.adoptPartitions(ctx); err != nil {
			cl.Close()
			return nil, fmt.Errorf("new kafka client for %v: %w", cfg.Brokers, err)
		}
	}
	if c.met, err = newClientMetrics(cfg.Telemetry, c.cfg.Catalogue); err != nil {
		log.Warn("kafka client metrics", "err", err)
	}
	return c, nil
}

// waitForBroker pings until a broker answers, backing off up to 2s.
func (c *Client) waitForBroker(ctx context.Context) error {
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := c.cl.Ping(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("no broker answered: %w", errors.Join(ctx.Err(), err))
		}
		c.log.Warn("kafka brokers unreachable, retrying", "brokers", c.cfg.Brokers, "attempt", attempt, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("no broker answered: %w", errors.Join(ctx.Err(), err))
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// partitioner hashes keys for keyed topics with PartitionForKey, unless the
// record names a partition (≥ 0: a broadcast to every partition, such as a
// wildcard subscription change), and takes Record.Partition for the others.
func partitioner(cat Catalogue) kgo.Partitioner {
	byKey := func(r *kgo.Record, n int) int {
		if r.Partition >= 0 {
			return int(r.Partition)
		}
		return int(PartitionForKey(r.Key, int32(n)))
	}
	manual := func(r *kgo.Record, _ int) int { return int(r.Partition) }
	keyOrManual := func(r *kgo.Record, n int) int {
		if r.Key != nil {
			return byKey(r, n)
		}
		return manual(r, n)
	}
	return kgo.BasicConsistentPartitioner(func(topic string) func(*kgo.Record, int) int {
		spec, ok := cat.Spec(topic)
		switch {
		case !ok:
			return keyOrManual
		case spec.Keyed:
			return byKey
		default:
			return manual
		}
	})
}

// InFlight returns how many records the client has taken and not yet
// seen acknowledged or failed: a measure of how busy its producer is.
func (c *Client) InFlight() int64 { return c.inflight.Load() }

// Catalogue returns the client's topic catalogue (with the partition
// counts of existing topics under Config.AdoptPartitions).
func (c *Client) Catalogue() Catalogue { return c.cfg.Catalogue }

// adoptPartitions gives each catalogue topic that exists its partition
// count (Config.AdoptPartitions). It runs in NewClient, before anything
// reads the catalogue.
func (c *Client) adoptPartitions(ctx context.Context) error {
	existing, _, err := c.describeTopics(ctx, c.cfg.Catalogue.names())
	if err != nil {
		return fmt.Errorf("adopt partition counts: %w", err)
	}
	for _, s := range c.cfg.Catalogue.specs() {
		d := existing[s.Name]
		if n := int32(len(d.replicas)); d.err == nil && n > 0 && n != s.Partitions {
			c.log.Info("kafka topic keeps its partition count", "topic", s.Name, "partitions", n, "new_topics", s.Partitions)
			s.Partitions = n
		}
	}
	return nil
}

// Partitions returns the number of partitions of a catalogue topic, 0 for a
// topic outside the catalogue.
func (c *Client) Partitions(topic string) int32 {
	spec, _ := c.cfg.Catalogue.Spec(topic)
	return spec.Partitions
}

// check refuses records the catalogue says cannot be produced.
func (c *Client) check(r *Record) error {
	spec, ok := c.cfg.Catalogue.Spec(r.Topic)
	switch {
	case r.Topic == "":
		return errors.New("produce: record has no topic")
	case !ok:
		return nil
	case spec.Keyed && r.Key == nil:
		return fmt.Errorf("produce to %s: the topic is keyed and the record has no key", r.Topic)
	case (!spec.Keyed && r.Partition < 0) || r.Partition >= spec.Partitions:
		return fmt.Errorf("produce to %s: partition %d is outside [0, %d)", r.Topic, r.Partition, spec.Partitions)
	}
	return nil
}

// acquire takes a buffer token, waiting for one while ctx allows.
func (c *Client) acquire(ctx context.Context) error {
	if ctx.Done() != nil {
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	select {
	case c.sem <- struct{}{}:
		return nil
	default:
	}
	select {
	case c.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closed:
		return kgo.ErrClientClosed
	}
}

// Produce sends r asynchronously and calls done(r, err) exactly once, when
// Kafka has acknowledged r (err == nil, Partition, Offset and Timestamp set)
// or r has failed. done runs on franz-go's promise goroutine, which runs the
// callbacks of all records serially in the order they complete (records of
// one partition in produce order): it must be quick and must not block, nor
// call Produce, ProduceSync, Flush or Close (they may wait on later
// callbacks). done may be nil.
//
// ctx bounds only the wait for room in the buffer (Config.MaxBufferedRecords)
// and refuses the record when already done; once accepted, a record is not
// cancelled (see Client.Close).
func (c *Client) Produce(ctx context.Context, r *Record, done func(*Record, error)) {
	c.SendBackground()
	c.produce(ctx, c.recordState(r, done))
}

// recordState loads r into its own produceState for Produce and
// ProduceBackground, with done as its callback.
func (c *Client) recordState(r *Record, done func(*Record, error)) *produceState {
	st := r.st
	if st == nil {
		st = new(produceState)
		r.st = st
	}
	st.load(r)
	if c.tracing {
		st.traceParent(r)
	}
	st.pc = produceCtx{c: c, r: r, done: done}
	return st
}

// produce hands st to franz-go. A refused record goes through franz-go too
// (as a record without topic, which it fails at once) so that its callback
// runs on the promise goroutine like any other.
func (c *Client) produce(ctx context.Context, st *produceState) {
	if err := c.check(st.pc.r); err != nil {
		st.pc.refused = err
	} else if err := c.acquire(ctx); err != nil {
		st.pc.refused = fmt.Errorf("produce to %s: %w", st.pc.r.Topic, err)
	} else {
		st.pc.acquired = true
	}
	if st.pc.refused != nil {
		st.kr.Topic = ""
	}
	st.pc.start = time.Now()
	st.pc.order = c.cfg.Feed.taken(st.pc.r)
	c.inflight.Add(1)
	c.cl.Produce(context.Background(), &st.kr, promise)
}

// ErrTooLarge is the error of a record larger than the topic
// (max.message.bytes) or the producer's batch bound accepts.
var ErrTooLarge error = kerr.MessageTooLarge

// IsTooLarge reports whether err says a record was too large to be
// written (ErrTooLarge, or a broker's RECORD_LIST_TOO_LARGE): writing it
// again cannot succeed.
func IsTooLarge(err error) bool {
	return errors.Is(err, ErrTooLarge) || errors.Is(err, kerr.RecordListTooLarge)
}

// promise is the franz-go callback of every record produced by Produce and
// ProduceSync.
func promise(kr *kgo.Record, err error) {
	pc, ok := kr.Context.(*produceCtx)
	if !ok {
		// Wrapped by the kotel publish span (tracing on).
		if pc, ok = kr.Context.Value(produceCtxKey{}).(*produceCtx); !ok {
			return // not ours: cannot happen
		}
	}
	c, r, done, sw := pc.c, pc.r, pc.done, pc.sync
	if pc.acquired {
		<-c.sem
	}
	c.met.produced(r.Topic, pc.start, cmp.Or(pc.refused, err))
	switch {
	case pc.refused != nil:
		err = pc.refused
	case err != nil:
		err = fmt.Errorf("produce to %s: %w", r.Topic, err)
	}
	if err == nil {
		// Before done: the caller may reuse the record's bytes after it.
		c.cfg.Feed.push(kr)
	}
	if pc.order != nil {
		pc.order.done(err == nil, kr.Offset)
	}
	// kr is left alone: franz-go goroutines may still read it. pc's fields
	// are ours only.
	*pc = produceCtx{}
	switch {
	case sw != nil:
		sw.finish(err)
	case done != nil:
		if err == nil {
			r.Partition, r.Offset, r.Timestamp = kr.Partition, kr.Offset, kr.Timestamp
		}
		done(r, err)
	case err == nil:
		r.Partition, r.Offset, r.Timestamp = kr.Partition, kr.Offset, kr.Timestamp
	}
	c.inflight.Add(-1)
}

func (sw *syncWait) finish(err error) {
	if err != nil {
		sw.mu.Lock()
		if sw.err == nil {
			sw.err = err
		}
		sw.mu.Unlock()
	}
	if sw.left.Add(-1) == 0 {
		close(sw.done)
	}
}

// ProduceSync produces rs and waits until all are acknowledged, returning
// the first error. On success every record's Partition, Offset and
// Timestamp are set. A record the catalogue refuses (no key for a keyed
// topic, partition out of range) fails the call before anything is
// produced. If ctx ends first, ProduceSync returns its error at once and
// the records already accepted may still be written: their fields are then
// not updated, and the bytes they refer to must stay unchanged.
func (c *Client) ProduceSync(ctx context.Context, rs ...*Record) error {
	p, err := c.ProduceAll(ctx, rs...)
	if err != nil {
		return fmt.Errorf("produce sync: %w", err)
	}
	select {
	case <-p.sw.done:
	case <-ctx.Done():
		return fmt.Errorf("produce sync of %d records: %w", len(rs), ctx.Err())
	}
	err = p.result()
	p.Release()
	if err != nil {
		return fmt.Errorf("produce sync: %w", err)
	}
	return nil
}

// Pending is the outcome of a ProduceAll call: known once every record of
// the call is acknowledged or has failed.
type Pending struct {
	sw     syncWait
	states []produceState
	rs     []*Record
}

// pendings recycles what Pending.Release gives back: a caller producing a
// batch of records per poll (the router) makes no garbage for it.
var pendings sync.Pool

// Done is closed once every record of the call is done (acknowledged or
// failed); Wait then returns at once.
func (p *Pending) Done() <-chan struct{} { return p.sw.done }

// Wait waits until every record of the call is done and returns the first
// error, or returns ctx's error if it ends first (the records are then
// still in flight). On success every record's Partition, Offset and
// Timestamp are set.
func (p *Pending) Wait(ctx context.Context) error {
	select {
	case <-p.sw.done:
	case <-ctx.Done():
		return fmt.Errorf("produce of %d records: %w", len(p.rs), ctx.Err())
	}
	return p.result()
}

// Release gives p's memory back for later ProduceAll calls. Call it once,
// after the last use of p, and only once Done is closed (franz-go has let
// go of the records); a Pending not done is left to the garbage collector.
// Releasing is optional.
func (p *Pending) Release() {
	select {
	case <-p.sw.done:
	default:
		return
	}
	p.rs = nil // the caller's slice (variadic): not cleared
	p.sw.err = nil
	pendings.Put(p)
}

// result returns the call's first error, or sets the records' fields; the
// call is done.
func (p *Pending) result() error {
	if p.sw.err != nil {
		return p.sw.err
	}
	for i, r := range p.rs {
		kr := &p.states[i].kr
		r.Partition, r.Offset, r.Timestamp = kr.Partition, kr.Offset, kr.Timestamp
	}
	return nil
}

// ProduceAll produces rs asynchronously and returns at once, with the
// Pending outcome of all of them: ProduceSync without the wait, for a
// caller that has other work to do meanwhile. Records are written in the
// order given per partition, after every record produced before. It
// refuses the call, producing nothing, if ctx is done or the catalogue
// refuses a record; ctx otherwise bounds only the wait for buffer room
// (Config.MaxBufferedRecords), and a record that finds none fails. Until
// the Pending is done, the records and the bytes they refer to must stay
// unchanged.
func (c *Client) ProduceAll(ctx context.Context, rs ...*Record) (*Pending, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, r := range rs {
		if err := c.check(r); err != nil {
			return nil, err
		}
	}
	c.SendBackground()
	p, _ := pendings.Get().(*Pending)
	if p == nil {
		p = &Pending{}
	}
	p.rs = rs
	p.sw.done = make(chan struct{})
	if len(rs) == 0 {
		close(p.sw.done)
		return p, nil
	}
	// States of their own, not the records': after an early return of a
	// wait franz-go may still hold them, and the caller may produce the
	// records again. A released Pending's states are free: its records
	// were all done.
	if cap(p.states) < len(rs) {
		p.states = make([]produceState, len(rs), len(rs)+len(rs)/2)
	}
	p.states = p.states[:len(rs)]
	p.sw.left.Store(int64(len(rs)))
	for i, r := range rs {
		st := &p.states[i]
		st.load(r)
		if c.tracing {
			st.traceParent(r)
		}
		st.pc = produceCtx{c: c, r: r, sync: &p.sw}
		c.produce(ctx, st)
	}
	return p, nil
}

// Flush sends the buffered records at once and waits until all records
// accepted so far are done, or ctx is.
func (c *Client) Flush(ctx context.Context) error {
	c.SendBackground()
	if err := c.cl.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return nil
}

// Close closes the client. Records not yet acknowledged fail (call Flush
// first to wait for them); when Close returns, every done callback has run.
// Produce after Close fails the record. Consumers started by Consume stop on
// their own contexts, not on Close. Close is idempotent.
func (c *Client) Close() {
	c.closeOnce.Do(func() {
		c.met.close()
		close(c.closed)
		// The held records go to franz-go (or fail, when the buffer
		// has no room: nothing waits for room once closed), which fails
		// what is not acknowledged below.
		c.closeBackground()
		c.cl.Close()
		// franz-go has failed everything it held; its promise goroutine
		// may still be running the callbacks.
		for c.inflight.Load() > 0 {
			time.Sleep(time.Millisecond)
		}
	})
}

// Reachable returns nil as soon as one broker of the cluster answers an
// ApiVersions request within ctx: every broker the client knows of is
// asked at once, so a broker that is down or frozen (SIGSTOP, a zombie)
// does not hide the others, and only a client cut off from all of them
// fails (a network partition, or the whole cluster down). Before the
// client learned any broker it pings the seed brokers. The gateway asks it
// every second (gateway.kafka_timeout).
func (c *Client) Reachable(ctx context.Context) error {
	brokers := c.cl.DiscoveredBrokers()
	if len(brokers) == 0 {
		return c.cl.Ping(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(brokers))
	for _, b := range brokers {
		go func() {
			_, err := b.Request(ctx, kmsg.NewPtrApiVersionsRequest())
			errs <- err
		}()
	}
	var all []error
	for range brokers {
		err := <-errs
		if err == nil {
			return nil
		}
		all = append(all, err)
	}
	return fmt.Errorf("no kafka broker answered: %w", errors.Join(all...))
}
