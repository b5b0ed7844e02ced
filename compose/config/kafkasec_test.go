package config

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoal-mqtt/shoal/internal/testutil/testpki"
)

func TestKafkaSecurity(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := testpki.NewCA(t, "ca")
	caFile := testpki.WriteFile(t, dir, "ca.pem", ca.PEM)
	c, err := Load("shoal", []string{"--kafka-brokers", "k1:9093", "--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-user", "shoal",
		"--kafka-sasl-password-file", pw, "--kafka-tls", "true", "--kafka-tls-ca-file", caFile, "--kafka-tls-server-name", "kafka.internal"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	sasl, tc, err := c.Kafka.Security()
	if err != nil {
		t.Fatal(err)
	}
	if sasl == nil || sasl.Password != "s3cret" || sasl.User != "shoal" || sasl.Mechanism != "SCRAM-SHA-512" {
		t.Errorf("sasl %v", sasl)
	}
	if tc == nil || tc.RootCAs == nil || tc.ServerName != "kafka.internal" {
		t.Errorf("tls %+v", tc)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kafka-brokers", "k:1", "--kafka-sasl-mechanism", "GSSAPI", "--kafka-sasl-user", "u", "--kafka-sasl-password-file", pw}, "kafka.sasl.mechanism"},
		{[]string{"--kafka-brokers", "k:1", "--kafka-sasl-mechanism", "PLAIN"}, "kafka.sasl.password_file"},
		{[]string{"--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-user", "u", "--kafka-sasl-password-file", pw}, "external cluster"},
		{[]string{"--kafka-brokers", "k:1", "--kafka-tls-ca-file", caFile}, "kafka.tls.enabled"},
		{[]string{"--kafka-brokers", "k:1", "--kafka-tls", "true", "--kafka-tls-cert-file", "c.pem"}, "kafka.tls.key_file"},
		{[]string{"--kafka-tls", "maybe"}, "kafka.tls.enabled"},
	} {
		if _, err := Load("shoal", tc.args, env(nil), io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	c, err = Load("shoal", []string{"--kafka-brokers", "k:1", "--kafka-tls", "true", "--kafka-tls-ca-file", pw}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Kafka.Security(); err == nil || !strings.Contains(err.Error(), "kafka.tls.ca_file") {
		t.Errorf("a CA file without a certificate: %v", err)
	}
}
