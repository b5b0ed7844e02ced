package realkafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ProbeTopic is the topic the readiness probe creates (one partition) and
// writes to.
const ProbeTopic = "realkafka.probe"

// Bounds of one probe and the pause between probes.
const (
	probeTimeout  = 5 * time.Second
	probeInterval = 250 * time.Millisecond
)

// waitReady probes brokers until one probe succeeds, ctx ends or exited is
// closed (the broker died).
func waitReady(ctx context.Context, brokers []string, exited <-chan struct{}) error {
	for attempt := 1; ; attempt++ {
		err := probe(ctx, brokers)
		if err == nil {
			return nil
		}
		t := time.NewTimer(probeInterval)
		select {
		case <-exited:
			t.Stop()
			return fmt.Errorf("probe %d: %w", attempt, err)
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("probe %d: %w", attempt, errors.Join(ctx.Err(), err))
		case <-t.C:
		}
	}
}

// probe creates ProbeTopic if it is missing and produces one record to it
// with acks=all: the broker is then ready to serve the tests (metadata,
// controller, topic creation, a partition leader, writes).
func probe(ctx context.Context, brokers []string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ClientID("realkafka-probe"),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableClientMetrics(),
	)
	if err != nil {
		return fmt.Errorf("new client: %w", err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, ProbeTopic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create %s: %w", ProbeTopic, err)
	}
	r := &kgo.Record{Topic: ProbeTopic, Value: []byte("ready")}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		return fmt.Errorf("produce to %s: %w", ProbeTopic, err)
	}
	return nil
}
