package testlog

import (
	"bytes"
	"log/slog"
	"os"
	"sync"
	"testing"
)

// New returns a logger of warnings and errors (everything with
// SHOAL_TEST_DEBUG set) that writes to t.Log until t ends.
func New(t testing.TB) *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("SHOAL_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	w := &writer{t: t}
	t.Cleanup(w.stop)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

type writer struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

func (w *writer) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
