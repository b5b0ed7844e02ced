package kafka

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
)

// testTimeout bounds every wait in these tests.
const testTimeout = 20 * time.Second

// testLogger returns a logger writing to t.Log until the test ends.
func testLogger(t testing.TB) *slog.Logger { return testlog.New(t) }

// startEmbedded starts an embedded backbone in dir, closed at the end of the
// test (Close is idempotent, tests may close it earlier).
func startEmbedded(t testing.TB, dir string) *Embedded {
	t.Helper()
	// testEnvelopes' events carry a time in 2023, which the topics'
	// retention.ms (7 days) no longer keeps: a retention check between a
	// produce and a fetch would delete them. These backbones apply no
	// retention within a test (retention_test.go starts its own).
	e, err := StartEmbedded(EmbeddedConfig{Dir: dir, RetentionCheck: time.Hour}, testLogger(t))
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Embedded.Close: %v", err)
		}
	})
	return e
}

// newTestClient connects a client to e and ensures the catalogue's topics.
func newTestClient(t testing.TB, e *Embedded, cfg Config) *Client {
	t.Helper()
	dial := cfg.Dial
	cfg = e.ClientConfig(cfg) // in-process, as in shoal all; TestEmbeddedTCPAndInProcess covers TCP
	if dial != nil {
		cfg.Dial = dial
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, err := NewClient(ctx, cfg, testLogger(t))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	if err := c.EnsureTopics(ctx); err != nil {
		t.Fatalf("EnsureTopics: %v", err)
	}
	return c
}

// consumeN runs Consume until want records arrived (or the test timeout),
// and returns the records with the assigned/revoked callbacks' calls.
func consumeN(t testing.TB, c *Client, cfg ConsumeConfig, want int) []*Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var recs []*Record
	err := c.Consume(ctx, cfg, func(_ context.Context, b Batch) error {
		for i, r := range b.Records {
			if r.Topic != b.Topic || r.Partition != b.Partition {
				t.Errorf("record %d of batch %s/%d is from %s/%d", i, b.Topic, b.Partition, r.Topic, r.Partition)
			}
			if i > 0 && r.Offset <= b.Records[i-1].Offset {
				t.Errorf("batch %s/%d: offset %d after %d", b.Topic, b.Partition, r.Offset, b.Records[i-1].Offset)
			}
		}
		recs = append(recs, b.Records...)
		if len(recs) >= want {
			cancel()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if len(recs) != want {
		t.Fatalf("consumed %d records, want %d", len(recs), want)
	}
	return recs
}

func allPartitions(n int32) []int32 {
	ps := make([]int32, n)
	for i := range ps {
		ps[i] = int32(i)
	}
	return ps
}
