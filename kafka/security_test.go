package kafka

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
	"github.com/shoal-mqtt/shoal/internal/testutil/testpki"
)

// TestClientTLSAndSASL: a client with Config.TLS and Config.SASL reaches
// a broker that requires both, and one with the wrong password or without
// TLS does not.
func TestClientTLSAndSASL(t *testing.T) {
	ca := testpki.NewCA(t, "kafka test CA")
	leaf := ca.Server(t)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{leaf.TLS}, MinVersion: tls.VersionTLS12}),
		kfake.EnableSASL(), kfake.Superuser(SASLScramSHA256, "shoal", "s3cret"), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	dial := func(sasl *SASL, tc *tls.Config) error {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		c, err := NewClient(ctx, Config{Brokers: cluster.ListenAddrs(), SASL: sasl, TLS: tc}, testlog.New(t))
		if err == nil {
			c.Close()
		}
		return err
	}
	good := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	if err := dial(&SASL{Mechanism: SASLScramSHA256, User: "shoal", Password: "s3cret"}, good); err != nil {
		t.Fatalf("TLS and SASL: %v", err)
	}
	if err := dial(&SASL{Mechanism: SASLScramSHA256, User: "shoal", Password: "wrong"}, good); err == nil {
		t.Error("a wrong password was accepted")
	}
	if err := dial(&SASL{Mechanism: SASLScramSHA256, User: "shoal", Password: "s3cret"}, nil); err == nil {
		t.Error("a client without TLS reached a TLS broker")
	}
	if err := dial(&SASL{Mechanism: SASLScramSHA256, User: "shoal", Password: "s3cret"}, &tls.Config{MinVersion: tls.VersionTLS12}); err == nil {
		t.Error("a broker certificate from an unknown CA was accepted")
	}
	if err := (Config{Brokers: []string{"x:1"}, TLS: good, Dial: func(context.Context, string, string) (net.Conn, error) { return nil, nil }}).Validate(); err == nil {
		t.Error("TLS with a dialer of its own validated")
	}
}
