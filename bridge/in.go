package bridge

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// Authorizer says whether a mapping may publish on a topic: the ACL file,
// applied to a bridged-in publish as to a client named InClientPrefix and
// the mapping's name. Nil allows every topic of the mapping's tenant.
type Authorizer interface {
	AllowPublish(clientID string, topic []byte) bool
}

// DefaultInGroupPrefix begins the consumer group of each in mapping: the
// mapping's name follows.
const DefaultInGroupPrefix = "shoal-bridge-in-"

// HeaderDeadLetterCause names why a record was sent to its mapping's
// dead-letter topic (the record's own headers are kept, this one is
// added): invalid_topic or denied.
const HeaderDeadLetterCause = "shoal.dead_letter_cause"

// runIn publishes the records of one in mapping's Kafka topic until ctx
// ends: each as the Publish of a message of the mapping's tenant on the
// rendered topic, written to shoal.messages (acknowledged by every
// replica) before the poll's offsets are committed (kafka.Client.Relay).
// A publish reaches subscribers once, unless the bridge stops between the
// write and the commit: the poll is then read again and its publishes
// written again, at least once. Not in a transaction: subscribers read
// shoal.messages uncommitted, so a transaction would not keep them from a
// repeat, and in shoal all each of its markers would stall the router's
// local consumer (docs/bridge.md, "In: Kafka to MQTT").
//
// ready is called once its topics are there, before it joins its group.
func (b *Bridge) runIn(ctx context.Context, im *In, ready func()) error {
	if err := b.users().EnsureTopic(ctx, im.KafkaTopic); err != nil {
		return err
	}
	if im.DeadLetterTopic != "" {
		if err := b.ensure(ctx, im.DeadLetterTopic); err != nil {
			return err
		}
	}
	ready()
	group := DefaultInGroupPrefix + im.Name
	h := &inHandler{b: b, im: im, client: InClientPrefix + im.Name, tally: tally{},
		maxBytes: int(b.client.Catalogue().Messages.MaxMessageBytes)}
	return b.users().Relay(ctx, kafka.RelayConfig{
		Topic: im.KafkaTopic, Group: group, InstanceID: group + "-" + b.opts.InstanceID,
	}, h.handle)
}

// inHandler is one in mapping's handler and its scratch.
type inHandler struct {
	b      *Bridge
	im     *In
	client string // the publishes' client id
	buf    []byte
	tp     []byte // a span's traceparent, copied into its record
	tally  tally
	// recs and dead are a poll's records for shoal.messages and for the
	// dead-letter topic; maxBytes bounds a publish record.
	recs, dead []*kafka.Record
	maxBytes   int
}

func (h *inHandler) handle(ctx context.Context, bs []kafka.Batch) error {
	b, im := h.b, h.im
	now := b.clock()
	parts := b.client.Partitions(b.messages)
	defer b.met.flush(ctx, "in", h.tally)
	for _, batch := range bs {
		for _, r := range batch.Records {
			h.buf = im.MQTTTopic.Append(h.buf[:0], r.Key, r.Headers)
			if err := ValidTopic(string(h.buf)); err != nil {
				h.reject(ctx, r, causeBadTopic, "in mapping rendered no valid mqtt topic", err)
				continue
			}
			if b.opts.Authorizer != nil && !b.opts.Authorizer.AllowPublish(h.client, h.buf) {
				h.reject(ctx, r, causeDenied, "the acl denies the in mapping's topic", errors.New("not authorized"))
				continue
			}
			msg := &eventspb.Message{Topic: string(h.buf), Payload: r.Value, Qos: uint32(im.QoS)}
			if err := ReadHeaders(msg, r.Headers, now); err != nil {
				// What parsed is kept; the record is published.
				b.met.failed(ctx, im.Name, causeHeader)
				b.warnEvery(im.Name, "record header not carried into the message", "mapping", im.Name,
					"topic", im.KafkaTopic, "partition", r.Partition, "offset", r.Offset, "err", err)
			}
			env := &eventspb.Envelope{
				Tenant: im.Tenant, ClientId: h.client, Gateway: "bridge-" + b.opts.InstanceID,
				TimestampUs: now.UnixMicro(),
				MessageId:   &eventspb.MessageID{GatewayEpoch: b.epoch, Seq: b.seq.Add(1)},
				Event:       &eventspb.Envelope_Publish{Publish: &eventspb.Publish{Message: msg}},
			}
			if h.maxBytes > 0 && len(r.Value)+len(r.Key)+recordOverhead > h.maxBytes {
				h.reject(ctx, r, causeTooLarge, "record too large for shoal.messages", fmt.Errorf("%d bytes, shoal.messages takes %d", len(r.Value), h.maxBytes))
				continue
			}
			key := kafka.AppendKey(nil, im.Tenant, msg.Topic)
			rec := kafka.NewRecord(b.messages, key, kafka.PartitionForKey(key, parts), env)
			span, tp := b.hopSpan(ctx, spanIn, r.Header(kafka.HeaderTraceparent), r, im.Name, h.tp[:0])
			if span != nil {
				h.tp = tp
				rec.AddHeader(kafka.HeaderTraceparent, tp)
			} else {
				rec.AddTraceChild(r.Header(kafka.HeaderTraceparent))
			}
			h.recs = append(h.recs, rec)
			h.tally.add(im.Name, len(r.Value))
			if span != nil {
				span.SetAttributes(attribute.String("mqtt.topic", msg.Topic), attribute.String("shoal.tenant", im.Tenant))
				span.End()
			}
		}
	}
	// Durable before the offsets are committed; dead letters first, on
	// the mappings' cluster. Kafka's retriable errors are retried without
	// limit: an error here fails the poll, which is read again.
	err := errors.Join(b.users().ProduceSync(ctx, h.dead...), b.client.ProduceSync(ctx, h.recs...))
	clear(h.dead)
	clear(h.recs)
	h.dead, h.recs = h.dead[:0], h.recs[:0]
	if err != nil {
		return fmt.Errorf("in mapping %s: %w", im.Name, err)
	}
	return nil
}

// recordOverhead is what a publish record of shoal.messages adds to the
// Kafka record it comes from, at most: the envelope's fields, the MQTT
// properties its headers become, the record's own headers.
const recordOverhead = 64 << 10

// reject counts a record that cannot be published and sends it, as it
// came, to the mapping's dead-letter topic, or logs (once a minute) and
// skips it: never a stuck partition.
func (h *inHandler) reject(ctx context.Context, r *kafka.Record, cause, msg string, err error) {
	b, im := h.b, h.im
	b.met.skipped(ctx, im.Name, cause)
	if im.DeadLetterTopic == "" {
		b.warnEvery(im.Name, msg+"; record skipped", "mapping", im.Name, "topic", im.KafkaTopic,
			"partition", r.Partition, "offset", r.Offset, "mqtt_topic", string(h.buf), "err", err)
		return
	}
	dl := &kafka.Record{Topic: im.DeadLetterTopic, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp,
		Headers: append(append([]kafka.Header(nil), r.Headers...), kafka.Header{Key: HeaderDeadLetterCause, Value: []byte(cause)})}
	h.dead = append(h.dead, dl)
}
