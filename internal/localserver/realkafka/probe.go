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
	return retryProbe(ctx, exited, func() error { return probe(ctx, brokers) })
}

// waitRegistered asks brokers for the cluster's metadata until it lists
// node id among the live brokers (registered with the quorum and not
// fenced), ctx ends or exited is closed.
func waitRegistered(ctx context.Context, brokers []string, id int32, exited <-chan struct{}) error {
	return retryProbe(ctx, exited, func() error { return probeRegistered(ctx, brokers, id) })
}

// waitReadyReplicated is waitReady with a probe topic replicated rf times,
// for a cluster of several nodes.
func waitReadyReplicated(ctx context.Context, brokers []string, rf int) error {
	return retryProbe(ctx, nil, func() error { return probeRF(ctx, brokers, int16(rf)) })
}

// retryProbe calls probe every probeInterval until it succeeds, ctx ends
// or exited (nil: never) is closed, and returns the last failure then.
func retryProbe(ctx context.Context, exited <-chan struct{}, probe func() error) error {
	for attempt := 1; ; attempt++ {
		err := probe()
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

func probeRegistered(ctx context.Context, brokers []string, id int32) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ClientID("realkafka-probe"), kgo.DisableClientMetrics())
	if err != nil {
		return fmt.Errorf("new client: %w", err)
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	for _, b := range md.Brokers {
		if b.NodeID == id {
			return nil
		}
	}
	return fmt.Errorf("node %d is not among the live brokers %v", id, md.Brokers.NodeIDs())
}

// probe creates ProbeTopic if it is missing and produces one record to it
// with acks=all: the broker is then ready to serve the tests (metadata,
// controller, topic creation, a partition leader, writes).
func probe(ctx context.Context, brokers []string) error { return probeRF(ctx, brokers, 1) }

// probeRF is probe with ProbeTopic created rf times replicated.
func probeRF(ctx context.Context, brokers []string, rf int16) error {
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
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, rf, nil, ProbeTopic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create %s: %w", ProbeTopic, err)
	}
	r := &kgo.Record{Topic: ProbeTopic, Value: []byte("ready")}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		return fmt.Errorf("produce to %s: %w", ProbeTopic, err)
	}
	return nil
}
