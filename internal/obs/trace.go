package obs

import (
	"encoding/hex"

	"go.opentelemetry.io/otel/trace"

	"github.com/shoal-mqtt/shoal/internal/tracectx"
)

// SpanContext returns the remote span context of a W3C traceparent (a
// record's header, a client's user property), the invalid one when tp is
// not a valid traceparent.
func SpanContext(tp []byte) trace.SpanContext {
	if !tracectx.Valid(tp) {
		return trace.SpanContext{}
	}
	var tid trace.TraceID
	var sid trace.SpanID
	var flags [1]byte
	if _, err := hex.Decode(tid[:], tp[3:35]); err != nil {
		return trace.SpanContext{}
	}
	if _, err := hex.Decode(sid[:], tp[36:52]); err != nil {
		return trace.SpanContext{}
	}
	if _, err := hex.Decode(flags[:], tp[53:55]); err != nil {
		return trace.SpanContext{}
	}
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]) & trace.FlagsSampled, Remote: true,
	})
}

// AppendTraceparent appends the W3C traceparent of sc (version 00) to dst;
// nothing when sc is not valid.
func AppendTraceparent(dst []byte, sc trace.SpanContext) []byte {
	if !sc.IsValid() {
		return dst
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	dst = append(dst, "00-"...)
	dst = hex.AppendEncode(dst, tid[:])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, sid[:])
	dst = append(dst, '-')
	return hex.AppendEncode(dst, []byte{byte(sc.TraceFlags())})
}
