package kafka

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/propagation"
)

// kotelTracer returns franz-go's own OpenTelemetry tracer (kotel) for the
// producer (group "") or a consumer: a "<topic> publish" span per record
// produced, from Produce to the broker's acknowledgement, child of the
// record's Context or traceparent header, whose context it writes into the
// record's traceparent header; a "<topic> receive" span per record fetched,
// child of that header, whose context becomes the consumed Record's
// Context. The record key is an attribute when it is valid UTF-8
// (Shoal's keys are a tenant and a topic or client id).
func (c *Client) kotelTracer(group string) kgo.Hook {
	opts := []kotel.TracerOpt{
		kotel.TracerProvider(c.cfg.Telemetry.Tracer),
		kotel.TracerPropagator(propagation.TraceContext{}),
		kotel.ClientID(c.cfg.ClientID),
	}
	if group != "" {
		opts = append(opts, kotel.ConsumerGroup(group))
	}
	return kotel.NewTracer(opts...)
}
