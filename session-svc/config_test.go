package sessionsvc

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	tests := []struct {
		name string
		edit func(*Config)
		keys []string
	}{
		{"zero backoff", func(c *Config) { c.RetryBackoff = 0 }, []string{"session.retry_backoff"}},
		{"negative backoff", func(c *Config) { c.RetryBackoff = -time.Second }, []string{"session.retry_backoff"}},
		{"both", func(c *Config) { c.MaxInbox = 0; c.RetryBackoff = 0 }, []string{"session.max_inbox", "session.retry_backoff"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("no error")
			}
			for _, k := range tc.keys {
				if !strings.Contains(err.Error(), k+":") {
					t.Errorf("error %q does not name %s", err, k)
				}
			}
		})
	}
}

func TestNewRefusesMissingParts(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	if _, err := New(DefaultConfig(), nil, newMemStore(), log, nil); err == nil || !strings.Contains(err.Error(), "kafka client") {
		t.Errorf("nil client: %v", err)
	}
	if _, err := New(Config{}, nil, newMemStore(), log, nil); err == nil || !strings.Contains(err.Error(), "session.retry_backoff") {
		t.Errorf("bad config: %v", err)
	}
}
