package kafka

import (
	"testing"
	"time"
)

// Retries back off like Kafka's Java clients: 100ms doubled per failure,
// at most 1s, with ±20% jitter.
func TestRetryBackoff(t *testing.T) {
	for _, tt := range []struct {
		fails int
		base  time.Duration
	}{
		{0, 100 * time.Millisecond},
		{1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond},
		{3, 400 * time.Millisecond},
		{4, 800 * time.Millisecond},
		{5, time.Second},
		{9, time.Second},
		{10, time.Second},
		{1 << 20, time.Second},
	} {
		lo, hi := tt.base*8/10, tt.base*12/10
		for range 100 {
			if d := retryBackoff(tt.fails); d < lo || d > hi {
				t.Fatalf("retryBackoff(%d) = %s, want within [%s, %s]", tt.fails, d, lo, hi)
			}
		}
	}
}
