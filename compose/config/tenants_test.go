package config

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoal-mqtt/shoal/gateway/quota"
)

func loadYAML(t *testing.T, yml string) (Config, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "shoal.yaml")
	if err := os.WriteFile(file, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load("shoal", []string{"--config", file}, env(nil), io.Discard)
}

// TestTenantsSection: the default entry applies to every tenant, a
// tenant's own entry overrides the keys it sets (0 lifts a limit), sizes
// take units, and without the section nothing is limited.
func TestTenantsSection(t *testing.T) {
	c, err := loadYAML(t, `
tenants:
  default:
    max_connections: 10000
    max_connection_rate: 100
    max_messages_rate: 1000
    max_bytes_rate: 10MB
    max_subscriptions_per_client: 100
    max_retained: 10000
  acme:
    max_connections: 50
    connection_burst: 20
  free:
    max_messages_rate: 0
    max_bytes_rate: 1048576
  "":
    max_retained: 5
`)
	if err != nil {
		t.Fatal(err)
	}
	q := c.Tenants.Quotas()
	def := quota.Limits{MaxConnections: 10000, ConnectionRate: 100, MessagesRate: 1000, BytesRate: 10_000_000, MaxSubscriptionsPerClient: 100}
	if q.Default != def {
		t.Errorf("default %+v, want %+v", q.Default, def)
	}
	acme := def
	acme.MaxConnections, acme.ConnectionBurst = 50, 20
	free := def
	free.MessagesRate, free.BytesRate = 0, 1<<20
	for name, want := range map[string]quota.Limits{"acme": acme, "free": free, "": def, "other": def} {
		if got := q.Of(name); got != want {
			t.Errorf("tenant %q: %+v, want %+v", name, got, want)
		}
	}
	r := c.Tenants.RetainedLimits()
	for name, want := range map[string]int64{"acme": 10000, "": 5, "other": 10000} {
		if got := r.Of(name); got != want {
			t.Errorf("max_retained of %q: %d, want %d", name, got, want)
		}
	}

	none, err := Load("shoal", nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !none.Tenants.Quotas().IsZero() || !none.Tenants.RetainedLimits().IsZero() {
		t.Errorf("without a tenants section: %+v, want nothing limited", none.Tenants.Quotas())
	}
}

// TestTenantsNamesBadKeys: Validate names every bad key of the section.
func TestTenantsNamesBadKeys(t *testing.T) {
	_, err := loadYAML(t, `
tenants:
  default:
    max_messages_rate: -1
  acme:
    max_connections: -5
    max_bytes_rate: -1k
  beta:
    connection_burst: 3
  "":
    max_retained: -1
`)
	for _, want := range []string{
		"tenants.acme.max_connections: must be ≥ 0",
		"tenants.acme.max_bytes_rate: must be ≥ 0",
		"tenants.default.max_messages_rate: must be a number ≥ 0",
		"tenants.beta.connection_burst: a burst without max_connection_rate",
		`tenants."".max_retained: must be ≥ 0`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load: %v\nwant %q named", err, want)
		}
	}
	for yml, want := range map[string]string{
		"tenants:\n  acme:\n    max_conections: 5\n":    "max_conections",
		"tenants:\n  acme:\n    max_bytes_rate: 10XB\n": `"10XB": unknown unit`,
	} {
		if _, err := loadYAML(t, yml); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q in the error", yml, err, want)
		}
	}
}

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{
		"0": 0, "1024": 1024, "10MB": 10_000_000, "10 mb": 10_000_000, "512k": 512_000, "512KiB": 512 << 10,
		"1.5GiB": 3 << 29, "2G": 2_000_000_000, "7B": 7, "1Mi": 1 << 20, "1 MiB": 1 << 20, "1TiB": 1 << 40, "3 TB": 3e12,
	} {
		if got, err := ParseByteSize(in); err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MB", "10XB", "1e400", "99999999999GB", "ten"} {
		if got, err := ParseByteSize(in); err == nil {
			t.Errorf("ParseByteSize(%q) = %d, want an error", in, got)
		}
	}
}
