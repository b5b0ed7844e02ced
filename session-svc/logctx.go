package sessionsvc

import (
	"context"

	"github.com/shoal-mqtt/shoal/internal/obs"
)

// traceContext is the context a line about a record is logged with: the
// trace context of its traceparent header tp, so that the line carries the
// trace_id of the event it is about (docs/telemetry.md, "Logs").
func traceContext(tp []byte) context.Context {
	return obs.ContextWithTraceparent(context.Background(), tp)
}
