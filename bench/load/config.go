package load

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// Config is one run of the generator.
type Config struct {
	// Addr is the broker's address, host:port, or a comma-separated list
	// of them (the nodes of a distributed broker): client i connects to
	// the address i modulo the list's length.
	Addr string
	// SubscriberAddr, when set, is where subscribers connect instead of
	// Addr, a list as Addr is: publishers on one node of a distributed
	// broker, subscribers on another.
	SubscriberAddr string
	Scenario       string         // pairs, fanout, connections, wildcards, latency, offline
	Version        packet.Version // V5 (default) or V311
	QoS            packet.QoS
	Payload        int // bytes, at least StampSize
	// Clients is the number of pairs (pairs, latency), of fan-out
	// subscribers, of idle connections, or of wildcard subscribers.
	Clients int
	// Publishers is the number of wildcard publishers.
	Publishers int
	// SessionExpiry, when > 0, makes every client's session persistent: it
	// outlives the connection by this long (MQTT 5's Session Expiry
	// Interval, whole seconds). A persistent session's QoS 1/2 messages
	// are kept for it while it is offline. At the end of the run the
	// clients end their sessions (DISCONNECT with an expiry of 0) unless
	// KeepSessions.
	SessionExpiry time.Duration
	// Resume connects with Clean Start 0, taking up the sessions an
	// earlier run kept (KeepSessions) under the same Prefix; a CONNACK's
	// Session Present is counted (ConnectStats.SessionPresent).
	Resume bool
	// KeepSessions leaves the persistent sessions on the broker at the
	// end of the run, for a later run to Resume.
	KeepSessions bool
	// Subscriptions is, in the connections scenario, the filters each
	// connection subscribes to once every connection is up, one SUBSCRIBE
	// each (QoS); WildcardFilters makes them filters with a '+'.
	Subscriptions   int
	WildcardFilters bool
	// Queued is, in the offline scenario, the number of messages each
	// publisher sends while its subscriber is offline.
	Queued int
	// Rate is the total publish rate in messages/s, split evenly over the
	// publishers; 0 publishes as fast as flow control allows.
	Rate float64
	// Inflight bounds a QoS 1/2 publisher's unacknowledged messages (also
	// capped by the broker's receive maximum).
	Inflight int
	// Window bounds, per publisher, the messages sent but not yet received
	// by any of its subscribers (end-to-end, any QoS); 0 = no bound.
	Window   int
	Warmup   time.Duration
	Duration time.Duration // measured window
	// Drain is the longest wait after the last publish for deliveries
	// still on their way; it ends early when everything arrived or
	// nothing arrived for a second.
	Drain time.Duration
	// SetupTimeout bounds connecting and subscribing every client.
	SetupTimeout time.Duration
	// ConnectConcurrency is the number of connections opened at once.
	ConnectConcurrency int
	KeepAlive          time.Duration
	// Prefix starts every client identifier (prefix-p-3, prefix-s-3,
	// prefix-c-3) and topic (prefix/pairs/3). Shoal takes a client's tenant
	// from its identifier up to the first '-'.
	Prefix string
	// Username and Password, when Username is set, authenticate every
	// client (a password file of the broker's). With Shoal, the user's
	// tenant must be the clients' (Prefix).
	Username, Password string
	BrokerPID          int // 0: do not sample the broker's CPU and RSS
	// BrokerRSSBase, when > 0, is the broker's RSS (bytes) the connections
	// scenario counts each connection's memory from, instead of the RSS
	// at its own start: the RSS of the fresh process, for a broker that
	// carried a load before (scripts/bench-compare.sh's
	// connections-after-load).
	BrokerRSSBase uint64
	// Processes are other processes whose CPU and RSS are reported for
	// the measured window (Result.Processes): the parts of a distributed
	// broker, its Kafka, its database.
	Processes []Process
	// OnMeasure, when set, is called as the measured window of a traffic
	// scenario starts, with its length (to take profiles of exactly that
	// window). It runs on the run's own goroutine: it must return at once.
	OnMeasure func(d time.Duration)
	// OnStage, when set, is called by the offline scenario at the edges of
	// its stages: "queue" before the first publish, "deliver" when every
	// publish was acknowledged and the broker had the warm-up to store
	// them, before the subscribers come back, and "end" a warm-up after
	// the last delivery; and by the connections scenario with
	// Subscriptions: "subscribe" once every connection is up, "hold" once
	// every filter is acknowledged and the warm-up passed. The run waits
	// for it (to sample what the stage cost).
	OnStage func(stage string)

	Name, Label string // copied into the result
	Round       int
}

// Process names a process to sample.
type Process struct {
	Name string
	PID  int
}

// DefaultConfig returns the defaults the command's flags start from.
func DefaultConfig() Config {
	return Config{
		Addr:               "127.0.0.1:1883",
		Scenario:           ScenarioPairs,
		Version:            packet.V5,
		Payload:            64,
		Clients:            50,
		Publishers:         50,
		Inflight:           64,
		Warmup:             2 * time.Second,
		Duration:           10 * time.Second,
		Drain:              5 * time.Second,
		SetupTimeout:       60 * time.Second,
		ConnectConcurrency: 64,
		KeepAlive:          60 * time.Second,
		Prefix:             "bench",
		Queued:             100,
	}
}

// DefaultLatencyRate is the latency scenario's total rate when none is
// given.
const DefaultLatencyRate = 10000

// Validate names the first bad setting.
func (c *Config) Validate() error {
	if err := checkAddrs(c.Addr); err != nil {
		return fmt.Errorf("addr: %w", err)
	}
	if c.SubscriberAddr != "" {
		if err := checkAddrs(c.SubscriberAddr); err != nil {
			return fmt.Errorf("sub-addr: %w", err)
		}
	}
	switch {
	case c.Version != packet.V5 && c.Version != packet.V311:
		return fmt.Errorf("protocol: %s not supported (5 or 3.1.1)", c.Version)
	case c.QoS > 2:
		return fmt.Errorf("qos: %d (want 0, 1 or 2)", c.QoS)
	case c.Payload < StampSize:
		return fmt.Errorf("payload: %d bytes, the stamp needs at least %d", c.Payload, StampSize)
	case c.Payload > 1<<20:
		return fmt.Errorf("payload: %d bytes, at most 1 MiB", c.Payload)
	case c.Clients < 1:
		return fmt.Errorf("clients: %d (want ≥ 1)", c.Clients)
	case c.Scenario == ScenarioWildcards && c.Publishers < 1:
		return fmt.Errorf("publishers: %d (want ≥ 1)", c.Publishers)
	case c.Rate < 0:
		return fmt.Errorf("rate: %g (want ≥ 0)", c.Rate)
	case c.Inflight < 1 || c.Inflight > 65000:
		return fmt.Errorf("inflight: %d (want 1–65000)", c.Inflight)
	case c.Window < 0:
		return fmt.Errorf("window: %d (want ≥ 0)", c.Window)
	case c.Warmup < 0:
		return fmt.Errorf("warmup: %s (want ≥ 0)", c.Warmup)
	case c.Duration <= 0:
		return fmt.Errorf("duration: %s (want > 0)", c.Duration)
	case c.Drain < 0:
		return fmt.Errorf("drain: %s (want ≥ 0)", c.Drain)
	case c.SetupTimeout <= 0:
		return fmt.Errorf("setup-timeout: %s (want > 0)", c.SetupTimeout)
	case c.ConnectConcurrency < 1:
		return fmt.Errorf("connect-concurrency: %d (want ≥ 1)", c.ConnectConcurrency)
	case c.KeepAlive < 0 || c.KeepAlive > 65535*time.Second:
		return fmt.Errorf("keepalive: %s (want 0–65535s)", c.KeepAlive)
	case c.Prefix == "":
		return errors.New("prefix: empty")
	case c.SessionExpiry < 0 || c.SessionExpiry > math.MaxUint32*time.Second || c.SessionExpiry%time.Second != 0:
		return fmt.Errorf("session-expiry: %s (want whole seconds, 0 to %d s)", c.SessionExpiry, uint32(math.MaxUint32))
	case c.SessionExpiry > 0 && c.Version != packet.V5:
		return errors.New("session-expiry: needs MQTT 5 (-protocol 5): 3.1.1 has no session expiry")
	case (c.Resume || c.KeepSessions) && c.SessionExpiry == 0:
		return errors.New("resume, keep-sessions: need persistent sessions (-session-expiry > 0)")
	case c.Scenario == ScenarioOffline && c.SessionExpiry == 0:
		return errors.New("scenario offline: needs persistent sessions (-session-expiry > 0)")
	case c.Scenario == ScenarioOffline && c.QoS == 0:
		return errors.New("scenario offline: needs QoS 1 or 2: a broker keeps no QoS 0 message for an offline session")
	case c.Scenario == ScenarioOffline && (c.Queued < 1 || c.Queued > math.MaxUint32):
		return fmt.Errorf("queued: %d (want ≥ 1)", c.Queued)
	case c.Subscriptions < 0 || c.Subscriptions > 0 && c.Scenario != ScenarioConnections:
		return fmt.Errorf("subscriptions: %d (want ≥ 0, with -scenario connections)", c.Subscriptions)
	case c.WildcardFilters && c.Subscriptions == 0:
		return errors.New("wildcard-filters: needs -subscriptions")
	case c.Scenario == ScenarioOffline && c.Window > 0:
		return errors.New("scenario offline: no end-to-end window (-window 0): nothing is received while the messages are queued")
	case c.Scenario == ScenarioOffline && c.Resume:
		return errors.New("scenario offline: starts its own sessions (no -resume)")
	}
	for i, p := range c.Processes {
		if p.Name == "" || p.PID <= 0 {
			return fmt.Errorf("processes[%d]: %q with pid %d (want a name and a pid > 0)", i, p.Name, p.PID)
		}
	}
	if _, err := newPlan(c.Scenario, c.Prefix, c.Clients, c.Publishers); err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	return nil
}

// Deadline is the longest a run of c may take: set-up, warm-up, the
// measured window, the drain, and a margin for closing.
func (c *Config) Deadline() time.Duration {
	d := c.SetupTimeout + c.Warmup + c.Duration + c.Drain + 10*time.Second
	if c.Scenario == ScenarioOffline { // three settles, the queue's and the backlog's bounds, two set-ups
		d += c.SetupTimeout + 2*c.Warmup + c.Duration
	}
	if c.Subscriptions > 0 { // subscribing has a set-up bound of its own
		d += c.SetupTimeout
	}
	return d
}

// checkAddrs checks a comma-separated list of addresses: at least one,
// none empty.
func checkAddrs(list string) error {
	if list == "" {
		return errors.New("empty")
	}
	for i, a := range strings.Split(list, ",") {
		if strings.TrimSpace(a) == "" {
			return fmt.Errorf("%q: address %d of the list is empty", list, i+1)
		}
	}
	return nil
}

// addrs splits a comma-separated list of addresses.
func addrs(list string) []string {
	as := strings.Split(list, ",")
	for i, a := range as {
		as[i] = strings.TrimSpace(a)
	}
	return as
}
