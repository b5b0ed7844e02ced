package kafka

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestMemPipeCarriesBytesInOrder streams random-sized writes through both
// directions at once, read with random-sized buffers.
func TestMemPipeCarriesBytesInOrder(t *testing.T) {
	a, b := memPipe()
	defer closeBoth(a, b)
	const total = 1 << 20
	stream := func(seed uint64) []byte {
		r := rand.New(rand.NewPCG(seed, seed))
		p := make([]byte, total)
		for i := range p {
			p[i] = byte(r.Uint32())
		}
		return p
	}
	var wg sync.WaitGroup
	check := func(w, r net.Conn, seed uint64) {
		defer wg.Done()
		want := stream(seed)
		go func() {
			rng := rand.New(rand.NewPCG(seed, 1))
			for off := 0; off < total; {
				n := min(1+rng.IntN(5000), total-off)
				if _, err := w.Write(want[off : off+n]); err != nil {
					t.Error(err)
					return
				}
				off += n
			}
		}()
		got := make([]byte, 0, total)
		buf := make([]byte, 7000)
		rng := rand.New(rand.NewPCG(seed, 2))
		for len(got) < total {
			n, err := r.Read(buf[:1+rng.IntN(len(buf)-1)])
			if err != nil {
				t.Error(err)
				return
			}
			got = append(got, buf[:n]...)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("stream %d: bytes differ", seed)
		}
	}
	wg.Add(2)
	go check(a, b, 1)
	go check(b, a, 2)
	wg.Wait()
}

// TestMemPipeReadDeadline runs in a synctest bubble: its deadlines pass on
// the bubble's clock, at once and exactly.
func TestMemPipeReadDeadline(t *testing.T) { synctest.Test(t, testMemPipeReadDeadline) }

func testMemPipeReadDeadline(t *testing.T) {
	a, b := memPipe()
	defer closeBoth(a, b)
	buf := make([]byte, 10)
	// A deadline in the past fails at once, as a timeout.
	_ = b.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := b.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %v", err)
	}
	var ne net.Error
	if _, err := b.Read(buf); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("the error %v is not a net.Error timeout", err)
	}
	// A waiting read ends at its deadline, not before.
	_ = b.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	start := time.Now()
	if _, err := b.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read with a deadline: %v", err)
	}
	if d := time.Since(start); d != 20*time.Millisecond {
		t.Fatalf("read gave up after %v, want its deadline's 20ms", d)
	}
	// A read waiting without a deadline ends when one is set in the past.
	_ = b.SetReadDeadline(time.Time{})
	errc := make(chan error, 1)
	go func() { _, err := b.Read(buf); errc <- err }()
	synctest.Wait() // the read waits
	select {
	case err := <-errc:
		t.Fatalf("a read without a deadline returned %v with nothing to read", err)
	default:
	}
	_ = b.SetReadDeadline(time.Now())
	select {
	case err := <-errc:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read after the deadline moved: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiting read did not see its new deadline")
	}
	// Data that is there is read even after a deadline was cleared.
	_ = b.SetReadDeadline(time.Time{})
	if _, err := a.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Read(buf); err != nil || string(buf[:n]) != "hi" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
}

func TestMemPipeClose(t *testing.T) {
	a, b := memPipe()
	if _, err := a.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, err := a.Read(make([]byte, 1)); errc <- err }() // waits
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, io.EOF) {
			t.Fatalf("a read waiting on the closed end: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("closing did not end a waiting read")
	}
	// The other end reads what was written before the close, then EOF.
	got, err := io.ReadAll(b)
	if err != nil || string(got) != "last words" {
		t.Fatalf("read %q, %v after the close", got, err)
	}
	if _, err := b.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write to a closed pipe: %v", err)
	}
	if _, err := a.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write on the closed end: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

// TestMemPipeBufferBounded: a reader that always lags a little behind
// never lets the buffer drain, yet it holds about what is unread; after a
// burst is read the pipe holds no chunk.
func TestMemPipeBufferBounded(t *testing.T) {
	a, b := memPipe()
	defer closeBoth(a, b)
	mc, ok := b.(*memConn)
	if !ok {
		t.Fatalf("memPipe gave a %T", b)
	}
	in := mc.in
	chunks := func() int {
		in.mu.Lock()
		defer in.mu.Unlock()
		return len(in.chunks)
	}
	chunk := make([]byte, 1000)
	buf := make([]byte, 999)
	unread := 0
	for range 10000 {
		if _, err := a.Write(chunk); err != nil {
			t.Fatal(err)
		}
		n, err := b.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		unread += len(chunk) - n
	}
	if n := chunks(); n > 1+unread/pipeChunk+1 {
		t.Fatalf("%d chunks held for %d unread bytes", n, unread)
	}
	const burst = 10 * pipeChunk
	if _, err := a.Write(make([]byte, burst)); err != nil {
		t.Fatal(err)
	}
	if n := chunks(); n < burst/pipeChunk {
		t.Fatalf("%d chunks hold a burst of %d bytes", n, burst)
	}
	if _, err := io.ReadFull(b, make([]byte, burst+unread)); err != nil {
		t.Fatal(err)
	}
	if n := chunks(); n != 0 {
		t.Fatalf("a drained pipe holds %d chunks, want 0", n)
	}
}

// BenchmarkMemPipe is a request and a response of 1 KiB through a pipe:
// no allocation once the chunks are there.
func BenchmarkMemPipe(b *testing.B) {
	x, y := memPipe()
	defer closeBoth(x, y)
	msg := make([]byte, 1024)
	buf := make([]byte, 1024)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := x.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(y, buf); err != nil {
			b.Fatal(err)
		}
		if _, err := y.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(x, buf); err != nil {
			b.Fatal(err)
		}
	}
}

func closeBoth(a, b net.Conn) {
	_ = a.Close()
	_ = b.Close()
}
