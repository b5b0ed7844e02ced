package routersvc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// barrierStore's loads each wait until want of them run at once, or give
// up after a second: a router loading its shards one after another fails
// every load.
type barrierStore struct {
	Store
	want int

	mu      sync.Mutex
	running int
	most    int
	all     chan struct{}
}

func (b *barrierStore) LoadShard(ctx context.Context, partition int32, l ShardLoader) (int64, error) {
	b.mu.Lock()
	b.running++
	b.most = max(b.most, b.running)
	if b.running == b.want {
		close(b.all)
	}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.running--
		b.mu.Unlock()
	}()
	select {
	case <-b.all:
		return -1, nil
	case <-time.After(time.Second): // a bound on the test: loads one at a time never meet
		return 0, errors.New("loaded alone")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// TestShardsLoadAtOnce: the shards of an assignment load shardLoaders at a
// time, never more, and each is loaded once they all are.
func TestShardsLoadAtOnce(t *testing.T) {
	st := &barrierStore{want: shardLoaders, all: make(chan struct{})}
	r := &Router{cfg: DefaultConfig(), store: st, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		clock: time.Now, presence: NewPresence(), shards: make(map[int32]*Shard)}
	parts := make([]int32, 3*shardLoaders)
	for i := range parts {
		parts[i] = int32(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.loadShards(ctx, parts, false); err != nil {
		t.Fatalf("loadShards: %v", err)
	}
	if st.most != shardLoaders {
		t.Errorf("at most %d loads at once, want %d", st.most, shardLoaders)
	}
	for _, p := range parts {
		if r.shard(p) == nil {
			t.Errorf("partition %d not loaded", p)
		}
	}
}

// TestShardsLoadErrors: without retries, every failed load is reported.
func TestShardsLoadErrors(t *testing.T) {
	st := &barrierStore{want: shardLoaders + 1, all: make(chan struct{})} // never met
	r := &Router{cfg: DefaultConfig(), store: st, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		clock: time.Now, presence: NewPresence(), shards: make(map[int32]*Shard)}
	err := r.loadShards(context.Background(), []int32{0, 1}, false)
	if err == nil || r.shard(0) != nil || r.shard(1) != nil {
		t.Fatalf("loadShards: %v, shards %v %v", err, r.shard(0), r.shard(1))
	}
}
