package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// Connection logs (docs/telemetry.md, "Logs").
//
// Every line about a connection carries the same keys: tenant and
// client_id once the CONNECT named them, remote (the client's address: the
// source of the PROXY header when a load balancer sends one), listener,
// and protocol (3.1.1, 5.0) once the CONNECT was read. They are added when
// a line is logged, not kept in the connection: an idle connection costs
// no memory for them (its struct stays in its size class), and a line
// below the logger's level costs nothing.
//
// A connection accepted, and one the client ends (DISCONNECT, or its
// socket closed), are logged at debug level: a fleet reconnecting must not
// flood the log. Every close the gateway makes itself (closeCause) is
// logged once, at info level (warn for a fault of the gateway's own), with
// the reason code and the cause, at most once per client every
// closeLogInterval (closeLimiter). A shutdown's closes are one line
// (closeAll).

// closeLogInterval is the least time between two close lines of one
// client; the lines left out meanwhile are counted in the next one's
// suppressed key.
const closeLogInterval = time.Minute

// closeLogClients bounds the clients the close limiter remembers: when it
// holds that many, the entries older than closeLogInterval go, and all of
// them when that leaves more than half, so that a storm of new client ids
// or addresses cannot grow it (the lines of the clients it forgot are
// logged again, their suppressed counts lost).
const closeLogClients = 10_000

// closeCause says why the gateway closed a connection: the cause key of
// the close line, a stable word to search for. The client's own ends have
// causes too, for the debug line.
type closeCause uint8

const (
	causeNone closeCause = iota
	// The client's ends (debug).
	causeDisconnect // the client's DISCONNECT
	causeLost       // the socket ended without DISCONNECT, or failed
	// Closes of an established connection (causeProtocol: also before CONNACK).
	causeProtocol        // the client broke the protocol: detail says how
	causeACL             // a 3.1.1 PUBLISH the ACL refused (acl_deny_disconnect)
	causeKeepAlive       // nothing from the client for 1.5 keep alive periods
	causeWriteTimeout    // the client does not read its socket: a write waited write_timeout
	causeQueueFull       // the client does not acknowledge QoS 1/2 messages: max_queued reached
	causeTakenOver       // a newer connection of the client id took the session over
	causeKicked          // an operator kicked the client or deleted its session
	causeSessionEnded    // the session service ended the connection (any other kick)
	causeIdentityExpired // the token the client connected with expired
	causeLogWriteFailed  // a write to the log failed; the client sends again
	causeShuttingDown    // the gateway stops (one line for all: closeAll)
	// Closes before CONNACK: the CONNECT refused, or never read.
	causeConnectTimeout     // no CONNECT within connect_timeout
	causeAuthFailed         // wrong credentials
	causeNotAuthorized      // no credentials, a certificate naming no one, a will the ACL refuses
	causeClientID           // a client identifier the client may not use
	causeWillRefused        // a will topic or properties refused
	causeAuthMethod         // enhanced authentication asked for (not offered)
	causeQuota              // the tenant's connection quota or rate
	causeSessionRefused     // the session service refused the connection
	causeSessionUnavailable // the session service did not answer in time, or rebinding failed
	causeKafkaUnreachable   // no broker answered for gateway.kafka_timeout (kafkawatch.go)
)

var causeNames = [...]string{
	causeNone:               "",
	causeDisconnect:         "disconnect",
	causeLost:               "connection_lost",
	causeProtocol:           "protocol",
	causeACL:                "acl",
	causeKeepAlive:          "keepalive_timeout",
	causeWriteTimeout:       "write_timeout",
	causeQueueFull:          "queue_full",
	causeTakenOver:          "session_taken_over",
	causeKicked:             "kicked",
	causeSessionEnded:       "session_ended",
	causeIdentityExpired:    "identity_expired",
	causeLogWriteFailed:     "log_write_failed",
	causeShuttingDown:       "server_shutting_down",
	causeConnectTimeout:     "connect_timeout",
	causeAuthFailed:         "auth_failed",
	causeNotAuthorized:      "not_authorized",
	causeClientID:           "client_id_invalid",
	causeWillRefused:        "will_refused",
	causeAuthMethod:         "auth_method",
	causeQuota:              "quota",
	causeSessionRefused:     "session_refused",
	causeSessionUnavailable: "session_unavailable",
	causeKafkaUnreachable:   "kafka_unreachable",
}

func (k closeCause) String() string {
	if int(k) < len(causeNames) {
		return causeNames[k]
	}
	return "cause(" + strconv.Itoa(int(k)) + ")"
}

// level is the level of a close line of cause k: info for what the
// client did or is subject to, warn for a fault on the gateway's side.
func (k closeCause) level() slog.Level {
	switch k {
	case causeLogWriteFailed, causeSessionUnavailable, causeKafkaUnreachable:
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

// causeOfCode is the cause of a close another goroutine began with code
// (conn.closeCode: a kick, the queue, the identity's expiry, shutdown).
func causeOfCode(code packet.ReasonCode) closeCause {
	switch code {
	case packet.CodeSessionTakenOver:
		return causeTakenOver
	case packet.CodeAdministrativeAction:
		return causeKicked
	case packet.CodeQuotaExceeded:
		return causeQueueFull
	case packet.CodeMaximumConnectTime:
		return causeIdentityExpired
	case packet.CodeServerShuttingDown:
		return causeShuttingDown
	case packet.CodeUseAnotherServer:
		return causeKafkaUnreachable
	}
	return causeSessionEnded
}

// causeOfError is the cause of a close for err, a client's packet that
// broke a rule.
func causeOfError(err error) closeCause {
	var ec *errClose
	if errors.As(err, &ec) && ec.code == packet.CodeNotAuthorized {
		return causeACL
	}
	return causeProtocol
}

// detailOf is what a close line says of err: the message without the
// reason code, which the line has already.
func detailOf(err error) string {
	var ec *errClose
	var pe *packet.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ec):
		return ec.msg
	case errors.As(err, &pe):
		return pe.Msg
	}
	return err.Error()
}

// appendLogAttrs appends the connection's keys to args.
func (c *conn) appendLogAttrs(args []any) []any {
	if c.clientID != "" {
		args = append(args, slog.String("tenant", c.tenant), slog.String("client_id", c.clientID))
	}
	if a := c.remoteAddr(); a != nil {
		args = append(args, slog.String("remote", a.String()))
	}
	if l := listenerName(c.listener); l != "" {
		args = append(args, slog.String("listener", l))
	}
	if c.version != 0 {
		args = append(args, slog.String("protocol", c.version.String()))
	}
	return args
}

// remoteAddr is the client's address: the PROXY header's source or the
// socket's peer; nil when there is none.
func (c *conn) remoteAddr() net.Addr {
	if c.clientAddr != nil {
		return c.clientAddr
	}
	if c.nc != nil {
		return c.nc.RemoteAddr()
	}
	return nil
}

// logAt logs a line about the connection, with its keys before args.
func (c *conn) logAt(ctx context.Context, level slog.Level, msg string, args ...any) {
	l := c.g.log
	if !l.Enabled(ctx, level) {
		return
	}
	all := c.appendLogAttrs(make([]any, 0, 6+len(args)))
	l.Log(ctx, level, msg, append(all, args...)...)
}

func (c *conn) logDebug(ctx context.Context, msg string, args ...any) {
	c.logAt(ctx, slog.LevelDebug, msg, args...)
}

func (c *conn) logInfo(ctx context.Context, msg string, args ...any) {
	c.logAt(ctx, slog.LevelInfo, msg, args...)
}

func (c *conn) logWarn(ctx context.Context, msg string, args ...any) {
	c.logAt(ctx, slog.LevelWarn, msg, args...)
}

func (c *conn) logError(ctx context.Context, msg string, args ...any) {
	c.logAt(ctx, slog.LevelError, msg, args...)
}

// reasonAttrs are a reason code's keys: reason in hex (0x82) and
// reason_name (protocol_error).
func reasonAttrs(code packet.ReasonCode) []any {
	return []any{
		slog.String("reason", "0x"+strconv.FormatUint(uint64(code)|0x100, 16)[1:]),
		slog.String("reason_name", strings.ReplaceAll(strings.ToLower(code.String()), " ", "_")),
	}
}

// logAccepted logs the connection's CONNACK (debug).
func (c *conn) logAccepted(ctx context.Context) {
	c.logDebug(ctx, "connection accepted", "session_present", c.resumed, "keep_alive", c.keepAlive)
}

// logEnd logs how an established connection ended: its close line when
// the gateway closed it, else a debug line.
func (c *conn) logEnd(ctx context.Context, e ending) {
	if !e.server && !c.g.log.Enabled(ctx, slog.LevelDebug) {
		return // a client's end is logged at debug only
	}
	var args []any
	if e.cause == causeKeepAlive {
		args = append(args, "keep_alive", c.keepAlive)
	}
	if d := detailOf(e.err); d != "" {
		args = append(args, "detail", d)
	}
	if e.server {
		c.logClose(ctx, e.reason, e.cause, args...)
		return
	}
	args = append(append(reasonAttrs(e.reason), "cause", e.cause.String(), "will", !e.clean), args...)
	c.logDebug(ctx, "connection ended", args...)
}

// logClose logs a close the gateway makes with code, for cause, at the
// cause's level, args after the connection's keys and the cause: once per
// connection (its callers see to that), and at most once per client every
// closeLogInterval, keyed by tenant and client id or, before the CONNECT
// named one, by the client's IP address. While the gateway shuts down,
// its closes are at debug level: closeAll logs one line for them all.
func (c *conn) logClose(ctx context.Context, code packet.ReasonCode, cause closeCause, args ...any) {
	g := c.g
	level := cause.level()
	if cause == causeShuttingDown || g.live.closed() {
		level = slog.LevelDebug
	}
	if !g.log.Enabled(ctx, level) {
		return
	}
	suppressed := 0
	if level > slog.LevelDebug {
		ok, n := g.closeLog.allow(c.closeLogKey(), g.clock())
		if !ok {
			return
		}
		suppressed = n
	}
	all := c.appendLogAttrs(make([]any, 0, 10+len(args)))
	all = append(all, reasonAttrs(code)...)
	all = append(all, slog.String("cause", cause.String()))
	all = append(all, args...)
	if suppressed > 0 {
		all = append(all, slog.Int("suppressed", suppressed))
	}
	g.log.Log(ctx, level, "connection closed by the gateway", all...)
}

// closeLogKey is the key of the connection's client in the close limiter:
// its tenant and client id (clientsKey, which holds a NUL), or before the
// CONNECT named them the client's IP address (no port: a client that
// reconnects comes from another).
func (c *conn) closeLogKey() string {
	if c.clientsKey != "" {
		return c.clientsKey
	}
	if a := c.remoteAddr(); a != nil {
		if ip := addrOf(a); ip.IsValid() {
			return ip.String()
		}
		return a.String()
	}
	return ""
}

// refuseFor refuses the CONNECT with code (refuse) for cause and logs its
// close line, args after the cause (never a password or a token).
func (c *conn) refuseFor(cause closeCause, code packet.ReasonCode, args ...any) {
	c.logClose(context.Background(), code, cause, args...)
	c.refuse(code, c.version)
}

// logNoConnect logs a connection that ended before its CONNECT was read:
// a close line for a connect timeout or a malformed first packet, a debug
// line when the client left (a load balancer's health check).
func (c *conn) logNoConnect(err error) {
	ctx := context.Background()
	var pe *packet.Error
	switch {
	case errors.As(err, &pe):
		c.logClose(ctx, pe.Code, causeProtocol, "detail", pe.Msg)
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.logClose(ctx, packet.CodeUnspecifiedError, causeConnectTimeout, "connect_timeout", c.g.cfg.ConnectTimeout)
	default:
		c.logDebug(ctx, "connection ended before CONNECT", "err", err)
	}
}

// logWriteFailed logs a failed write to the client: its close line when
// the write timed out (the client does not read its socket), else at
// debug level (the client went away). A connection whose close the
// gateway began has its line already.
func (c *conn) logWriteFailed(err error) {
	ctx := context.Background()
	var ne net.Error
	timeout := errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
	if !timeout || c.closing.Load() {
		c.logDebug(ctx, "write", "err", err)
		return
	}
	c.logClose(ctx, packet.CodeUnspecifiedError, causeWriteTimeout, "write_timeout", c.g.cfg.WriteTimeout)
}

// logShutdown logs that the gateway closes its n connections because it
// stops: one line, not one per client (none without connections).
func (g *Gateway) logShutdown(n int) {
	if n == 0 {
		return
	}
	args := append(reasonAttrs(packet.CodeServerShuttingDown), "cause", causeShuttingDown.String(), "connections", n)
	g.log.Info("closing every connection: the gateway stops", args...)
}

// closeLimiter is how often each client's close lines are logged: at most
// once every closeLogInterval, counting the lines left out. Its mutex is
// a leaf: it is taken with conn.mu held (sendReadyAcks).
type closeLimiter struct {
	mu   sync.Mutex
	seen map[string]closeSeen // client key → its last line
}

type closeSeen struct {
	at         int64 // unix ns of the last line logged
	suppressed int   // lines left out since
}

// allow reports whether a line of client key may be logged at now, and
// how many were left out since its last.
func (l *closeLimiter) allow(key string, now time.Time) (ok bool, suppressed int) {
	t := now.UnixNano()
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, found := l.seen[key]; found {
		if t-s.at < int64(closeLogInterval) {
			s.suppressed++
			l.seen[key] = s
			return false, 0
		}
		l.seen[key] = closeSeen{at: t}
		return true, s.suppressed
	}
	if len(l.seen) >= closeLogClients {
		l.sweep(t)
	}
	if l.seen == nil {
		l.seen = make(map[string]closeSeen)
	}
	l.seen[key] = closeSeen{at: t}
	return true, 0
}

// sweep forgets the clients whose last line is older than
// closeLogInterval, and every client when that leaves more than half the
// table (a new map: a cleared one keeps its buckets). Each sweep at least
// halves the table, so its cost is spread over the insertions that filled
// it.
func (l *closeLimiter) sweep(t int64) {
	for k, s := range l.seen {
		if t-s.at >= int64(closeLogInterval) {
			delete(l.seen, k)
		}
	}
	if len(l.seen) > closeLogClients/2 {
		l.seen = nil
	}
}

// len returns the number of clients remembered (tests).
func (l *closeLimiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}
