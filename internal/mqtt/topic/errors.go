package topic

import "errors"

// MQTT 5.0 reason codes reported by [Error.ReasonCode].
const (
	// ReasonFilterInvalid is reason code 0x8F, Topic Filter invalid
	// (SUBACK, UNSUBACK, DISCONNECT).
	ReasonFilterInvalid byte = 0x8F
	// ReasonNameInvalid is reason code 0x90, Topic Name invalid
	// (PUBACK, PUBREC, DISCONNECT).
	ReasonNameInvalid byte = 0x90
)

// Error is the type of every validation error returned by this package.
//
// Each value is one of the Err* sentinels below, so callers may compare with
// errors.Is against a specific sentinel, or against the class sentinels
// [ErrInvalidName] and [ErrInvalidFilter], or extract the *Error with
// errors.As and call [Error.ReasonCode].
type Error struct {
	msg    string
	filter bool // true: a topic filter is invalid; false: a topic name is
}

// Error implements error.
func (e *Error) Error() string { return e.msg }

// Is reports whether e belongs to the class target: [ErrInvalidFilter] for
// filter errors (including shared-subscription errors), [ErrInvalidName] for
// name errors.
func (e *Error) Is(target error) bool {
	if e.filter {
		return target == ErrInvalidFilter
	}
	return target == ErrInvalidName
}

// ReasonCode returns the MQTT 5.0 reason code for e: [ReasonFilterInvalid]
// (0x8F) for topic filter and shared-subscription errors, [ReasonNameInvalid]
// (0x90) for topic name errors. MQTT 3.1.1 has no such codes: there a bad
// filter is failure 0x80 in SUBACK and a bad PUBLISH topic closes the
// connection.
func (e *Error) ReasonCode() byte {
	if e.filter {
		return ReasonFilterInvalid
	}
	return ReasonNameInvalid
}

// Class sentinels: errors.Is(err, ErrInvalidName) holds for every topic name
// error (reason code 0x90), errors.Is(err, ErrInvalidFilter) for every topic
// filter error (reason code 0x8F).
var (
	ErrInvalidName   = errors.New("topic: invalid topic name")
	ErrInvalidFilter = errors.New("topic: invalid topic filter")
)

// Topic name errors, returned by [ValidateName]; all map to reason code 0x90.
var (
	// ErrNameEmpty: a topic name must be at least one character long
	// [MQTT-4.7.3-1].
	ErrNameEmpty error = &Error{msg: "topic name: empty"}
	// ErrNameTooLong: a topic name is a UTF-8 string of at most 65535 bytes
	// [MQTT-4.7.3-3].
	ErrNameTooLong error = &Error{msg: "topic name: longer than 65535 bytes"}
	// ErrNameWildcard: a topic name must not contain '+' or '#'
	// [MQTT-3.3.2-2].
	ErrNameWildcard error = &Error{msg: "topic name: contains wildcard '+' or '#'"}
	// ErrNameNull: a topic name must not contain U+0000 [MQTT-4.7.3-2].
	ErrNameNull error = &Error{msg: "topic name: contains U+0000"}
	// ErrNameUTF8: a topic name must be well-formed UTF-8 [MQTT-1.5.3-1].
	ErrNameUTF8 error = &Error{msg: "topic name: ill-formed UTF-8"}
)

// Topic filter errors, returned by [ValidateFilter] and [ParseShared]; all
// map to reason code 0x8F.
var (
	// ErrFilterEmpty: a topic filter must be at least one character long
	// [MQTT-4.7.3-1].
	ErrFilterEmpty error = &Error{msg: "topic filter: empty", filter: true}
	// ErrFilterTooLong: a topic filter is a UTF-8 string of at most 65535
	// bytes [MQTT-4.7.3-3].
	ErrFilterTooLong error = &Error{msg: "topic filter: longer than 65535 bytes", filter: true}
	// ErrFilterNull: a topic filter must not contain U+0000 [MQTT-4.7.3-2].
	ErrFilterNull error = &Error{msg: "topic filter: contains U+0000", filter: true}
	// ErrFilterUTF8: a topic filter must be well-formed UTF-8
	// [MQTT-1.5.3-1].
	ErrFilterUTF8 error = &Error{msg: "topic filter: ill-formed UTF-8", filter: true}
	// ErrFilterSingleLevel: '+' must occupy an entire level [MQTT-4.7.1-2].
	ErrFilterSingleLevel error = &Error{msg: "topic filter: '+' must occupy an entire level", filter: true}
	// ErrFilterMultiLevel: '#' must occupy an entire level and be the last
	// one [MQTT-4.7.1-1].
	ErrFilterMultiLevel error = &Error{msg: "topic filter: '#' must be the whole last level", filter: true}
	// ErrShareGroup: the ShareName of $share/{ShareName}/{filter} must be at
	// least one character and must not contain '/', '+' or '#'
	// [MQTT-4.8.2-1], [MQTT-4.8.2-2].
	ErrShareGroup error = &Error{msg: "shared subscription: share name empty or contains '+' or '#'", filter: true}
	// ErrShareNoFilter: $share/{ShareName} must be followed by '/' and a
	// non-empty topic filter [MQTT-4.8.2-2].
	ErrShareNoFilter error = &Error{msg: "shared subscription: no topic filter after share name", filter: true}
)
