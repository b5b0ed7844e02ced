package packet

import (
	"errors"
	"strconv"
)

// Error is a decode error with the MQTT 5.0 reason code the specification
// requires for it.
type Error struct {
	Code ReasonCode // CodeMalformedPacket, CodeProtocolError, CodePacketTooLarge, …
	Msg  string     // what was wrong, starting with the packet type
}

func (e *Error) Error() string {
	return e.Msg + " (" + e.Code.String() + ", 0x" + strconv.FormatUint(uint64(e.Code), 16) + ")"
}

func errorf(code ReasonCode, msg string) *Error { return &Error{Code: code, Msg: msg} }

// CodeOf returns the reason code carried by err or anything it wraps, and
// CodeUnspecifiedError when it carries none.
func CodeOf(err error) ReasonCode {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeUnspecifiedError
}
