package routersvc

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/shoal-mqtt/shoal/kafka"
)

// Rebuild applies records of shoal.messages to shards as a [Router] does
// (the same [Shard.Apply], decoder and retained quota) and hands back each
// batch's mutations, but produces nothing: the deliveries and inbox
// appends a shard makes are dropped, so a rebuild of the views
// (`shoal views rebuild`, compose/views) never writes to Kafka.
//
// Time: a shard's clock (message and retained expiry) reads the timestamp
// of the record being applied, the newest seen in its partition, instead
// of the wall clock: a rebuild decides from the log, and what it decides
// differently from the live router (which applied each record at its own
// wall-clock time) concerns only messages expired by either clock, which
// nobody can receive any more. With no Presence feed every client counts
// as online at the route of its newest subscription change: presence
// changes deliveries only, which are dropped, and which expired retained
// messages a new subscription finds first (expired as well).
//
// A Rebuild is used by one goroutine.
type Rebuild struct {
	cfg      Config
	presence *Presence
	quota    *RetainedQuota
	dec      kafka.PublishDecoder
	shards   map[int32]*rebuildShard
	skipped  int64
}

type rebuildShard struct {
	s     *Shard
	out   *Output
	nowUs int64 // the newest record timestamp applied: the shard's clock
}

// NewRebuild returns a Rebuild of shards configured as cfg configures a
// Router's, with limits as the retained quota and partitions the partition
// count of shoal.messages (the quota's share per shard).
func NewRebuild(cfg Config, limits RetainedLimits, partitions int32, log *slog.Logger) (*Rebuild, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("router config: %w", err)
	}
	return &Rebuild{
		cfg:      cfg,
		presence: NewPresence(),
		quota:    NewRetainedQuota(limits, partitions, log),
		shards:   make(map[int32]*rebuildShard),
	}, nil
}

func (r *Rebuild) shard(partition int32) *rebuildShard {
	if rs := r.shards[partition]; rs != nil {
		return rs
	}
	rs := &rebuildShard{out: NewOutput()}
	rs.s = NewShard(partition, r.presence, func() time.Time { return time.UnixMicro(rs.nowUs) })
	rs.s.SetMaxTargets(r.cfg.MaxTargetsPerDelivery)
	rs.s.SetSharedStrategy(r.cfg.SharedStrategy)
	rs.s.SetRetainedQuota(r.quota)
	r.shards[partition] = rs
	return rs
}

// Apply applies b to its partition's shard, as Router.apply does, and
// returns the mutations to store (nil when the shard's offset did not
// move). They stay valid until the next Apply of that partition; the
// caller must store them before then.
func (r *Rebuild) Apply(b kafka.Batch) *Mutations {
	rs := r.shard(b.Partition)
	s, out := rs.s, rs.out
	out.Reset()
	before := s.Offset()
	s.ExpireRetained(out)
	for _, rec := range b.Records {
		if rec.Offset <= s.Offset() {
			continue
		}
		env, err := r.dec.Decode(rec)
		if err != nil {
			s.Skip(rec.Offset, out)
			r.skipped++
			continue
		}
		ts := env.GetTimestampUs()
		if ts <= 0 {
			ts = rec.Timestamp.UnixMicro()
		}
		rs.nowUs = max(rs.nowUs, ts)
		if err := s.Apply(env, rec.Offset, out); err != nil {
			r.skipped++ // a malformed record is skipped, as by Router
		}
		// The deliveries refer to env, which the next record reuses:
		// dropped now, never produced.
		out.dropDeliveries()
	}
	if s.Offset() == before && out.Mutations.Len() == 0 {
		return nil
	}
	return &out.Mutations
}

// Offset returns the offset of the last record applied to partition's
// shard, -1 when none.
func (r *Rebuild) Offset(partition int32) int64 {
	if rs := r.shards[partition]; rs != nil {
		return rs.s.Offset()
	}
	return -1
}

// Skipped returns how many records could not be decoded or applied (the
// router skips them too, logging each).
func (r *Rebuild) Skipped() int64 { return r.skipped }
