package kafka

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// EmbeddedHost is the host name the embedded broker advertises when it has
// no TCP listener: it resolves nowhere (.invalid, RFC 2606), so that only
// a dialer that knows the broker (Embedded.Dial, AttachEmbedded) reaches it.
const EmbeddedHost = "shoal-embedded.invalid"

// Files in EmbeddedConfig.Dir besides kfake's own.
const (
	// lockFileName is held locked by one process at a time (kfake itself
	// does not guard its directory).
	lockFileName = "shoal-embedded.lock"
	// SocketName is the Unix socket tools of other processes attach to.
	SocketName = "kafka.sock"
	// CredentialsName holds the SASL/SCRAM credentials every client of the
	// embedded broker authenticates with (librdkafka's property names:
	// `kcat -F`, confluent-kafka-python).
	CredentialsName = "client.properties"
	// JavaCredentialsName holds the same credentials in the Java client's
	// property names (the Kafka distribution's console tools), made from
	// CredentialsName at every start.
	JavaCredentialsName = "client-java.properties"
)

// EmbeddedConfig configures the embedded backbone.
//
// By default the broker accepts no one but its own process: connections
// through Embedded.Dial, in memory. Tools of other processes (a replay
// against a running `shoal all`) attach through Socket, a Unix socket
// only the owner of the directory may open; Addr adds a TCP listener on
// loopback for stock Kafka tools. Every connection, in-process ones too,
// authenticates with SASL/SCRAM-SHA-512 and the credentials kept in the
// directory (CredentialsName, mode 0600), so a local user who can open
// neither the socket nor that file cannot read or write the log.
type EmbeddedConfig struct {
	// Dir holds the log segments, indexes and cluster state; it is created
	// (mode 0700) if missing and reloaded at start.
	Dir string
	// Addr, when set, is a loopback host:port ("127.0.0.1:0" picks a free
	// port) on which the broker also listens over TCP, for tools that speak
	// only TCP (kafka.embedded_addr). Other addresses are refused: the
	// traffic is not encrypted. Empty: no TCP listener.
	Addr string
	// Socket makes the broker listen on the Unix socket Dir/kafka.sock,
	// mode 0600. A path longer than a socket address holds (about 100
	// bytes) is reported and skipped.
	Socket bool
	// SyncWrites fsyncs every produced batch before it is acknowledged.
	// Without it a batch is in the page cache when acknowledged: it
	// survives a crash of the process but not of the machine (as with
	// Kafka's default log.flush settings).
	SyncWrites bool
	// RetentionCheck is how often the broker deletes what the topics'
	// retention.ms and retention.bytes no longer keep (0:
	// DefaultRetentionCheck). Compaction runs every CompactEvery.
	RetentionCheck time.Duration
}

// The embedded broker's own settings: how its log is cut into files and
// how often it is cleaned (kfake's defaults are Kafka's, made for a
// broker with memory to spare: 100 MiB segments, cleaning every hour).
const (
	// EmbeddedSegmentBytes is the embedded broker's log.segment.bytes, the
	// size at which a partition's active segment is closed and a new one
	// begun, for every topic that sets no segment.bytes of its own. At
	// start kfake reads every partition's segments whole, all partitions
	// at once, to rebuild its in-memory index: the memory this takes is
	// about one segment per partition (68 partitions by default), and
	// with 100 MiB segments it was the whole log. 1 MiB is Kafka's
	// smallest segment.bytes. It also makes retention.bytes precise: a
	// segment is deleted whole, so a partition keeps at most
	// retention.bytes plus one segment.
	EmbeddedSegmentBytes = 1 << 20
	// DefaultRetentionCheck is how often the embedded broker applies
	// retention (EmbeddedConfig.RetentionCheck). A partition may exceed
	// retention.bytes by what is written to it between two checks: at
	// the 60 MB/s of log a saturated `shoal all` writes, 2s is 120 MB over
	// every partition together. A check reads only the in-memory index
	// (about a millisecond per 300,000 batches).
	DefaultRetentionCheck = 2 * time.Second
	// EmbeddedMaxBufferedRecords is Config.MaxBufferedRecords of the
	// embedded broker's clients, unless set. The embedded broker
	// acknowledges a produce in 0.2-0.4 ms, so a few hundred records in
	// flight keep it busy at any rate a `shoal all` reaches; the
	// default's 50,000 (for a Kafka a network away) only held memory: a
	// client flooding QoS 0 filled both producers' buffers, 100,000
	// pooled records, about 90 MiB of a flood's heap. 2,048 goes with
	// FeedMaxBacklog's 1,024 per partition (bench/HISTORY.md compares
	// other bounds).
	EmbeddedMaxBufferedRecords = 2048
	// CompactEvery is how often the embedded broker compacts the
	// compacted topics (kfake's log.cleaner.backoff.ms, one hour): each
	// compaction rewrites a partition's segments.
	CompactEvery = time.Hour
)

// Validate checks the configuration, naming the bad key.
func (c EmbeddedConfig) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("kafka.embedded.dir: must not be empty"))
	}
	if c.Addr != "" {
		if err := CheckEmbeddedAddr(c.Addr); err != nil {
			errs = append(errs, fmt.Errorf("kafka.embedded_addr: %w", err))
		}
	}
	if c.RetentionCheck < 0 {
		errs = append(errs, fmt.Errorf("kafka.embedded.retention_check: must be ≥ 0 (0: %s), is %s", DefaultRetentionCheck, c.RetentionCheck))
	}
	return errors.Join(errs...)
}

// CheckEmbeddedAddr accepts host:port only when host is a loopback IP
// address or "localhost": the embedded broker's traffic is not encrypted.
func CheckEmbeddedAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("%q: bad port: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address: the embedded backbone listens only on loopback (127.0.0.0/8, ::1, localhost)", addr)
	}
	return nil
}

// Embedded is Shoal's in-process Kafka: one kfake broker with its data in a
// directory. Clients of the same process reach it through ClientConfig
// (in memory); tools of other processes through AttachEmbedded (the Unix
// socket) or, when configured, a loopback TCP address.
type Embedded struct {
	cluster *kfake.Cluster
	feed    *Feed // the local delivery path of the process's clients
	dialer  *inprocDialer
	addrs   []string
	sasl    *SASL
	socket  string // path of the Unix socket; "" without one
	logger  *kfakeLogger
	lock    *os.File
	log     *slog.Logger

	stopCleaner context.CancelFunc
	cleanerDone chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// StartEmbedded starts the embedded backbone, reloading whatever cfg.Dir
// holds. Only one process at a time may use a directory: a second
// StartEmbedded on a directory in use fails.
func StartEmbedded(cfg EmbeddedConfig, log *slog.Logger) (*Embedded, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("start embedded kafka: %w", err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("start embedded kafka: %w", err)
	}
	// Releases before 14 made it 0750: the log holds every tenant's records.
	if err := os.Chmod(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("start embedded kafka: %w", err)
	}
	lock, err := lockDir(filepath.Join(cfg.Dir, lockFileName))
	if err != nil {
		return nil, fmt.Errorf("start embedded kafka in %s: %w", cfg.Dir, err)
	}
	start := time.Now()
	e, err := openEmbedded(cfg, lock, log)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start embedded kafka in %s: %w", cfg.Dir, err), unlockDir(lock))
	}
	loaded := time.Since(start)
	// Loading read every segment of the log and kept only an index of it.
	// After a clean stop kfake reads one segment per partition at a time
	// (EmbeddedSegmentBytes bounds that), but after a crash it rebuilds
	// each partition from all its batches at once: the whole log passes
	// through the heap, and Go, whose heap goal is now that large, would
	// keep the pages for minutes (1 GiB of log: 618 MiB of RSS 30s after
	// the start). Returned now, at the cost of one collection of a heap
	// that is mostly garbage.
	debug.FreeOSMemory()
	log.Info("embedded kafka started", "addrs", e.addrs, "socket", e.socket, "dir", cfg.Dir, "sync_writes", cfg.SyncWrites,
		"loaded_in", loaded.Round(time.Millisecond), "released_in", (time.Since(start) - loaded).Round(time.Millisecond))
	return e, nil
}

func openEmbedded(cfg EmbeddedConfig, lock *os.File, log *slog.Logger) (*Embedded, error) {
	sasl, err := loadOrCreateCredentials(filepath.Join(cfg.Dir, CredentialsName))
	if err != nil {
		return nil, err
	}
	if err := writeJavaCredentials(filepath.Join(cfg.Dir, JavaCredentialsName), sasl); err != nil {
		return nil, err
	}
	// kfake keeps the users in sasl.json and, at start, prefers them to
	// the ones it is given: releases before 14 left an empty list there,
	// and a user added since over the protocol is not Shoal's. The one
	// user is the credentials file's.
	if err := os.Remove(filepath.Join(cfg.Dir, "sasl.json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	e := &Embedded{feed: NewFeed(), dialer: &inprocDialer{}, sasl: sasl, logger: &kfakeLogger{log: log}, lock: lock, log: log}
	if cfg.Socket {
		e.socket = filepath.Join(cfg.Dir, SocketName)
		if !socketPathFits(e.socket) {
			log.Warn("embedded kafka: no unix socket, its path is too long for a socket address; tools cannot attach", "path", e.socket)
			e.socket = ""
		}
	}
	var ln *inprocListener
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.ClusterID("shoal-embedded"),
		kfake.DataDir(cfg.Dir),
		kfake.WithLogger(e.logger),
		kfake.EnableSASL(),
		kfake.Superuser(sasl.Mechanism, sasl.User, sasl.Password),
		// Over what the directory's broker_configs.json holds (kfake
		// prefers its options), so that a directory of an earlier
		// release rolls small segments too.
		kfake.BrokerConfigs(map[string]string{"log.segment.bytes": strconv.Itoa(EmbeddedSegmentBytes)}),
		// kfake listens on 127.0.0.1:<port>; listen where we were asked
		// instead (already checked to be loopback, or nowhere), and accept
		// in-process connections too (Dial).
		kfake.ListenFn(func(string, string) (net.Listener, error) {
			l, err := listenEmbedded(cfg.Addr, e.socket)
			if err != nil {
				return nil, err
			}
			e.dialer.add(l)
			ln = l
			return toolListener{l}, nil
		}),
	}
	if cfg.SyncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		if ln != nil {
			_ = ln.Close()
		}
		return nil, err
	}
	e.cluster = cluster
	e.addrs = cluster.ListenAddrs()
	check := cfg.RetentionCheck
	if check == 0 {
		check = DefaultRetentionCheck
	}
	ctx, stop := context.WithCancel(context.Background())
	e.stopCleaner, e.cleanerDone = stop, make(chan struct{})
	go e.clean(ctx, check, CompactEvery)
	return e, nil
}

// clean applies retention every check and compacts every compact until ctx
// ends. kfake cleans on a timer of its own, but starts that timer only
// when a topic is created or a configuration altered, never for the topics
// it reloads at start: without this, a restarted `shoal all` would keep
// every record for ever.
func (e *Embedded) clean(ctx context.Context, check, compact time.Duration) {
	defer close(e.cleanerDone)
	rt, ct := time.NewTicker(check), time.NewTicker(compact)
	defer rt.Stop()
	defer ct.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-rt.C:
			e.cluster.ApplyRetention()
		case <-ct.C:
			e.cluster.Compact() // applies retention too
		}
	}
}

// Addrs returns the host:port addresses clients use as seed brokers: the
// TCP address when there is one, else EmbeddedHost's.
func (e *Embedded) Addrs() []string {
	return append([]string(nil), e.addrs...)
}

// SASL returns the credentials every client must authenticate with.
func (e *Embedded) SASL() SASL { return *e.sasl }

// ClientConfig returns cfg set up to reach the embedded broker from this
// process: its addresses, Dial and credentials.
func (e *Embedded) ClientConfig(cfg Config) Config {
	if cfg.MaxBufferedRecords == 0 {
		cfg.MaxBufferedRecords = EmbeddedMaxBufferedRecords
	}
	cfg.Brokers = e.Addrs()
	cfg.Dial = e.Dial
	cfg.Feed = e.feed
	s := *e.sasl
	cfg.SASL = &s
	return cfg
}

// Dial connects to the embedded broker in-process when host is one of its
// addresses (over an in-memory pipe, with the same protocol and the same
// deadlines as TCP) and over the network otherwise. It is meant for
// Config.Dial.
func (e *Embedded) Dial(ctx context.Context, network, host string) (net.Conn, error) {
	return e.dialer.DialContext(ctx, network, host)
}

// Close stops the broker: it stops accepting connections, finishes the
// request in progress, writes its state and closes its files. The data stays
// in the directory for the next StartEmbedded. Clients still connected see
// their connections closed. Close is idempotent; it returns the errors kfake
// reported while saving its state.
func (e *Embedded) Close() error {
	e.closeOnce.Do(func() {
		// Before the cluster: a cleaning request sent to a closed
		// cluster would wait for ever.
		e.stopCleaner()
		<-e.cleanerDone
		e.logger.startCapture()
		e.cluster.Close()
		errs := e.logger.stopCapture()
		errs = append(errs, unlockDir(e.lock))
		e.closeErr = errors.Join(errs...)
		if e.closeErr != nil {
			e.closeErr = fmt.Errorf("close embedded kafka: %w", e.closeErr)
		}
		e.log.Info("embedded kafka stopped", "addrs", e.addrs, "socket", e.socket)
	})
	return e.closeErr
}

// ErrDirInUse is StartEmbedded's error (wrapped) when another process holds
// the directory: a running `shoal all`, which tools reach with
// AttachEmbedded instead.
var ErrDirInUse = errors.New("held by another process")
