package packet

import "strconv"

// Type is an MQTT control packet type, the high nibble of the first byte.
type Type byte

// The control packet types. Type 0 is reserved and AUTH exists only in 5.0.
const (
	CONNECT     Type = 1
	CONNACK     Type = 2
	PUBLISH     Type = 3
	PUBACK      Type = 4
	PUBREC      Type = 5
	PUBREL      Type = 6
	PUBCOMP     Type = 7
	SUBSCRIBE   Type = 8
	SUBACK      Type = 9
	UNSUBSCRIBE Type = 10
	UNSUBACK    Type = 11
	PINGREQ     Type = 12
	PINGRESP    Type = 13
	DISCONNECT  Type = 14
	AUTH        Type = 15
)

var typeNames = [16]string{"RESERVED", "CONNECT", "CONNACK", "PUBLISH", "PUBACK", "PUBREC", "PUBREL",
	"PUBCOMP", "SUBSCRIBE", "SUBACK", "UNSUBSCRIBE", "UNSUBACK", "PINGREQ", "PINGRESP", "DISCONNECT", "AUTH"}

func (t Type) String() string {
	if t < 16 {
		return typeNames[t]
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// Version is the protocol level of the CONNECT packet.
type Version byte

// Protocol levels. V31 (protocol name "MQIsdp") is accepted and handled with
// the 3.1.1 rules.
const (
	V31  Version = 3
	V311 Version = 4
	V5   Version = 5
)

func (v Version) String() string {
	switch v {
	case V31:
		return "3.1"
	case V311:
		return "3.1.1"
	case V5:
		return "5.0"
	}
	return "Version(" + strconv.Itoa(int(v)) + ")"
}

// QoS is a quality-of-service level, 0, 1 or 2.
type QoS = byte

// ReasonCode is an MQTT 5.0 reason code. Values below 0x80 report success,
// values from 0x80 report failure.
type ReasonCode byte

// The MQTT 5.0 reason codes (spec §2.4). Some values have several names,
// one per packet that uses them.
const (
	CodeSuccess                             ReasonCode = 0x00
	CodeNormalDisconnection                 ReasonCode = 0x00
	CodeGrantedQoS0                         ReasonCode = 0x00
	CodeGrantedQoS1                         ReasonCode = 0x01
	CodeGrantedQoS2                         ReasonCode = 0x02
	CodeDisconnectWithWill                  ReasonCode = 0x04
	CodeNoMatchingSubscribers               ReasonCode = 0x10
	CodeNoSubscriptionExisted               ReasonCode = 0x11
	CodeContinueAuthentication              ReasonCode = 0x18
	CodeReAuthenticate                      ReasonCode = 0x19
	CodeUnspecifiedError                    ReasonCode = 0x80
	CodeMalformedPacket                     ReasonCode = 0x81
	CodeProtocolError                       ReasonCode = 0x82
	CodeImplementationSpecificError         ReasonCode = 0x83
	CodeUnsupportedProtocolVersion          ReasonCode = 0x84
	CodeClientIdentifierNotValid            ReasonCode = 0x85
	CodeBadUserNameOrPassword               ReasonCode = 0x86
	CodeNotAuthorized                       ReasonCode = 0x87
	CodeServerUnavailable                   ReasonCode = 0x88
	CodeServerBusy                          ReasonCode = 0x89
	CodeBanned                              ReasonCode = 0x8A
	CodeServerShuttingDown                  ReasonCode = 0x8B
	CodeBadAuthenticationMethod             ReasonCode = 0x8C
	CodeKeepAliveTimeout                    ReasonCode = 0x8D
	CodeSessionTakenOver                    ReasonCode = 0x8E
	CodeTopicFilterInvalid                  ReasonCode = 0x8F
	CodeTopicNameInvalid                    ReasonCode = 0x90
	CodePacketIdentifierInUse               ReasonCode = 0x91
	CodePacketIdentifierNotFound            ReasonCode = 0x92
	CodeReceiveMaximumExceeded              ReasonCode = 0x93
	CodeTopicAliasInvalid                   ReasonCode = 0x94
	CodePacketTooLarge                      ReasonCode = 0x95
	CodeMessageRateTooHigh                  ReasonCode = 0x96
	CodeQuotaExceeded                       ReasonCode = 0x97
	CodeAdministrativeAction                ReasonCode = 0x98
	CodePayloadFormatInvalid                ReasonCode = 0x99
	CodeRetainNotSupported                  ReasonCode = 0x9A
	CodeQoSNotSupported                     ReasonCode = 0x9B
	CodeUseAnotherServer                    ReasonCode = 0x9C
	CodeServerMoved                         ReasonCode = 0x9D
	CodeSharedSubscriptionsNotSupported     ReasonCode = 0x9E
	CodeConnectionRateExceeded              ReasonCode = 0x9F
	CodeMaximumConnectTime                  ReasonCode = 0xA0
	CodeSubscriptionIdentifiersNotSupported ReasonCode = 0xA1
	CodeWildcardSubscriptionsNotSupported   ReasonCode = 0xA2
)

var codeNames = map[ReasonCode]string{
	0x00: "success", 0x01: "granted QoS 1", 0x02: "granted QoS 2", 0x04: "disconnect with will message",
	0x10: "no matching subscribers", 0x11: "no subscription existed", 0x18: "continue authentication",
	0x19: "re-authenticate", 0x80: "unspecified error", 0x81: "malformed packet", 0x82: "protocol error",
	0x83: "implementation specific error", 0x84: "unsupported protocol version",
	0x85: "client identifier not valid", 0x86: "bad user name or password", 0x87: "not authorized",
	0x88: "server unavailable", 0x89: "server busy", 0x8A: "banned", 0x8B: "server shutting down",
	0x8C: "bad authentication method", 0x8D: "keep alive timeout", 0x8E: "session taken over",
	0x8F: "topic filter invalid", 0x90: "topic name invalid", 0x91: "packet identifier in use",
	0x92: "packet identifier not found", 0x93: "receive maximum exceeded", 0x94: "topic alias invalid",
	0x95: "packet too large", 0x96: "message rate too high", 0x97: "quota exceeded",
	0x98: "administrative action", 0x99: "payload format invalid", 0x9A: "retain not supported",
	0x9B: "QoS not supported", 0x9C: "use another server", 0x9D: "server moved",
	0x9E: "shared subscriptions not supported", 0x9F: "connection rate exceeded",
	0xA0: "maximum connect time", 0xA1: "subscription identifiers not supported",
	0xA2: "wildcard subscriptions not supported",
}

func (c ReasonCode) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return "reason code 0x" + strconv.FormatUint(uint64(c), 16)
}

// IsError reports whether c reports a failure (c ≥ 0x80).
func (c ReasonCode) IsError() bool { return c >= 0x80 }

// codeSet is a set of reason codes, one bit per value.
type codeSet [4]uint64

func newCodeSet(codes ...ReasonCode) codeSet {
	var s codeSet
	for _, c := range codes {
		s[c>>6] |= 1 << (c & 63)
	}
	return s
}

func (s *codeSet) has(c ReasonCode) bool { return s[c>>6]&(1<<(c&63)) != 0 }

// The reason codes each packet type may carry (spec §2.4 and each packet's
// variable header section).
var (
	pubackCodes  = newCodeSet(0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99)
	pubrelCodes  = newCodeSet(0x00, 0x92)
	connackCodes = newCodeSet(0x00, 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8A,
		0x8C, 0x90, 0x95, 0x97, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9F)
	subackCodes     = newCodeSet(0x00, 0x01, 0x02, 0x80, 0x83, 0x87, 0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2)
	unsubackCodes   = newCodeSet(0x00, 0x11, 0x80, 0x83, 0x87, 0x8F, 0x91)
	disconnectCodes = newCodeSet(0x00, 0x04, 0x80, 0x81, 0x82, 0x83, 0x87, 0x89, 0x8B, 0x8D, 0x8E, 0x8F,
		0x90, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9E, 0x9F, 0xA0, 0xA1, 0xA2)
	authCodes = newCodeSet(0x00, 0x18, 0x19)
)
