package routersvc_test

import (
	"strings"
	"testing"
	"time"

	routersvc "github.com/shoal-mqtt/shoal/router-svc"
)

func TestConfigValidate(t *testing.T) {
	if err := routersvc.DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	for _, tc := range []struct {
		key string
		mod func(*routersvc.Config)
	}{
		{"router.partitions", func(c *routersvc.Config) { c.Group, c.Partitions = "g", []int32{0} }},
		{"router.partitions[1]", func(c *routersvc.Config) { c.Partitions = []int32{0, -1} }},
		{"router.partitions[2]", func(c *routersvc.Config) { c.Partitions = []int32{0, 1, 0} }},
		{"router.max_targets_per_delivery", func(c *routersvc.Config) { c.MaxTargetsPerDelivery = 0 }},
		{"router.presence_timeout", func(c *routersvc.Config) { c.PresenceTimeout = 0 }},
		{"router.retry_backoff", func(c *routersvc.Config) { c.RetryBackoff = -time.Second }},
		{"router.max_retry_backoff", func(c *routersvc.Config) { c.MaxRetryBackoff = c.RetryBackoff / 2 }},
		{"router.max_polls_in_flight", func(c *routersvc.Config) { c.MaxPollsInFlight = 0 }},
		{"router.offset_interval", func(c *routersvc.Config) { c.OffsetInterval = -time.Second }},
	} {
		cfg := routersvc.DefaultConfig()
		tc.mod(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.key+":") {
			t.Errorf("%s: Validate() = %v, want an error naming it", tc.key, err)
		}
	}
}
