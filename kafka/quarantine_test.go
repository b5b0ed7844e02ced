package kafka

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
)

func TestQuarantineHoldsABrokerThatTimedOut(t *testing.T) {
	now := time.Unix(1000, 0)
	q := newQuarantine(time.Second, testlog.New(t))
	q.now = func() time.Time { return now }
	var dialled []string
	dial := q.dialer(func(_ context.Context, _, addr string) (net.Conn, error) {
		dialled = append(dialled, addr)
		return nil, errors.New("dialled")
	}, nil)
	meta := kgo.BrokerMetadata{NodeID: 1, Host: "127.0.0.1", Port: 9092}

	// Errors that are not a deadline's hold nothing.
	q.OnBrokerRead(meta, int16(kmsg.Produce), 0, 0, 0, context.Canceled)
	q.OnBrokerRead(meta, int16(kmsg.Produce), 0, 0, 0, kgo.ErrClientClosed)
	q.OnBrokerRead(meta, int16(kmsg.Produce), 10, 0, 0, nil)
	for _, addr := range []string{"127.0.0.1:9092", "127.0.0.1:9093"} {
		if _, err := dial(t.Context(), "tcp", addr); err == nil || err.Error() != "dialled" {
			t.Fatalf("dial of %s before any timeout: %v, want it dialled", addr, err)
		}
	}

	// A connection open when a request times out is closed: what is in
	// flight on it is sent again at once.
	client, server := net.Pipe()
	t.Cleanup(func() { _ = server.Close() })
	open := q.dialer(func(context.Context, string, string) (net.Conn, error) { return client, nil }, nil)
	conn, err := open(t.Context(), "tcp", "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	q.OnBrokerRead(meta, int16(kmsg.Produce), 0, 0, 0, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded})
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("read of a connection to the broker after the timeout: %v, want it closed", err)
	}
	_, err = dial(t.Context(), "tcp", "127.0.0.1:9092")
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "dial" || oe.Timeout() || !errors.Is(err, errQuarantined) {
		t.Fatalf("dial of a held broker: %#v, want a dial error that is not a timeout, of errQuarantined", err)
	}
	if _, err := dial(t.Context(), "tcp", "127.0.0.1:9093"); err == nil || err.Error() != "dialled" {
		t.Fatalf("dial of another broker: %v, want it dialled", err)
	}

	// A write past its deadline holds the broker again, from then.
	now = now.Add(900 * time.Millisecond)
	q.OnBrokerWrite(meta, int16(kmsg.Metadata), 0, 0, 0, &net.OpError{Op: "write", Net: "tcp", Err: os.ErrDeadlineExceeded})
	now = now.Add(900 * time.Millisecond)
	if _, err := dial(t.Context(), "tcp", "127.0.0.1:9092"); !errors.Is(err, errQuarantined) {
		t.Fatalf("dial 0.9 s after the second timeout: %v, want it refused", err)
	}
	now = now.Add(101 * time.Millisecond)
	if _, err := dial(t.Context(), "tcp", "127.0.0.1:9092"); err == nil || err.Error() != "dialled" {
		t.Fatalf("dial once the hold ended: %v, want it dialled", err)
	}
	if len(dialled) != 4 {
		t.Fatalf("dialled %v, want 4 dials", dialled)
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &quarantinedError{addr: "127.0.0.1:9092", left: time.Second}}
	if !quarantinedDial([]any{"err", refused}) || quarantinedDial([]any{"err", errors.New("other"), "n", 1}) {
		t.Fatal("quarantinedDial: a refused dial's error not told from another")
	}
}

// With no other broker to go to, a broker that timed out is dialled and
// its connections are left open: a cluster of one that is starting
// accepts connections before it answers, and holding it only delayed the
// reconnect after a restart (17 s instead of 10 in an integration test).
// Once a second broker is known, the hold applies.
func TestQuarantineHoldsNoLoneBroker(t *testing.T) {
	now := time.Unix(1000, 0)
	q := newQuarantine(time.Second, testlog.New(t))
	q.now = func() time.Time { return now }
	client, server := net.Pipe()
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	dial := q.dialer(func(context.Context, string, string) (net.Conn, error) { return client, nil }, nil)
	conn, err := dial(t.Context(), "tcp", "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	meta := kgo.BrokerMetadata{NodeID: 1, Host: "127.0.0.1", Port: 9092}
	q.OnBrokerRead(meta, int16(kmsg.Metadata), 0, 0, 0, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded})
	go func() { _, _ = server.Write([]byte{1}) }()
	if _, err := conn.Read(make([]byte, 1)); err != nil {
		t.Fatalf("read of the lone broker's connection after a timeout: %v, want it left open", err)
	}
	if _, err := dial(t.Context(), "tcp", "127.0.0.1:9092"); err != nil {
		t.Fatalf("dial of the lone broker after a timeout: %v, want it dialled", err)
	}

	// Another broker known: the first, still within its hold, is refused;
	// the other is dialled.
	if _, err := dial(t.Context(), "tcp", "127.0.0.1:9093"); err != nil {
		t.Fatalf("dial of a second broker: %v", err)
	}
	if _, err := dial(t.Context(), "tcp", "127.0.0.1:9092"); !errors.Is(err, errQuarantined) {
		t.Fatalf("dial of the held broker once another is known: %v, want it refused", err)
	}

	// Every known broker held: each is dialled.
	q.OnBrokerRead(kgo.BrokerMetadata{NodeID: 2, Host: "127.0.0.1", Port: 9093}, int16(kmsg.Fetch), 0, 0, 0, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded})
	for _, addr := range []string{"127.0.0.1:9092", "127.0.0.1:9093"} {
		if _, err := dial(t.Context(), "tcp", addr); err != nil {
			t.Fatalf("dial of %s with every broker held: %v, want it dialled", addr, err)
		}
	}
}

// A broker that went silent, its sockets open (a frozen broker), gets no
// request once one of its requests timed out: neither on a connection
// that was open (closed then) nor on a new one (refused for the hold).
// Without that, franz-go sends metadata requests round its brokers, the
// silent one too, and each waits out its deadline; a produce that timed
// out waits for that metadata before it goes to the partition's new
// leader.
func TestFrozenBrokerGetsNoRequestAfterATimeout(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	if err := cluster.MoveTopicPartition("t", 0, 0); err != nil {
		t.Fatal(err)
	}
	var frozen, counting atomic.Bool
	var got atomic.Int32 // requests node 0 got while counting
	cluster.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if !frozen.Load() || cluster.CurrentNode() != 0 {
			return nil, nil, false
		}
		if counting.Load() {
			got.Add(1)
			t.Logf("node 0 got %s", kmsg.NameForKey(req.Key()))
		}
		return nil, nil, true // no answer, ever: the connection stays open
	})

	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	// A hold of 1.5 s: longer than what follows the timeout takes.
	c, err := NewClient(ctx, Config{Brokers: cluster.ListenAddrs(), RequestTimeout: 3 * time.Second}, testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	// Connections of every kind to every broker, node 0's among them.
	for range 4 {
		if _, err := c.cl.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ProduceSync(ctx, &Record{Topic: "t", Partition: 0, Value: []byte("before")}); err != nil {
		t.Fatal(err)
	}

	// Node 0 freezes and the controller gives its partition to node 1, as
	// Kafka's does once the frozen broker's session ran out.
	frozen.Store(true)
	if err := cluster.MoveTopicPartition("t", 0, 1); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := c.ProduceSync(ctx, &Record{Topic: "t", Partition: 0, Value: []byte("during")}); err != nil {
		t.Fatal(err)
	}
	t.Logf("produce acknowledged %s after the freeze", time.Since(began).Round(time.Millisecond))

	// Requests to any broker go round all of them: one of four at least
	// is for node 0.
	counting.Store(true)
	for range 4 {
		if _, err := c.cl.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
			t.Fatal(err)
		}
	}
	if n := got.Load(); n != 0 {
		t.Fatalf("the frozen broker got %d requests after one of its requests timed out, want none", n)
	}
}
