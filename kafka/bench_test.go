package kafka

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// benchEnvelope is a publish of a 64-byte payload, as the gateway writes it.
func benchEnvelope() *eventspb.Envelope {
	return &eventspb.Envelope{
		SchemaVersion: 1, Tenant: "acme", ClientId: "acme-sensor-0001", Gateway: "gw-0",
		TimestampUs: time.Now().UnixMicro(),
		MessageId:   &eventspb.MessageID{GatewayEpoch: 0x1234_5678_9abc_def0, Seq: 1},
		Event: &eventspb.Envelope_Publish{Publish: &eventspb.Publish{
			Message:    &eventspb.Message{Topic: "acme/sensors/0001/temperature", Payload: bytes.Repeat([]byte{'x'}, 64), Qos: 1},
			Connection: 7,
		}},
	}
}

// BenchmarkProduceConsume measures one hop through the embedded backbone
// (kfake with a data directory, in this process): b.N publishes of a
// 64-byte payload produced asynchronously, keyed over 256 keys into the 16
// partitions of shoal.messages, and consumed and decoded by one Consume.
// allocs/op and cpu-µs/record count the whole process: producer, broker
// and consumer.
func BenchmarkProduceConsume(b *testing.B) {
	for _, linger := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond} {
		b.Run("linger="+linger.String(), func(b *testing.B) {
			benchProduceConsume(b, Config{Linger: linger})
		})
	}
}

func benchProduceConsume(b *testing.B, cfg Config) {
	e := startEmbedded(b, b.TempDir())
	c := newTestClient(b, e, cfg)
	env := benchEnvelope()
	keys := make([][]byte, 256)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "acme/sensors/%04d/temperature", i)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var consumed atomic.Int64
	all := make(chan struct{})
	want := int64(b.N)
	cerr := make(chan error, 1)
	go func() {
		var dec eventspb.Envelope
		cerr <- c.Consume(ctx, ConsumeConfig{Topic: TopicMessages, Partitions: allPartitions(16)},
			func(_ context.Context, bt Batch) error {
				for _, r := range bt.Records {
					if err := DecodeEnvelope(r, &dec); err != nil {
						return err
					}
				}
				if consumed.Add(int64(len(bt.Records))) == want {
					close(all)
				}
				return nil
			})
	}()
	var failed atomic.Int64
	done := func(_ *Record, err error) {
		if err != nil {
			failed.Add(1)
		}
	}

	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := range b.N {
		c.Produce(ctx, NewRecord(TopicMessages, keys[i%len(keys)], PartitionByKey, env), done)
	}
	select {
	case <-all:
	case err := <-cerr:
		b.Fatalf("Consume returned early: %v", err)
	case <-ctx.Done():
		b.Fatalf("consumed %d of %d", consumed.Load(), b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	if cpu := processCPU() - cpu0; cpu > 0 {
		// CPU per record is steadier than records/s on a shared machine.
		b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/record")
	}
	if failed.Load() > 0 {
		b.Fatalf("%d records failed", failed.Load())
	}
	cancel()
	if err := <-cerr; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkProduceSync measures the latency of producing one record and
// waiting for its acknowledgement, one at a time (what a QoS 1 publisher
// waits for before its PUBACK).
func BenchmarkProduceSync(b *testing.B) {
	for _, linger := range []time.Duration{0, time.Millisecond} {
		b.Run("linger="+linger.String(), func(b *testing.B) {
			e := startEmbedded(b, b.TempDir())
			c := newTestClient(b, e, Config{Linger: linger})
			env := benchEnvelope()
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := c.ProduceSync(ctx, NewRecord(TopicMessages, []byte("acme/k"), PartitionByKey, env)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
