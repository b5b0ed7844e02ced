package kafka

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// FormatMessageID writes a message identifier as people and tools see it:
// the gateway epoch in 16 hexadecimal digits, "-", the sequence number in
// decimal ("0f3a9c0d11e5b7a2-17"). `shoal replay` prints it, `shoal trace`
// takes it, and audit.expose_message_id sends it to 5.0 subscribers; "" for
// nil.
func FormatMessageID(id *eventspb.MessageID) string {
	if id == nil {
		return ""
	}
	return string(AppendMessageID(make([]byte, 0, 36), id.GatewayEpoch, id.Seq))
}

// AppendMessageID appends FormatMessageID's text of (epoch, seq) to dst.
func AppendMessageID(dst []byte, epoch, seq uint64) []byte {
	const hex = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = hex[epoch&0xf]
		epoch >>= 4
	}
	dst = append(dst, b[:]...)
	dst = append(dst, '-')
	return strconv.AppendUint(dst, seq, 10)
}

// ParseMessageID reads FormatMessageID's text back.
func ParseMessageID(s string) (*eventspb.MessageID, error) {
	epoch, seq, ok := strings.Cut(s, "-")
	if !ok || len(epoch) != 16 {
		return nil, fmt.Errorf("message id %q: %w", s, errMessageIDSyntax)
	}
	e, err := strconv.ParseUint(epoch, 16, 64)
	if err != nil {
		return nil, fmt.Errorf("message id %q: %w", s, errMessageIDSyntax)
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("message id %q: %w", s, errMessageIDSyntax)
	}
	return &eventspb.MessageID{GatewayEpoch: e, Seq: n}, nil
}

var errMessageIDSyntax = errors.New("want 16 hexadecimal digits, '-', a decimal sequence number (as shoal replay prints them)")
