package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"
)

// DefaultEmbeddedAddr is the address the embedded backbone listens on when
// EmbeddedConfig.Addr is empty: loopback, a free port.
const DefaultEmbeddedAddr = "127.0.0.1:0"

// lockFileName is the file in EmbeddedConfig.Dir that one process at a time
// holds locked (kfake itself does not guard its directory).
const lockFileName = "shoal-embedded.lock"

// EmbeddedConfig configures the embedded backbone.
type EmbeddedConfig struct {
	// Dir holds the log segments, indexes and cluster state; it is created
	// if missing and reloaded at start.
	Dir string
	// Addr is the loopback host:port to listen on ("127.0.0.1:0" picks a
	// free port; empty means DefaultEmbeddedAddr). Other addresses are
	// refused: the embedded backbone has no authentication.
	Addr string
	// SyncWrites fsyncs every produced batch before it is acknowledged.
	// Without it a batch is in the page cache when acknowledged: it
	// survives a crash of the process but not of the machine (as with
	// Kafka's default log.flush settings).
	SyncWrites bool
}

// Validate checks the configuration, naming the bad key.
func (c EmbeddedConfig) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("kafka.embedded.dir: must not be empty"))
	}
	if err := checkLoopback(c.addr()); err != nil {
		errs = append(errs, fmt.Errorf("kafka.embedded.addr: %w", err))
	}
	return errors.Join(errs...)
}

func (c EmbeddedConfig) addr() string {
	if c.Addr == "" {
		return DefaultEmbeddedAddr
	}
	return c.Addr
}

// checkLoopback accepts host:port only when host is a loopback IP address or
// "localhost".
func checkLoopback(addr string) error {
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
// directory, listening on a loopback address. Clients reach it exactly like
// a real cluster, through Addrs; those of the same process pass Dial as
// Config.Dial and reach it without the network stack.
type Embedded struct {
	cluster *kfake.Cluster
	dialer  *inprocDialer
	addrs   []string
	logger  *kfakeLogger
	lock    *os.File
	log     *slog.Logger

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
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("start embedded kafka: %w", err)
	}
	lock, err := lockDir(filepath.Join(cfg.Dir, lockFileName))
	if err != nil {
		return nil, fmt.Errorf("start embedded kafka in %s: %w", cfg.Dir, err)
	}
	addr := cfg.addr()
	logger := &kfakeLogger{log: log}
	dialer := &inprocDialer{}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.ClusterID("shoal-embedded"),
		kfake.DataDir(cfg.Dir),
		kfake.WithLogger(logger),
		// kfake listens on 127.0.0.1:<port>; listen where we were asked
		// instead (already checked to be loopback), and accept in-process
		// connections too (Dial).
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			tcp, err := net.Listen(network, addr)
			if err != nil {
				return nil, err
			}
			l := newInprocListener(tcp)
			dialer.add(l)
			return l, nil
		}),
	}
	if cfg.SyncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start embedded kafka on %s in %s: %w", addr, cfg.Dir, err), unlockDir(lock))
	}
	e := &Embedded{
		cluster: cluster,
		dialer:  dialer,
		addrs:   cluster.ListenAddrs(),
		logger:  logger,
		lock:    lock,
		log:     log,
	}
	log.Info("embedded kafka started", "addrs", e.addrs, "dir", cfg.Dir, "sync_writes", cfg.SyncWrites)
	return e, nil
}

// Addrs returns the host:port addresses clients use as seed brokers.
func (e *Embedded) Addrs() []string {
	return append([]string(nil), e.addrs...)
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
		e.logger.startCapture()
		e.cluster.Close()
		errs := e.logger.stopCapture()
		errs = append(errs, unlockDir(e.lock))
		e.closeErr = errors.Join(errs...)
		if e.closeErr != nil {
			e.closeErr = fmt.Errorf("close embedded kafka: %w", e.closeErr)
		}
		e.log.Info("embedded kafka stopped", "addrs", e.addrs)
	})
	return e.closeErr
}
