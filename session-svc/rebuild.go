package sessionsvc

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/shoal-mqtt/shoal/kafka"
)

// Rebuild applies records of shoal.sessions to a store as a [Service]
// does (the same partition state machine, batches, rounds and commits),
// but writes nothing to Kafka: every output (connect results, kicks,
// presence, removals, wills, forwarded inbox messages) is dropped. It
// rebuilds the session view from the log (`shoal views rebuild`,
// compose/views). What a session keeps of time comes from the records'
// timestamps (machine.eventTime), so the rebuilt sessions are those the
// service committed, up to what the view cannot get from the log (see
// docs/views.md).
//
// A Rebuild is used by one goroutine; Apply commits each batch to the
// store with the batch's last offset.
type Rebuild struct {
	m     *machine
	store Store
	log   *slog.Logger
	parts map[int32]*partition
}

// NewRebuild returns a Rebuild that commits to store, configured as cfg
// configures a Service (max_inbox, gateway_timeout) on the topics of cat.
func NewRebuild(cfg Config, cat kafka.Catalogue, store Store, log *slog.Logger) (*Rebuild, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("session config: %w", err)
	}
	quiet := slog.New(slog.DiscardHandler) // the machine's per-event logs are the live service's business
	return &Rebuild{
		m:     newMachine(cfg, cat, 1, time.Now, quiet).withStore(cfg, store, cat.Sessions.Partitions),
		store: store,
		log:   log,
		parts: make(map[int32]*partition),
	}, nil
}

// Apply applies b and commits the sessions it changed with its last
// offset. A partition is loaded from the store at its first batch, so a
// rebuild into a store that already holds a partition continues after
// its offset.
func (r *Rebuild) Apply(ctx context.Context, b kafka.Batch) error {
	p := r.parts[b.Partition]
	if p == nil {
		var err error
		if p, err = loadPartition(ctx, b.Partition, r.m, r.store); err != nil {
			return err
		}
		r.parts[b.Partition] = p
	}
	discard := func(context.Context, []output) error { return nil }
	return p.process(ctx, decodeBatch(b, r.log), discard)
}

// Offset returns the offset of the last record applied to partition, -1
// when none.
func (r *Rebuild) Offset(partition int32) int64 {
	if p := r.parts[partition]; p != nil {
		return p.nextOffset() - 1
	}
	return -1
}
