package config

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelmChartConfigs loads the shoal.yaml the Helm chart renders for
// each documented combination of values (kept as golden files by
// deploy/helm/charttest's TestShoalYAMLGolden) as every role of the chart
// does, with the environment the chart's pods set: each must load and
// validate, so the chart never writes a key or a value Shoal refuses.
func TestHelmChartConfigs(t *testing.T) {
	files, err := filepath.Glob("../../deploy/helm/charttest/testdata/golden/*.shoal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("%d rendered configurations, want one per combination of the chart's tests", len(files))
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".shoal.yaml"), func(t *testing.T) {
			for _, role := range []string{"gateway", "router", "session"} {
				vars := map[string]string{"GOMEMLIMIT": "2147483648"}
				if role == "gateway" {
					vars["SHOAL_GATEWAY_ID"] = "shoal-gateway-1"
					vars["SHOAL_GATEWAY_SLOT"] = "1"
				}
				c, err := Load("shoal "+role, []string{"--config", f}, env(vars), io.Discard)
				if err != nil {
					t.Fatalf("%s: %v", role, err)
				}
				if len(c.Kafka.Brokers) == 0 || len(c.CQL.Hosts) == 0 {
					t.Errorf("%s: no Kafka brokers (%v) or CQL hosts (%v): a role of the chart needs both", role, c.Kafka.Brokers, c.CQL.Hosts)
				}
			}
		})
	}
}
