package sessionsvc

import (
	"errors"
	"fmt"
	"time"

	"github.com/shoal-mqtt/shoal/kafka"
)

// Config is the session service's section of Shoal's configuration
// (`session.*`).
type Config struct {
	// Group is the Kafka consumer group that shares the partitions of
	// shoal.sessions between session service instances (`session.group`).
	// Empty: this instance consumes every partition by explicit assignment,
	// as `shoal all` on the embedded backbone does. In group mode each
	// instance loads the partitions assigned to it and drops those revoked;
	// its SessionTicks go to the partitions it owns.
	Group string `yaml:"group"`
	// RetryBackoff is how long the service waits after a failed batch (a
	// produce or store error) before it reloads its state from the store
	// and consumes again from the stored offsets (`session.retry_backoff`).
	RetryBackoff time.Duration `yaml:"retry_backoff"`
	// ExpiryCheck is the period of the SessionTick the service writes to
	// every partition it owns (`session.expiry_check`): gateways gone
	// silent are judged at these ticks. Session expiry and delayed wills
	// do not wait for them: the service writes a tick to a partition when
	// its earliest pending deadline passes.
	ExpiryCheck time.Duration `yaml:"expiry_check"`
	// MaxInbox bounds the QoS 1/2 messages kept for one persistent session
	// that its client has not acknowledged, queued while offline or in
	// flight (`session.max_inbox`, at most 32767); beyond it new messages
	// are dropped and counted (logged at warn).
	MaxInbox int `yaml:"max_inbox"`
	// GatewayTimeout is how long a gateway may go without a heartbeat
	// before the service ends its clients' connections uncleanly: wills
	// become due, persistent sessions start expiring and keep queuing
	// (`session.gateway_timeout`). Checked at each SessionTick, so a dead
	// gateway's clients go offline within GatewayTimeout + ExpiryCheck.
	GatewayTimeout time.Duration `yaml:"gateway_timeout"`
	// EndedCache bounds the ended sessions the service keeps in memory
	// (`session.ended_cache`). An ended session is kept in the store, and
	// read back from it when its client comes again (one read of the
	// database per batch in distributed mode); up to EndedCache of the most
	// recently ended stay in memory too, so that those clients skip the
	// read. -1 (the default) is 0 with the embedded store, whose reads take
	// microseconds, and DefaultEndedCache with a CQL store. Each costs about
	// 600 bytes.
	EndedCache int `yaml:"ended_cache"`
}

// DefaultEndedCache is session.ended_cache with a CQL store: about 60 MB.
const DefaultEndedCache = 100_000

// DefaultConfig returns the configuration Shoal runs with unless told
// otherwise.
func DefaultConfig() Config {
	return Config{RetryBackoff: time.Second, ExpiryCheck: 5 * time.Second, MaxInbox: 1000, GatewayTimeout: 10 * time.Second, EndedCache: -1}
}

// Validate checks the configuration and returns one error per bad key,
// each naming it.
func (c Config) Validate() error {
	var errs []error
	if c.RetryBackoff <= 0 {
		errs = append(errs, fmt.Errorf("session.retry_backoff: must be > 0, is %s", c.RetryBackoff))
	}
	if c.MaxInbox < 1 || c.MaxInbox > kafka.MaxInboxPacketID {
		// Every inbox entry holds a packet identifier of 1–kafka.MaxInboxPacketID.
		errs = append(errs, fmt.Errorf("session.max_inbox: must be 1–%d, is %d", kafka.MaxInboxPacketID, c.MaxInbox))
	}
	if c.GatewayTimeout <= 0 {
		errs = append(errs, fmt.Errorf("session.gateway_timeout: must be > 0, is %s", c.GatewayTimeout))
	}
	if c.EndedCache < -1 {
		errs = append(errs, fmt.Errorf("session.ended_cache: must be ≥ 0, or -1 for the store's default, is %d", c.EndedCache))
	}
	if c.ExpiryCheck <= 0 {
		errs = append(errs, fmt.Errorf("session.expiry_check: must be > 0, is %s", c.ExpiryCheck))
	}
	return errors.Join(errs...)
}
