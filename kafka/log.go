package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kgoLogger sends franz-go's client logs to slog at the same level: its
// warnings include every retried produce and fetch error, so nothing is
// retried silently.
type kgoLogger struct{ log *slog.Logger }

func (l kgoLogger) Level() kgo.LogLevel {
	ctx := context.Background()
	switch {
	case l.log.Enabled(ctx, slog.LevelDebug):
		return kgo.LogLevelDebug
	case l.log.Enabled(ctx, slog.LevelWarn):
		return kgo.LogLevelWarn
	case l.log.Enabled(ctx, slog.LevelError):
		return kgo.LogLevelError
	}
	return kgo.LogLevelNone
}

func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lvl := kgoSlogLevel(level)
	if lvl > slog.LevelDebug && quarantinedDial(keyvals) {
		// A dial the quarantine refused: it logged the hold once.
		lvl = slog.LevelDebug
	}
	l.log.Log(context.Background(), lvl, msg, keyvals...)
}

// quarantinedDial says whether one of keyvals is an error of a dial the
// quarantine refused (quarantine.go).
func quarantinedDial(keyvals []any) bool {
	for _, v := range keyvals {
		if err, ok := v.(error); ok && errors.Is(err, errQuarantined) {
			return true
		}
	}
	return false
}

func kgoSlogLevel(level kgo.LogLevel) slog.Level {
	switch level {
	case kgo.LogLevelError:
		return slog.LevelError
	case kgo.LogLevelWarn:
		return slog.LevelWarn
	}
	// franz-go's info level is client bookkeeping (metadata loads, group
	// joins): debug for Shoal's operators.
	return slog.LevelDebug
}

// kfakeLogger sends the embedded cluster's logs to slog. Its info level is
// group bookkeeping, logged at debug. It remembers the errors logged while
// the cluster shuts down (kfake's Close reports persistence failures only
// through its logger) so that Embedded.Close can return them.
type kfakeLogger struct {
	log *slog.Logger

	mu        sync.Mutex
	capturing bool
	captured  []error
}

func (l *kfakeLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	var lvl slog.Level
	switch level {
	case kfake.LogLevelError:
		lvl = slog.LevelError
	case kfake.LogLevelWarn:
		lvl = slog.LevelWarn
	default:
		lvl = slog.LevelDebug
	}
	l.mu.Lock()
	capture := l.capturing && level == kfake.LogLevelError
	l.mu.Unlock()
	if !capture && !l.log.Enabled(context.Background(), lvl) {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if capture {
		l.mu.Lock()
		l.captured = append(l.captured, fmt.Errorf("embedded kafka: %s", msg))
		l.mu.Unlock()
	}
	l.log.Log(context.Background(), lvl, "embedded kafka", "detail", msg)
}

func (l *kfakeLogger) startCapture() {
	l.mu.Lock()
	l.capturing = true
	l.mu.Unlock()
}

func (l *kfakeLogger) stopCapture() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.capturing = false
	errs := l.captured
	l.captured = nil
	return errs
}
