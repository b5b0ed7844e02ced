package realkafka

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shoal-mqtt/shoal/internal/localserver/serverproc"
)

// Nodes is a Kafka cluster of several nodes, each broker and controller
// (a KRaft quorum of all of them, static voters), each a local process
// with its directory, ports and output: the cluster the fault tests run
// on. Internal topics and new topics are replicated on every node with
// min.insync.replicas 2 (on 3 nodes: one node may be down and acks=all
// produces still succeed). Node(i) drives one node: Kill, Stop, Restart,
// Pause and Resume.
type Nodes struct {
	clusterID string
	nodes     []*Cluster
}

// StartNodes starts a new, empty cluster of n nodes (n ≥ 3 for a quorum
// that survives one lost node) under dir/node-1 … dir/node-N, each node's
// output to logw(i) (nil: discarded), and returns once every node is
// registered with the quorum and an acks=all produce to a topic replicated
// on all of them succeeds. ctx bounds the start, not the cluster's life.
func StartNodes(ctx context.Context, dir string, n int, logw func(node int) io.Writer, opts Options) (*Nodes, error) {
	if n < 1 {
		return nil, fmt.Errorf("start kafka: %d nodes", n)
	}
	lib, err := fetch(ctx, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("start kafka: %w", err)
	}
	m, err := withFreshPorts(ctx, func() (*Nodes, error) {
		m, err := newNodes(dir, n, lib, logw, opts)
		if err != nil {
			return nil, err
		}
		return m, m.start(ctx)
	})
	if err != nil {
		return nil, fmt.Errorf("start kafka nodes in %s: %w", dir, err)
	}
	return m, nil
}

// newNodes lays out the nodes on fresh ports and writes their
// configuration; the data of an earlier cluster in dir is removed.
func newNodes(dir string, n int, lib string, logw func(int) io.Writer, opts Options) (*Nodes, error) {
	ports, err := serverproc.FreePorts(2 * n)
	if err != nil {
		return nil, fmt.Errorf("start kafka: %w", err)
	}
	id, err := newClusterID()
	if err != nil {
		return nil, fmt.Errorf("start kafka: %w", err)
	}
	m := &Nodes{clusterID: id}
	for i := range n {
		w := io.Discard
		if logw != nil {
			if lw := logw(i); lw != nil {
				w = lw
			}
		}
		c := &Cluster{dir: filepath.Join(dir, "node-"+strconv.Itoa(i+1)), lib: lib, out: &output{w: w},
			brokerPort: ports[2*i], ctlPort: ports[2*i+1], fullJIT: opts.FullJIT, props: opts.Properties, nodeID: i + 1, multi: m}
		m.nodes = append(m.nodes, c)
	}
	for _, c := range m.nodes {
		if err := os.MkdirAll(c.dir, 0o750); err != nil {
			return nil, fmt.Errorf("start kafka: %w", err)
		}
		if err := os.RemoveAll(c.dataDir()); err != nil {
			return nil, fmt.Errorf("start kafka: %w", err)
		}
		if err := c.writeProperties(); err != nil {
			return nil, fmt.Errorf("start kafka: %w", err)
		}
	}
	return m, nil
}

// start formats and starts every node at once (a quorum elects a leader
// only once most voters run), then probes the whole cluster. On failure
// every node is killed.
func (m *Nodes) start(ctx context.Context) error {
	errs := make([]error, len(m.nodes))
	var wg sync.WaitGroup
	for i, c := range m.nodes {
		wg.Go(func() {
			if err := c.format(ctx); err != nil {
				errs[i] = fmt.Errorf("node %d: %w", c.nodeID, err)
				return
			}
			if err := c.run(ctx); err != nil {
				errs[i] = fmt.Errorf("node %d: %w", c.nodeID, err)
			}
		})
	}
	wg.Wait()
	err := errors.Join(errs...)
	if err == nil {
		rctx, cancel := context.WithTimeout(ctx, readyTimeout)
		err = waitReadyReplicated(rctx, m.Brokers(), len(m.nodes))
		cancel()
	}
	if err != nil {
		return errors.Join(err, m.Kill())
	}
	return nil
}

// newClusterID returns a Kafka cluster id: 16 random bytes in URL-safe
// base64, not starting with '-' (which the tools would read as a flag).
func newClusterID() (string, error) {
	for {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", fmt.Errorf("cluster id: %w", err)
		}
		if id := base64.RawURLEncoding.EncodeToString(b[:]); !strings.HasPrefix(id, "-") {
			return id, nil
		}
	}
}

// voters is controller.quorum.voters: id@host:port of every node.
func (m *Nodes) voters() string {
	vs := make([]string, len(m.nodes))
	for i, c := range m.nodes {
		vs[i] = strconv.Itoa(c.nodeID) + "@" + net.JoinHostPort("127.0.0.1", strconv.Itoa(c.ctlPort))
	}
	return strings.Join(vs, ",")
}

// Brokers returns every node's broker address, host:port, in node order;
// they stay the same across restarts.
func (m *Nodes) Brokers() []string {
	out := make([]string, len(m.nodes))
	for i, c := range m.nodes {
		out[i] = c.Brokers()[0]
	}
	return out
}

// Len returns the number of nodes.
func (m *Nodes) Len() int { return len(m.nodes) }

// Node returns node i (0-based; its Kafka node id is i+1). Its Stop,
// Kill and Restart act on that node alone; Restart returns once the node
// is registered with the quorum again.
func (m *Nodes) Node(i int) *Cluster { return m.nodes[i] }

// NodeByID returns the node whose Kafka node id (a partition's leader, as
// metadata names it) is id, or nil.
func (m *Nodes) NodeByID(id int32) *Cluster {
	for _, c := range m.nodes {
		if int32(c.nodeID) == id {
			return c
		}
	}
	return nil
}

// Stop stops every node: SIGTERM to all at once, and SIGKILL to those
// still running after nodesStopTimeout. A node's controlled shutdown needs
// the quorum, which the others are leaving, so the last ones often cannot
// finish it: being killed then is not an error. Stop returns an error when
// a node had exited on its own or could not be killed.
func (m *Nodes) Stop() error {
	errs := make([]error, len(m.nodes))
	var wg sync.WaitGroup
	for i, c := range m.nodes {
		wg.Go(func() {
			if _, err := c.stopWithin(nodesStopTimeout); err != nil {
				errs[i] = fmt.Errorf("node %d: %w", c.nodeID, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// nodesStopTimeout is how long Nodes.Stop waits for the controlled
// shutdowns (one node alone takes about 2.5 s).
const nodesStopTimeout = 10 * time.Second

// Kill kills every node with SIGKILL.
func (m *Nodes) Kill() error {
	var errs []error
	for _, c := range m.nodes {
		if err := c.Kill(); err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", c.nodeID, err))
		}
	}
	return errors.Join(errs...)
}

// ID returns the node's Kafka node id (1 for a one-node cluster).
func (c *Cluster) ID() int32 {
	if c.multi == nil {
		return 1
	}
	return int32(c.nodeID)
}

// Pause stops the node's process with SIGSTOP, as a machine that froze or
// a JVM in a long pause: its connections stay open and nothing answers.
// Resume sends SIGCONT. Pausing a stopped node does nothing.
func (c *Cluster) Pause() error { return c.signal(syscall.SIGSTOP) }

// Resume continues a node paused by Pause (a running one is unaffected).
func (c *Cluster) Resume() error { return c.signal(syscall.SIGCONT) }

func (c *Cluster) signal(sig syscall.Signal) error {
	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	if p == nil {
		return nil
	}
	if err := p.Signal(sig); err != nil {
		return fmt.Errorf("kafka node %d: %s: %w", c.ID(), sig, err)
	}
	return nil
}
