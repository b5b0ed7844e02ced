package testlog

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
)

// Buffer collects what a logger or a child process writes, safe for
// writers on other goroutines while the test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Lines returns the lines written so far that contain substr.
func (s *Buffer) Lines(substr string) []string {
	var out []string
	for _, l := range strings.Split(s.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// NewLogger returns a Buffer and a text logger writing to it at debug
// level, for tests that assert what was logged.
func NewLogger() (*Buffer, *slog.Logger) {
	b := &Buffer{}
	return b, slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
