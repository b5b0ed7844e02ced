package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// dialTimeout bounds a TCP (and TLS) connect to a broker: franz-go's
// default.
const dialTimeout = 10 * time.Second

// quarantine keeps new connections away from a broker that let a request
// run past its deadline: a broker frozen with its sockets open (SIGSTOP, a
// zombie, a stalled machine) accepts connections in the kernel and answers
// nothing, so every new connection to it waits out the ApiVersions request
// franz-go opens it with. franz-go picks the broker of a metadata request
// round the brokers it knows, frozen or not, and a produce or fetch that
// timed out is sent again only once metadata names the partition's new
// leader: a metadata request that went to the frozen broker stalled the
// partitions that had moved away from it for 1.5–4.4 s more (three
// connections in turn, in a fault test).
//
// While a broker is held, dialling it fails at once with a dial error,
// which franz-go answers as it does a refused connection: a metadata
// request goes to the next broker, a produce or fetch asks for metadata
// first. The connections to it that are open when a request times out are
// closed then: every request in flight on them (another client's produce,
// a fetch, a group's heartbeat) is sent again at once instead of waiting
// out its own deadline, one after another, as Kafka's Java client fails
// everything in flight on its one connection to a broker at a timeout. The
// hold lasts the client's request overhead (half of
// Config.RequestTimeout) from the last request that timed out; a broker
// still frozen when it ends lets the next connection's request time out
// and is held again, and one that came back is dialled as before. A
// broker is held only while another the client knows is not: a cluster of
// one is dialled as without the quarantine. One
// quarantine serves every franz-go client of a Client, so what a consumer
// learns the producer knows.
type quarantine struct {
	hold time.Duration
	log  *slog.Logger
	now  func() time.Time

	mu    sync.Mutex
	known map[string]struct{}                  // every broker address dialled
	until map[string]time.Time                 // broker address → end of its hold
	open  map[string]map[*trackedConn]struct{} // broker address → its open connections
}

func newQuarantine(hold time.Duration, log *slog.Logger) *quarantine {
	return &quarantine{
		hold: hold, log: log, now: time.Now,
		known: make(map[string]struct{}),
		until: make(map[string]time.Time),
		open:  make(map[string]map[*trackedConn]struct{}),
	}
}

// trackedConn is a connection to a broker that the quarantine can close.
type trackedConn struct {
	net.Conn
	q    *quarantine
	addr string
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.q.forget(c) })
	return c.Conn.Close()
}

func (q *quarantine) track(addr string, conn net.Conn) net.Conn {
	c := &trackedConn{Conn: conn, q: q, addr: addr}
	q.mu.Lock()
	defer q.mu.Unlock()
	set := q.open[addr]
	if set == nil {
		set = make(map[*trackedConn]struct{})
		q.open[addr] = set
	}
	set[c] = struct{}{}
	return c
}

func (q *quarantine) forget(c *trackedConn) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if set := q.open[c.addr]; set != nil {
		delete(set, c)
		if len(set) == 0 {
			delete(q.open, c.addr)
		}
	}
}

// errQuarantined is the cause of a refused dial (a *quarantinedError in a
// *net.OpError whose Op is "dial").
var errQuarantined = errors.New("kafka broker held after a request timed out")

type quarantinedError struct {
	addr string
	left time.Duration
}

func (e *quarantinedError) Error() string {
	return fmt.Sprintf("broker %s let a request time out: not dialled for another %s", e.addr, e.left.Round(time.Millisecond))
}

func (e *quarantinedError) Unwrap() error { return errQuarantined }

// Timeout is false: franz-go treats a dial error that is not a timeout as
// a broker to skip (another for metadata, new metadata for a partition).
func (e *quarantinedError) Timeout() bool { return false }

// dialer returns next (a TLS or plain net.Dialer if nil) behind the
// quarantine.
func (q *quarantine) dialer(next func(ctx context.Context, network, addr string) (net.Conn, error), tlsCfg *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if next == nil {
		d := &net.Dialer{Timeout: dialTimeout}
		next = d.DialContext
		if tlsCfg != nil {
			next = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c := tlsCfg.Clone()
				if c.ServerName == "" {
					host, _, err := net.SplitHostPort(addr)
					if err != nil {
						return nil, fmt.Errorf("split broker address %q: %w", addr, err)
					}
					c.ServerName = host
				}
				return (&tls.Dialer{NetDialer: d, Config: c}).DialContext(ctx, network, addr)
			}
		}
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if left := q.held(addr); left > 0 {
			return nil, &net.OpError{Op: "dial", Net: network, Err: &quarantinedError{addr: addr, left: left}}
		}
		conn, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return q.track(addr, conn), nil
	}
}

// held returns how much longer addr is held, 0 if it is not. A broker is
// held only while another one it knows is not: with no broker to go to
// instead (a cluster of one, or every broker silent) a refused dial would
// only delay the reconnect to one that is starting or coming back.
func (q *quarantine) held(addr string) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.known[addr] = struct{}{}
	left := q.leftLocked(addr)
	if left == 0 {
		return 0
	}
	for other := range q.known {
		if other != addr && q.leftLocked(other) == 0 {
			return left
		}
	}
	return 0
}

// leftLocked returns how much longer addr's hold lasts, 0 if none; q.mu
// is held.
func (q *quarantine) leftLocked(addr string) time.Duration {
	until, ok := q.until[addr]
	if !ok {
		return 0
	}
	left := until.Sub(q.now())
	if left <= 0 {
		delete(q.until, addr)
		return 0
	}
	return left
}

// timedOut holds the broker at meta's address after one of its requests
// (key) ran past its deadline.
func (q *quarantine) timedOut(meta kgo.BrokerMetadata, key int16) {
	addr := net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
	now := q.now()
	q.mu.Lock()
	prev, held := q.until[addr]
	already := held && prev.After(now)
	q.until[addr] = now.Add(q.hold)
	// Its connections are closed only when there is a broker to send
	// their requests to instead.
	var stuck []*trackedConn
	elsewhere := false
	for other := range q.known {
		elsewhere = elsewhere || other != addr && q.leftLocked(other) == 0
	}
	if elsewhere {
		for c := range q.open[addr] {
			stuck = append(stuck, c)
		}
	}
	q.mu.Unlock()
	if !elsewhere {
		return
	}
	if !already {
		q.log.Warn("kafka broker answered nothing before the request's deadline: its connections closed, no new ones for a while",
			"broker", meta.NodeID, "addr", addr, "request", kmsg.NameForKey(key), "closed", len(stuck), "hold", q.hold)
	}
	for _, c := range stuck {
		_ = c.Close() // franz-go sees the connection end and sends its requests again
	}
}

// OnBrokerRead implements kgo.HookBrokerRead. A request cancelled by its
// context or by Close reaches here with that error, not a deadline's.
func (q *quarantine) OnBrokerRead(meta kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		q.timedOut(meta, key)
	}
}

// OnBrokerWrite implements kgo.HookBrokerWrite: a write blocks past its
// deadline only once the broker stopped reading and the socket's buffers
// are full.
func (q *quarantine) OnBrokerWrite(meta kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		q.timedOut(meta, key)
	}
}
