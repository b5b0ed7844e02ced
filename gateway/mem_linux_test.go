//go:build linux

package gateway

import (
	"fmt"
	"net"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// connMemory is the gateway's memory per idle connection: Go heap
// objects and goroutine stacks after a GC, and the goroutines.
type connMemory struct {
	heap, stacks, goroutines float64
}

// idleConnMemory opens n idle 5.0 connections to an in-process gateway
// (over a fake log) and returns what they cost it, per connection. The
// clients are raw sockets (a descriptor each, no Go memory), so the
// growth is the gateway's own: the connection, its socket's net.TCPConn,
// the gateway's tables, and the reader goroutine when it is not parked.
func idleConnMemory(tb testing.TB, n int, parkIdle time.Duration) connMemory {
	tb.Helper()
	fl := newFakeLog()
	g := startGateway(tb, fl, func(c *Config) { c.ParkIdle = parkIdle })
	addr, ok := g.Addr("mqtt").(*net.TCPAddr)
	if !ok {
		tb.Fatalf("listener address %v is not TCP", g.Addr("mqtt"))
	}
	// Warm up (pools, map growth of a first connection).
	closeAll(rawConnect(tb, addr, "warm", 16))
	eventually.True(tb, gatewayWait, "warm-up connections to end", func() bool { return g.Stats.Load(ConnectionsCurrent) == 0 })

	before := readMemory()
	fds := rawConnect(tb, addr, "idle", n)
	defer closeAll(fds)
	if parkIdle > 0 {
		eventually.True(tb, gatewayWait, "every connection to park", func() bool { return g.Parked() == int64(n) })
	} else {
		// Counted once its CONNACK is out: its reader goes on to Read.
		eventually.True(tb, gatewayWait, "every connection counted", func() bool { return g.Stats.Load(ConnectionsCurrent) == int64(n) })
	}
	after := readMemory()
	return connMemory{
		heap:       float64(after.heap-before.heap) / float64(n),
		stacks:     float64(after.stacks-before.stacks) / float64(n),
		goroutines: float64(after.goroutines-before.goroutines) / float64(n),
	}
}

type memSample struct{ heap, stacks, goroutines int64 }

// readMemory collects garbage and reads the live heap and the stacks.
func readMemory() memSample {
	runtime.GC()
	runtime.GC() // the first may leave objects of finalizers
	s := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/stacks:bytes"},
		{Name: "/sched/goroutines:goroutines"},
	}
	metrics.Read(s)
	return memSample{int64(s[0].Value.Uint64()), int64(s[1].Value.Uint64()), int64(s[2].Value.Uint64())}
}

// rawConnect opens n connections with client ids t-<prefix>-<i> and waits
// for each CONNACK, with blocking system calls only.
func rawConnect(tb testing.TB, addr *net.TCPAddr, prefix string, n int) []int {
	tb.Helper()
	fds := make([]int, n)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fd, err := rawConnectOne(addr, "t-"+prefix+"-"+strconv.Itoa(i))
				mu.Lock()
				fds[i] = fd
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		closeAll(fds)
		tb.Fatal(firstErr)
	}
	return fds
}

func rawConnectOne(addr *net.TCPAddr, id string) (int, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	sa := &syscall.SockaddrInet4{Port: addr.Port}
	copy(sa.Addr[:], addr.IP.To4())
	tv := syscall.NsecToTimeval(int64(5 * time.Second))
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		_ = syscall.Close(fd)
		return -1, fmt.Errorf("set receive timeout: %w", err)
	}
	if err := syscall.Connect(fd, sa); err != nil {
		_ = syscall.Close(fd)
		return -1, fmt.Errorf("connect: %w", err)
	}
	cp := (&packet.Connect{Version: packet.V5, ClientID: []byte(id), CleanStart: true}).Append(nil, packet.V5)
	if _, err := syscall.Write(fd, cp); err != nil {
		_ = syscall.Close(fd)
		return -1, fmt.Errorf("write connect: %w", err)
	}
	var buf [64]byte
	m, err := syscall.Read(fd, buf[:])
	if err != nil || m < 2 || packet.Type(buf[0]>>4) != packet.CONNACK {
		_ = syscall.Close(fd)
		return -1, fmt.Errorf("read connack of %s: %d bytes %x: %w", id, m, buf[:max(m, 0)], err)
	}
	return fd, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		if fd > 0 {
			_ = syscall.Close(fd)
		}
	}
}

// TestIdleConnectionMemory: a parked idle connection costs the gateway no
// goroutine and under 2 KiB of heap (the figures are in bench/README.md; a
// reader goroutine per connection costs 4 KiB of stack more, and its decode
// state and read buffer 2 KiB of heap). The stacks are reported, not
// checked: after the connections park, what is left is the runtime's cache
// of free goroutines, which does not depend on their number.
func TestIdleConnectionMemory(t *testing.T) {
	const n = 1000
	m := idleConnMemory(t, n, 20*time.Millisecond)
	t.Logf("parked: %.0f B heap + %.0f B stacks per connection, %.3f goroutines", m.heap, m.stacks, m.goroutines)
	if m.goroutines > 0.01 {
		t.Errorf("%.3f goroutines per parked connection, want none", m.goroutines)
	}
	if m.heap > 2048 {
		t.Errorf("%.0f bytes of heap per parked connection, want at most 2048", m.heap)
	}
}

// BenchmarkIdleConnections reports the gateway's memory per idle
// connection, parked and with a reader goroutine each:
//
//	go test -run='^$' -bench=IdleConnections -benchtime=1x ./gateway/
func BenchmarkIdleConnections(b *testing.B) {
	const n = 2000
	for _, mode := range []struct {
		name string
		park time.Duration
	}{{"parked", 20 * time.Millisecond}, {"goroutine", 0}} {
		b.Run(mode.name, func(b *testing.B) {
			var sum connMemory
			for range b.N {
				m := idleConnMemory(b, n, mode.park)
				sum.heap += m.heap
				sum.stacks += m.stacks
				sum.goroutines += m.goroutines
			}
			k := float64(b.N)
			b.ReportMetric(sum.heap/k, "heap-B/conn")
			b.ReportMetric(sum.stacks/k, "stack-B/conn")
			b.ReportMetric((sum.heap+sum.stacks)/k, "B/conn")
			b.ReportMetric(sum.goroutines/k, "goroutines/conn")
			b.ReportMetric(0, "ns/op")
		})
	}
}
