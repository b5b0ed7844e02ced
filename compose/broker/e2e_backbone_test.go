package broker_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
	"github.com/shoal-mqtt/shoal/kafka"
)

// TestBackboneOnlyForShoal: `shoal all` on defaults opens no Kafka port.
// Its log is reachable only through the Unix socket in the data
// directory (mode 0600) with the credentials kept there (mode 0600), as
// Shoal's own tools reach it; a client that has the socket but not the
// credentials reads nothing.
func TestBackboneOnlyForShoal(t *testing.T) {
	var dataDir string
	b := startBroker(t, func(c *config.Config) { dataDir = c.DataDir })
	if got := b.Addr("kafka"); got != nil {
		t.Errorf("the broker reports a kafka listener at %v", got)
	}
	pub, _ := dialV5(t, mqttAddr(b), "acme-pub")
	pub.publish(t, &paho.Publish{Topic: "plant/1", QoS: 1, Payload: []byte("only for acme")})

	kdir := filepath.Join(dataDir, "kafka")
	for _, name := range []string{kafka.SocketName, kafka.CredentialsName} {
		fi, err := os.Stat(filepath.Join(kdir, name))
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o600 {
			t.Errorf("%s has mode %v, want 0600", name, perm)
		}
	}
	tool, cfg := attachLog(t, kdir)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	parts := make([]int32, 4) // brokertest's kafka.partitions
	for i := range parts {
		parts[i] = int32(i)
	}
	found := errors.New("found")
	err := tool.Consume(ctx, kafka.ConsumeConfig{Topic: kafka.TopicMessages, Partitions: parts}, func(_ context.Context, bt kafka.Batch) error {
		for _, r := range bt.Records {
			if tenant, topic, err := kafka.SplitKey(r.Key); err == nil && string(tenant) == "acme" && string(topic) == "plant/1" {
				return found
			}
		}
		return nil
	})
	if !errors.Is(err, found) {
		t.Fatalf("the attached tool did not read the message: %v", err)
	}

	s := *cfg.SASL
	s.Password = "guess"
	cfg.SASL = &s
	short, cancelShort := context.WithTimeout(context.Background(), wait/5)
	defer cancelShort()
	if c, err := kafka.NewClient(short, cfg, testlog.New(t)); err == nil {
		c.Close()
		t.Fatal("a client with the socket and a wrong password reached the log")
	}
}
