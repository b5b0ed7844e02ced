package broker_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// TestHandoffKeepsTheLog: with the local delivery path the router hands
// its deliveries to the gateway before it produces them, without it every
// delivery comes from the log; either way the subscriber gets every
// message in order, and the log holds exactly one delivery record per
// message, marked (kafka.HeaderHandoff) only when it was handed off.
func TestHandoffKeepsTheLog(t *testing.T) {
	for _, local := range []bool{true, false} {
		t.Run(fmt.Sprintf("local_delivery=%t", local), func(t *testing.T) {
			var dataDir string
			b := startBroker(t, func(c *config.Config) {
				c.Kafka.LocalDelivery = local
				dataDir = c.DataDir
			})
			sub, _ := dialV5(t, mqttAddr(b), "ho-sub")
			sub.subscribe(t, paho.SubscribeOptions{Topic: "ho/#", QoS: 1})
			pub, _ := dialV5(t, mqttAddr(b), "ho-pub")
			const n = 200
			for i := range n {
				pub.publish(t, &paho.Publish{Topic: "ho/t", QoS: byte(i % 2), Payload: fmt.Appendf(nil, "%d", i)})
			}
			for i := range n {
				m := sub.expect(t)
				if want := fmt.Sprint(i); string(m.Payload) != want || int(m.QoS) != i%2 {
					t.Fatalf("message %d: got %q at QoS %d, want %q at QoS %d", i, m.Payload, m.QoS, want, i%2)
				}
			}

			recs := loggedRecords(t, dataDir, kafka.TopicDeliveries, kafka.HeaderHandoff, "ho/t", n)
			early := 0
			for i, r := range recs {
				mark := r.mark
				switch {
				case !local && mark != nil:
					t.Fatalf("delivery %d carries a hand-off mark %x without the local delivery path", i, mark)
				case local && len(mark) != 9:
					t.Fatalf("delivery %d: hand-off mark %x, want one of 9 bytes", i, mark)
				case local && mark[8] == 1:
					early++
				}
				if want := fmt.Sprint(i); r.payload != want {
					t.Fatalf("delivery record %d carries %q, want %q: the log's order", i, r.payload, want)
				}
			}
			if local && early == 0 {
				t.Fatal("no delivery was handed off")
			}
			t.Logf("%d of %d deliveries handed off", early, n)
		})
	}
}

// loggedRecord is a record of the log that carries a message: its
// payload and the value of the header the caller looks for.
type loggedRecord struct {
	payload string
	mark    []byte
}

// loggedRecords reads logTopic (shoal.deliveries or shoal.messages) of
// the running `shoal all` whose data directory is dataDir, through its
// socket, and returns the records whose message (a delivery's or a
// publish's) is on topic, with their header named header, in offset order
// within a partition: want of them, failing if there are fewer, or more
// within a second after the last.
func loggedRecords(t *testing.T, dataDir, logTopic, header, topic string, want int) []loggedRecord {
	t.Helper()
	tool, _ := attachLog(t, filepath.Join(dataDir, "kafka"))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	parts := make([]int32, tool.Partitions(logTopic))
	for i := range parts {
		parts[i] = int32(i)
	}
	var mu sync.Mutex
	var got []loggedRecord
	var once sync.Once
	err := tool.Consume(ctx, kafka.ConsumeConfig{Topic: logTopic, Partitions: parts}, func(_ context.Context, b kafka.Batch) error {
		for _, r := range b.Records {
			var env eventspb.Envelope
			if err := kafka.DecodeEnvelope(r, &env); err != nil {
				return err
			}
			m := env.GetDelivery().GetMessage()
			if m == nil {
				m = env.GetPublish().GetMessage()
			}
			if m != nil && m.Topic == topic {
				mu.Lock()
				got = append(got, loggedRecord{string(m.Payload), append([]byte(nil), r.Header(header)...)})
				if len(got) == want {
					once.Do(func() { time.AfterFunc(time.Second, cancel) })
				}
				mu.Unlock()
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != want {
		t.Fatalf("%s holds %d of the records looked for, want %d", logTopic, len(got), want)
	}
	for i := range got {
		if len(got[i].mark) == 0 {
			got[i].mark = nil
		}
	}
	return got
}

// attachLog returns a client of the embedded log whose kafka directory is
// kdir, attached as Shoal's own tools attach (through the socket, with the
// credentials file), and the configuration it was made from; it is closed
// when the test ends.
func attachLog(t *testing.T, kdir string) (*kafka.Client, kafka.Config) {
	t.Helper()
	cfg, err := kafka.AttachEmbedded(kdir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	tool, err := kafka.NewClient(ctx, cfg, testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tool.Close)
	return tool, cfg
}
