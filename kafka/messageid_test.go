package kafka

import (
	"testing"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

func TestMessageIDText(t *testing.T) {
	for _, id := range []*eventspb.MessageID{{}, {GatewayEpoch: 0x0f3a9c0d11e5b7a2, Seq: 17}, {GatewayEpoch: ^uint64(0), Seq: ^uint64(0)}} {
		s := FormatMessageID(id)
		back, err := ParseMessageID(s)
		if err != nil || back.GatewayEpoch != id.GatewayEpoch || back.Seq != id.Seq {
			t.Errorf("%v → %q → %v, %v", id, s, back, err)
		}
	}
	if got := FormatMessageID(&eventspb.MessageID{GatewayEpoch: 0x0f3a9c0d11e5b7a2, Seq: 17}); got != "0f3a9c0d11e5b7a2-17" {
		t.Errorf("FormatMessageID = %q", got)
	}
	if FormatMessageID(nil) != "" {
		t.Error("nil id formats as text")
	}
	for _, bad := range []string{"", "17", "0f3a9c0d11e5b7a2", "0f3a9c0d11e5b7a-17", "0f3a9c0d11e5b7a2-x", "zz3a9c0d11e5b7a2-1", "0f3a9c0d11e5b7a2--1"} {
		if _, err := ParseMessageID(bad); err == nil {
			t.Errorf("ParseMessageID(%q) accepted", bad)
		}
	}
}
