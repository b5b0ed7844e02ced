package routersvc

import (
	"context"

	"github.com/shoal-mqtt/shoal/internal/obs"
	"github.com/shoal-mqtt/shoal/kafka"
)

// recordContext is the context a line about rec is logged with: the trace
// context of its traceparent header, so that the line carries the trace_id
// of the message it is about (docs/telemetry.md, "Logs").
func recordContext(rec *kafka.Record) context.Context {
	return obs.ContextWithTraceparent(context.Background(), rec.Header(kafka.HeaderTraceparent))
}
