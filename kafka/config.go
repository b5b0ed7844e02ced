package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/shoal-mqtt/shoal/internal/obs"
)

// Defaults of Config.
const (
	// DefaultClientID is the client id sent to the brokers.
	DefaultClientID = "shoal"
	// DefaultLinger is how long a partition's batch waits for more
	// records before it is sent, when nothing is in flight already.
	DefaultLinger = time.Duration(0)
	// DefaultMaxBufferedRecords bounds the records accepted by Produce
	// and not yet acknowledged; Produce waits for room beyond it.
	DefaultMaxBufferedRecords = 50_000
)

// How soon franz-go clients try again after a failure. With franz-go's
// defaults (metadata at most every 5s, retries backing off up to 5s) a
// producer resumed 0.8–4.4s after a restarted broker was ready (measured
// against a real Kafka, docs/kafka.md); these follow Kafka's Java clients
// (retry.backoff.ms 100, retry.backoff.max.ms 1000).
const (
	// metadataMinAge is the shortest time between two metadata requests;
	// after a failed one, the next comes this long after it.
	metadataMinAge = 500 * time.Millisecond
	// retryBackoffMin and retryBackoffMax bound the wait before a failed
	// request (a produce, a fetch, a group join) is retried.
	retryBackoffMin = 100 * time.Millisecond
	retryBackoffMax = time.Second
)

// retryBackoff returns the wait before retrying after fails consecutive
// failures: retryBackoffMin doubled per failure up to retryBackoffMax,
// ±20% so that clients do not retry in lockstep.
func retryBackoff(fails int) time.Duration {
	d := retryBackoffMax
	if fails < 10 {
		d = min(retryBackoffMin<<max(fails-1, 0), retryBackoffMax)
	}
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// Config configures a Client.
type Config struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// ClientID is sent to the brokers (their logs and quotas name it);
	// empty means DefaultClientID.
	ClientID string
	// Catalogue is the topic catalogue; the zero value means
	// DefaultCatalogue().
	Catalogue Catalogue
	// Linger is how long a partition's batch waits for more records before
	// it is sent. 0 (the default) sends at once; batches still form while
	// earlier requests are in flight, which is what matters under load
	// (see BenchmarkProduceConsume). A positive value trades latency for
	// fewer, larger requests.
	Linger time.Duration
	// MaxBufferedRecords bounds how many records Produce accepts before
	// they are acknowledged; beyond it Produce waits for room (or for its
	// context). 0 means DefaultMaxBufferedRecords.
	MaxBufferedRecords int
	// Compression of produced batches: "none" (or empty, the default),
	// "snappy", "lz4" or "zstd". The embedded backbone gains nothing from
	// compression; a real cluster across a network may.
	Compression string
	// Dial, if set, opens the client's connections to brokers instead of
	// a net.Dialer: Embedded.Dial reaches the embedded broker in-process.
	Dial func(ctx context.Context, network, host string) (net.Conn, error)
	// SASL, if set, authenticates every connection to the brokers (the
	// embedded backbone's: Embedded.ClientConfig). Nil: no SASL.
	SASL *SASL
	// TLS, if set, encrypts every connection to the brokers. Not with
	// Dial.
	TLS *tls.Config
	// GroupSessionTimeout is how long a consumer group member may go
	// without a heartbeat before the group gives its partitions to the
	// others: the failover time of a router or session service that dies.
	// 0 means DefaultGroupSessionTimeout. Brokers accept 6s–30min by
	// default (group.min/max.session.timeout.ms).
	GroupSessionTimeout time.Duration
	// RequestTimeout is how long a request to one broker may go
	// unanswered before its connection is dropped and the request
	// retried, to the partition's new leader if it moved: half of it is
	// the brokers' own limit for a produce (ProduceRequestTimeout, how long
	// a leader waits for its in-sync replicas), half the time the client
	// adds for the network (RequestTimeoutOverhead; a fetch's is its
	// maximum wait plus that half). It bounds how long the partitions of a
	// frozen broker (a zombie: its process stopped, its sockets open)
	// stall its producers and consumers; once one request to a broker
	// timed out, the client's connections to it are closed and it is not
	// dialled again for half of it (quarantine.go). 0 means
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Telemetry is what the client reports through: with Tracing, the
	// produce and consume spans of franz-go's kotel plugin, continued
	// from and written to each record's traceparent header.
	Telemetry obs.Providers
	// Feed, shared by the clients of a process whose roles share one
	// broker (Embedded.ClientConfig), hands the records they produce to
	// their consumers with ConsumeConfig.Local (the local delivery path,
	// feed.go). Nil: none.
	Feed *Feed
	// BackgroundLinger is how long a record given to ProduceBackground
	// may wait in the client for others before it goes to franz-go (and
	// then Linger as any other): records nobody waits for share fewer,
	// larger requests (background.go). 0 (the default): none wait.
	BackgroundLinger time.Duration
	// AdoptPartitions makes the catalogue's partition counts those of new
	// topics only: NewClient gives each catalogue topic that exists the
	// count it has, which EnsureTopics then checks against, and
	// Catalogue returns. So a data directory keeps the count it was made
	// with when the default changes (kafka.partitions unset on the
	// embedded backbone: EmbeddedPartitions).
	AdoptPartitions bool
}

// DefaultGroupSessionTimeout is Config.GroupSessionTimeout's default:
// shorter than Kafka's 45s, so that a dead member's partitions move on
// within seconds; members heartbeat every tenth of it.
const DefaultGroupSessionTimeout = 10 * time.Second

// DefaultRequestTimeout is Config.RequestTimeout's default: franz-go's
// own (a 10 s produce timeout plus a 10 s overhead) let a frozen leader
// stall its partitions 20 s.
const DefaultRequestTimeout = 10 * time.Second

// Validate checks the configuration and returns one error per bad key.
func (c Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("kafka.brokers: at least one broker is required"))
	}
	for i, b := range c.Brokers {
		if b == "" {
			errs = append(errs, fmt.Errorf("kafka.brokers[%d]: must not be empty", i))
		}
	}
	if c.Linger < 0 {
		errs = append(errs, fmt.Errorf("kafka.linger: must be ≥ 0, is %s", c.Linger))
	}
	if c.BackgroundLinger < 0 {
		errs = append(errs, fmt.Errorf("kafka.background_linger: must be ≥ 0, is %s", c.BackgroundLinger))
	}
	if c.MaxBufferedRecords < 0 {
		errs = append(errs, fmt.Errorf("kafka.max_buffered_records: must be ≥ 0, is %d", c.MaxBufferedRecords))
	}
	if c.SASL != nil {
		if err := c.SASL.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.TLS != nil && c.Dial != nil {
		errs = append(errs, errors.New("kafka.tls: not with a dialer of its own (the embedded backbone)"))
	}
	if c.GroupSessionTimeout != 0 && c.GroupSessionTimeout < time.Second {
		errs = append(errs, fmt.Errorf("kafka.group_session_timeout: must be ≥ 1s, is %s", c.GroupSessionTimeout))
	}
	if c.RequestTimeout != 0 && c.RequestTimeout < time.Second {
		errs = append(errs, fmt.Errorf("kafka.request_timeout: must be ≥ 1s, is %s", c.RequestTimeout))
	}
	if _, err := compressionCodec(c.Compression); err != nil {
		errs = append(errs, fmt.Errorf("kafka.compression: %w", err))
	}
	if !c.Catalogue.isZero() {
		errs = append(errs, c.Catalogue.Validate())
	}
	return errors.Join(errs...)
}

// withDefaults returns c with its zero values replaced by the defaults.
func (c Config) withDefaults() Config {
	if c.ClientID == "" {
		c.ClientID = DefaultClientID
	}
	if c.Catalogue.isZero() {
		c.Catalogue = DefaultCatalogue()
	}
	if c.MaxBufferedRecords == 0 {
		c.MaxBufferedRecords = DefaultMaxBufferedRecords
	}
	if c.GroupSessionTimeout == 0 {
		c.GroupSessionTimeout = DefaultGroupSessionTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	return c
}

func compressionCodec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "", "none":
		return kgo.NoCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("%q is not one of none, snappy, lz4, zstd", name)
}

// saslMechanism is franz-go's mechanism for s (already validated).
func saslMechanism(s SASL) sasl.Mechanism {
	switch s.Mechanism {
	case SASLPlain:
		return plain.Auth{User: s.User, Pass: s.Password}.AsMechanism()
	case SASLScramSHA256:
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha256Mechanism()
	default:
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism()
	}
}
