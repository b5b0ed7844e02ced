package routersvc

import (
	"errors"
	"fmt"
	"time"
)

// Config is the router's section of Shoal's configuration (`router.*`).
type Config struct {
	// Group is the Kafka consumer group that divides the partitions of
	// shoal.messages between router instances (`router.group`): each
	// instance loads the shards of the partitions assigned to it and drops
	// those revoked. Empty: this instance owns Partitions by explicit
	// assignment, as `shoal all` on the embedded backbone does.
	Group string `yaml:"group"`
	// Partitions are the partitions of shoal.messages owned without a
	// group (`router.partitions`); empty means every partition of the
	// catalogue's topic. Must be empty with a group.
	Partitions []int32 `yaml:"partitions"`
	// MaxTargetsPerDelivery bounds the targets of one delivery record
	// (`router.max_targets_per_delivery`); a publish with more targets on
	// one gateway becomes several records.
	MaxTargetsPerDelivery int `yaml:"max_targets_per_delivery"`
	// SharedStrategy chooses the member of a shared subscription that gets
	// a message (`router.shared_strategy`): "round_robin" (the default)
	// or "hash", a member picked from the message's identity, so spread
	// evenly, and the same on a replay of the log.
	SharedStrategy string `yaml:"shared_strategy"`
	// PresenceTimeout bounds the wait for shoal.presence to be read at
	// start (`router.presence_timeout`): the router consumes shoal.messages
	// once it has read every presence partition up to the end offset it
	// had at start, or after PresenceTimeout (with a warning) if the end
	// offsets cannot be listed or reached by then.
	PresenceTimeout time.Duration `yaml:"presence_timeout"`
	// RetryBackoff is the first wait after a failed produce of deliveries
	// or a failed store write (`router.retry_backoff`); it doubles up to
	// MaxRetryBackoff (`router.max_retry_backoff`). The router retries
	// until it succeeds or stops: the partition waits meanwhile.
	RetryBackoff    time.Duration `yaml:"retry_backoff"`
	MaxRetryBackoff time.Duration `yaml:"max_retry_backoff"`
	// MaxPollsInFlight bounds the polls of shoal.messages applied whose
	// deliveries are not yet durable or whose state is not yet stored
	// (`router.max_polls_in_flight`): the router applies the next poll
	// while Kafka acknowledges the deliveries of the previous ones and the
	// store writes them, in poll order. 1 applies a poll only once the
	// previous one is durable and stored.
	MaxPollsInFlight int `yaml:"max_polls_in_flight"`
	// OffsetInterval is how long a shard's offset may stay unstored while
	// its records change no state (publishes without a retained flag:
	// only the offset moves) (`router.offset_interval`). A record that
	// changes state is stored at once, with the offset. A crash then
	// replays at most this much of each partition's traffic, which
	// repeats deliveries that gateways and inboxes drop by their source
	// offset. 0 stores the offset of every poll.
	OffsetInterval time.Duration `yaml:"offset_interval"`
}

// The shared-subscription strategies.
const (
	SharedRoundRobin = "round_robin"
	SharedHash       = "hash"
)

// Defaults of the pipeline between applying polls and storing them.
const (
	// DefaultMaxPollsInFlight lets the router apply polls for a few
	// produce round trips ahead of the store.
	DefaultMaxPollsInFlight = 16
	// DefaultOffsetInterval: Kafka's own consumers commit every 5 s by
	// default; a second bounds what a crash replays to one second of
	// traffic and costs each shard one store write per second when only
	// publishes flow.
	DefaultOffsetInterval = time.Second
)

// DefaultConfig returns the configuration Shoal runs with unless told
// otherwise.
func DefaultConfig() Config {
	return Config{
		MaxTargetsPerDelivery: DefaultMaxTargets,
		SharedStrategy:        SharedRoundRobin,
		PresenceTimeout:       30 * time.Second,
		RetryBackoff:          100 * time.Millisecond,
		MaxRetryBackoff:       5 * time.Second,
		MaxPollsInFlight:      DefaultMaxPollsInFlight,
		OffsetInterval:        DefaultOffsetInterval,
	}
}

// Validate checks the configuration and returns one error per bad key,
// each naming it.
func (c Config) Validate() error {
	var errs []error
	if c.Group != "" && len(c.Partitions) > 0 {
		errs = append(errs, errors.New("router.partitions: must be empty when router.group is set (the group assigns partitions)"))
	}
	seen := make(map[int32]bool, len(c.Partitions))
	for i, p := range c.Partitions {
		if p < 0 {
			errs = append(errs, fmt.Errorf("router.partitions[%d]: %d is negative", i, p))
		}
		if seen[p] {
			errs = append(errs, fmt.Errorf("router.partitions[%d]: %d is listed twice", i, p))
		}
		seen[p] = true
	}
	if c.SharedStrategy != SharedRoundRobin && c.SharedStrategy != SharedHash {
		errs = append(errs, fmt.Errorf("router.shared_strategy: %q is not %q or %q", c.SharedStrategy, SharedRoundRobin, SharedHash))
	}
	if c.MaxTargetsPerDelivery < 1 {
		errs = append(errs, fmt.Errorf("router.max_targets_per_delivery: must be ≥ 1, is %d", c.MaxTargetsPerDelivery))
	}
	if c.PresenceTimeout <= 0 {
		errs = append(errs, fmt.Errorf("router.presence_timeout: must be > 0, is %s", c.PresenceTimeout))
	}
	if c.RetryBackoff <= 0 {
		errs = append(errs, fmt.Errorf("router.retry_backoff: must be > 0, is %s", c.RetryBackoff))
	}
	if c.MaxRetryBackoff < c.RetryBackoff {
		errs = append(errs, fmt.Errorf("router.max_retry_backoff: must be ≥ router.retry_backoff (%s), is %s", c.RetryBackoff, c.MaxRetryBackoff))
	}
	if c.MaxPollsInFlight < 1 {
		errs = append(errs, fmt.Errorf("router.max_polls_in_flight: must be ≥ 1, is %d", c.MaxPollsInFlight))
	}
	if c.OffsetInterval < 0 {
		errs = append(errs, fmt.Errorf("router.offset_interval: must be ≥ 0, is %s", c.OffsetInterval))
	}
	return errors.Join(errs...)
}
