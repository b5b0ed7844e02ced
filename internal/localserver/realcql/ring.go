//go:build unix

package realcql

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shoal-mqtt/shoal/internal/localserver/serverproc"
)

// MaxRing is the largest ring StartRing starts (its nodes take the
// addresses 127.0.0.1 to 127.0.0.MaxRing).
const MaxRing = 9

// placement is a ring node's place in the ring.
type placement struct {
	size  int    // nodes in the ring
	token string // the node's one token
	seeds string // every node's storage address, comma-separated
}

// ringFlags are the JVM properties of a ring node. Every node is a seed,
// so none waits for another to start; the gossip settle wait is skipped
// (the ring waits for its peers itself, below), the ring delay is short.
var ringFlags = [...]string{
	"-Dcassandra.skip_wait_for_gossip_to_settle=0",
	"-Dcassandra.ring_delay_ms=1000",
}

// Ring is a ring of Cassandra nodes on loopback, one per address
// 127.0.0.1, 127.0.0.2, …, all on the same ports (a ring's storage port is
// one for all its nodes, and drivers reach the peers they discover on the
// native port they were given). Its methods are safe for concurrent use.
type Ring struct {
	nodes []*Node
}

// StartRing starts a ring of n nodes (at most [MaxRing]) with their
// directories under dir (node1, node2, …) and returns once every node
// answers CQL and sees the others among its peers, or fails within
// [ReadyTimeout]. logw gives each node's output writer (nil: only the
// nodes' output.log). The nodes start together, each with one token,
// evenly spread, and without bootstrapping (an empty ring has nothing to
// stream). On error no process is left running.
func StartRing(ctx context.Context, dir string, n int, logw func(i int) io.Writer, opts Options) (*Ring, error) {
	if n < 1 || n > MaxRing {
		return nil, fmt.Errorf("start cassandra ring: %d nodes, want 1 to %d", n, MaxRing)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("start cassandra ring: %w", err)
	}
	var errs []error
	for attempt := 1; attempt <= bindAttempts; attempt++ {
		r, err := startRing(ctx, dir, n, logw, opts)
		if err == nil {
			return r, nil
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w", attempt, err))
		if !errors.Is(err, errPortTaken) || ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("start cassandra ring of %d in %s: %w", n, dir, errors.Join(errs...))
}

// startRing makes one attempt at StartRing, on newly picked ports.
func startRing(ctx context.Context, dir string, n int, logw func(i int) io.Writer, opts Options) (*Ring, error) {
	p, err := ringPorts(n)
	if err != nil {
		return nil, err
	}
	seeds := make([]string, n)
	for i := range n {
		seeds[i] = net.JoinHostPort(ringHost(i), strconv.Itoa(p.storage))
	}
	r := &Ring{nodes: make([]*Node, n)}
	for i := range n {
		ndir := filepath.Join(dir, "node"+strconv.Itoa(i+1))
		if err := os.MkdirAll(ndir, 0o750); err != nil {
			return nil, errors.Join(fmt.Errorf("start node %d: %w", i+1, err), r.Stop())
		}
		var w io.Writer
		if logw != nil {
			w = logw(i)
		}
		out, err := newOutput(filepath.Join(ndir, "output.log"), w)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("start node %d: %w", i+1, err), r.Stop())
		}
		lib, err := fetch(ctx, out)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("start node %d: %w", i+1, err), out.close(), r.Stop())
		}
		r.nodes[i] = &Node{
			dir: ndir, lib: lib, logw: w, out: out, host: ringHost(i), heapMiB: opts.heap(), ports: p, fullJIT: opts.FullJIT,
			ring: &placement{size: n, token: ringToken(i, n), seeds: strings.Join(seeds, ",")},
		}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, node := range r.nodes {
		wg.Go(func() {
			if err := node.run(ctx); err != nil {
				errs[i] = fmt.Errorf("node %d (%s): %w", i+1, node.Addr(), errors.Join(err, node.out.close()))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(err, r.Stop())
	}
	return r, nil
}

// ringHost returns the address of the ring's node i (from 0).
func ringHost(i int) string { return "127.0.0." + strconv.Itoa(i+1) }

// ringToken returns the token of node i of n: the Murmur3 range
// [-2^63, 2^63) cut in n equal parts.
func ringToken(i, n int) string {
	lo := new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 63))
	step := new(big.Int).Div(new(big.Int).Lsh(big.NewInt(1), 64), big.NewInt(int64(n)))
	return new(big.Int).Add(lo, step.Mul(step, big.NewInt(int64(i)))).String()
}

// ringPorts picks ports free on 127.0.0.1 and checks that the ring's other
// addresses have them free too.
func ringPorts(n int) (ports, error) {
	p, err := serverproc.FreePorts(3)
	if err != nil {
		return ports{}, err
	}
	for i := 1; i < n; i++ {
		for _, port := range p {
			l, err := net.Listen("tcp", net.JoinHostPort(ringHost(i), strconv.Itoa(port)))
			if err != nil {
				return ports{}, fmt.Errorf("%w: %s:%d: %w", errPortTaken, ringHost(i), port, err)
			}
			_ = l.Close() // only a check
		}
	}
	return ports{native: p[0], storage: p[1], ssl: p[2]}, nil
}

// Hosts returns the nodes' CQL addresses, node 1 first.
func (r *Ring) Hosts() []string {
	hs := make([]string, len(r.nodes))
	for i, n := range r.nodes {
		hs[i] = n.Addr()
	}
	return hs
}

// Len returns the number of nodes.
func (r *Ring) Len() int { return len(r.nodes) }

// Node returns node i, from 0.
func (r *Ring) Node(i int) *Node { return r.nodes[i] }

// Stop stops every node at once ([Node.Stop]) and returns their errors.
func (r *Ring) Stop() error {
	errs := make([]error, len(r.nodes))
	var wg sync.WaitGroup
	for i, n := range r.nodes {
		if n == nil {
			continue
		}
		wg.Go(func() {
			if err := n.Stop(); err != nil {
				errs[i] = fmt.Errorf("node %d: %w", i+1, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// peersQuery lists the peers a node knows in the ring (one text column
// per row: the query's result must be text).
const peersQuery = "SELECT release_version FROM system.peers"

// waitPeers queries addr until it lists want peers, ctx ends or exited is
// closed.
func waitPeers(ctx context.Context, addr string, want int, exited <-chan struct{}) error {
	for attempt := 1; ; attempt++ {
		rows, err := query(ctx, addr, peersQuery)
		if err == nil && len(rows) >= want {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("%d peers, want %d", len(rows), want)
		}
		t := time.NewTimer(probeInterval)
		select {
		case <-exited:
			t.Stop()
			return fmt.Errorf("peers probe %d: %w", attempt, err)
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("peers probe %d: %w", attempt, errors.Join(ctx.Err(), err))
		case <-t.C:
		}
	}
}
