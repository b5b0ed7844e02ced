package packet

import (
	"bytes"
	"fmt"
	"testing"

	paho5 "github.com/eclipse/paho.golang/packets"
	paho3 "github.com/eclipse/paho.mqtt.golang/packets"
)

// Differential tests against Eclipse Paho's codecs: paho.golang's packets
// (MQTT 5.0) and paho.mqtt.golang's packets (MQTT 3.1.1). Every valid case
// is decoded by Paho and compared field by field with ours; then Paho
// re-encodes what it decoded and our decoder must read back the case's
// packet. Paho's quirks are listed here, per case, with the reason.

// pahoDecodeSkip: valid cases Paho cannot decode.
var pahoDecodeSkip = map[string]string{
	// paho.golang Disconnect.Unpack always reads a reason code byte, but
	// §3.14.2.1 allows a DISCONNECT with remaining length 0 (reason code
	// 0x00, no properties).
	"5.0/DISCONNECT no reason code": "paho.golang reads a reason code from an empty DISCONNECT",
}

// pahoEncodeSkip: valid cases Paho decodes but cannot re-encode faithfully.
var pahoEncodeSkip = map[string]string{
	// paho.golang encodes an AUTH without properties as f0 02 00 00: an
	// empty property list without an Authentication Method, which
	// §3.15.2.2.2 makes a Protocol Error (only the empty form f0 00 may
	// omit the method).
	"5.0/AUTH no reason code": "paho.golang writes AUTH 0x00 with an empty property list and no method",
	// Connect.Buffers packs the will properties with Properties.Pack(CONNECT),
	// which writes Payload Format, Message Expiry, Content Type, Response
	// Topic and Correlation Data only for PUBLISH: they are dropped.
	"5.0/CONNECT will with every will property, user name, password": "paho.golang drops will properties",
	// Properties holds one SubscriptionIdentifier (*int): of several, the
	// last one read is kept and re-encoded.
	"5.0/PUBLISH QoS 2 dup retain every property": "paho.golang keeps one subscription identifier",
	// Properties.Pack writes Correlation Data only when it is non-empty.
	"5.0/PUBLISH payload format 0 and empty correlation data": "paho.golang drops empty correlation data",
}

func TestPahoDifferential(t *testing.T) {
	for _, c := range cases {
		if !c.valid() {
			continue
		}
		t.Run(c.id(), func(t *testing.T) {
			if why, ok := pahoDecodeSkip[c.id()]; ok {
				t.Skip(why)
			}
			var enc []byte
			var err error
			if c.v == V5 {
				enc, err = paho5RoundTrip(c)
			} else {
				enc, err = paho3RoundTrip(c)
			}
			if err != nil {
				t.Fatal(err)
			}
			if why, ok := pahoEncodeSkip[c.id()]; ok {
				t.Log("encode by Paho skipped:", why)
				return
			}
			got, err := decodeFrame(enc, c.v, 0)
			if err != nil {
				t.Fatalf("decode of Paho's encoding % x: %v", enc, err)
			}
			if d := packetDiff(c.want, got); d != "" {
				t.Fatalf("decode of Paho's encoding % x differs (-want +got):\n%s", enc, d)
			}
		})
	}
}

// diffs collects field differences between our packet and Paho's.
type diffs []string

func (d *diffs) eq(field string, ours, theirs any) {
	if fmt.Sprint(ours) != fmt.Sprint(theirs) {
		*d = append(*d, fmt.Sprintf("%s: ours %v, Paho %v", field, ours, theirs))
	}
}

func (d *diffs) bytes(field string, ours, theirs []byte) {
	if !bytes.Equal(ours, theirs) {
		*d = append(*d, fmt.Sprintf("%s: ours %q, Paho %q", field, ours, theirs))
	}
}

func (d *diffs) err() error {
	if len(*d) == 0 {
		return nil
	}
	return fmt.Errorf("differences from Paho:\n%v", *d)
}

// paho5RoundTrip decodes c.raw with paho.golang, compares the result with
// c.want, and returns Paho's encoding of what it decoded.
func paho5RoundTrip(c tcase) ([]byte, error) {
	cp, err := paho5.ReadPacket(bytes.NewReader(c.raw))
	if err != nil {
		return nil, fmt.Errorf("paho.golang ReadPacket: %w", err)
	}
	var d diffs
	d.eq("type", byte(c.want.Type()), cp.Type)
	switch w := c.want.(type) {
	case *Connect:
		p, ok := cp.Content.(*paho5.Connect)
		if !ok {
			return nil, wrongType(cp.Content)
		}
		d.eq("protocol name", string(w.ProtocolName), p.ProtocolName)
		d.eq("protocol version", byte(w.Version), p.ProtocolVersion)
		d.eq("clean start", w.CleanStart, p.CleanStart)
		d.eq("keep alive", w.KeepAlive, p.KeepAlive)
		d.eq("client id", string(w.ClientID), p.ClientID)
		d.eq("will flag", w.WillFlag, p.WillFlag)
		d.eq("will QoS", w.WillQoS, p.WillQOS)
		d.eq("will retain", w.WillRetain, p.WillRetain)
		d.eq("will topic", string(w.WillTopic), p.WillTopic)
		d.bytes("will payload", w.WillPayload, p.WillMessage)
		d.eq("user name flag", w.UsernameFlag, p.UsernameFlag)
		d.eq("user name", string(w.Username), p.Username)
		d.eq("password flag", w.PasswordFlag, p.PasswordFlag)
		d.bytes("password", w.Password, p.Password)
		props5(&d, "properties", &w.Props, p.Properties)
		if w.WillFlag {
			props5(&d, "will properties", &w.WillProps, p.WillProperties)
		}
	case *Connack:
		p, ok := cp.Content.(*paho5.Connack)
		if !ok {
			return nil, wrongType(cp.Content)
		}
		d.eq("session present", w.SessionPresent, p.SessionPresent)
		d.eq("reason code", byte(w.Code), p.ReasonCode)
		props5(&d, "properties", &w.Props, p.Properties)
	case *Publish:
		p, ok := cp.Content.(*paho5.Publish)
		if !ok {
			return nil, wrongType(cp.Content)
		}
		d.eq("dup", w.Dup, p.Duplicate)
		d.eq("QoS", w.QoS, p.QoS)
		d.eq("retain", w.Retain, p.Retain)
		d.eq("topic", string(w.Topic), p.Topic)
		d.eq("packet id", w.PacketID, p.PacketID)
		d.bytes("payload", w.Payload, p.Payload)
		props5(&d, "properties", &w.Props, p.Properties)
	case *Ack:
		var id uint16
		var code byte
		var props *paho5.Properties
		switch p := cp.Content.(type) {
		case *paho5.Puback:
			id, code, props = p.PacketID, p.ReasonCode, p.Properties
		case *paho5.Pubrec:
			id, code, props = p.PacketID, p.ReasonCode, p.Properties
		case *paho5.Pubrel:
			id, code, props = p.PacketID, p.ReasonCode, p.Properties
		case *paho5.Pubcomp:
			id, code, props = p.PacketID, p.ReasonCode, p.Properties
		default:
			return nil, fmt.Errorf("paho.golang decoded a %T", cp.Content)
		}
		d.eq("packet id", w.PacketID, id)
		d.eq("reason code", byte(w.Code), code)
		props5(&d, "properties", &w.Props, props)
	case *Subscribe:
		p, ok := cp.Content.(*paho5.Subscribe)
		if !ok {
			return nil, wrongType(cp.Content)
		}
		d.eq("packet id", w.PacketID, p.PacketID)
		d.eq("filters", len(w.Filters), len(p.Subscriptions))
		for i := range min(len(w.Filters), len(p.Subscriptions)) {
			f, s := w.Filters[i], p.Subscriptions[i]
			d.eq(fmt.Sprintf("filter %d", i), string(f.Filter), s.Topic)
			d.eq(fmt.Sprintf("filter %d QoS", i), f.QoS, s.QoS)
			d.eq(fmt.Sprintf("filter %d no local", i), f.NoLocal, s.NoLocal)
			d.eq(fmt.Sprintf("filter %d retain as published", i), f.RetainAsPublished, s.RetainAsPublished)
			d.eq(fmt.Sprintf("filter %d retain handling", i), f.RetainHandling, s.RetainHandling)
		}
		props5(&d, "properties", &w.Props, p.Properties)
	case *Suback:
		p, ok := cp.Content.(*paho5.Suback)
		if !ok {
			return nil, wrongType(cp.Content)
		}
		d.eq("packet id", w.PacketID, p.PacketID)
		d.bytes("reason codes", codeBytes(w.Codes), p.Reasons)
		props5(&d, "properties", &w.Props, p.Properties)
	case *Unsubscribe:
		p, ok := cp.Content.(*paho5.Unsubscribe)
		if !ok {
			return nil, wrongType(cp.Content)
		}
		d.eq("packet id", w.PacketID, p.PacketID)
		d.eq("filters", filterStrings(w.Filters), p.Topics)
		props5(&d, "properties", &w.Props, p.Properties)
	case *Unsuback:
		p, ok := cp.Content.(*paho5.Unsuback)
		if !ok {
			return nil, wrongType(cp.Content)
		}
		d.eq("packet id", w.PacketID, p.PacketID)
		d.bytes("reason codes", codeBytes(w.Codes), p.Reasons)
		props5(&d, "properties", &w.Props, p.Properties)
	case *Pingreq, *Pingresp:
	case *Disconnect:
		p, ok := cp.Content.(*paho5.Disconnect)
		if !ok {
			return nil, wrongType(cp.Content)
		}
		d.eq("reason code", byte(w.Code), p.ReasonCode)
		props5(&d, "properties", &w.Props, p.Properties)
	case *Auth:
		p, ok := cp.Content.(*paho5.Auth)
		if !ok {
			return nil, wrongType(cp.Content)
		}
		d.eq("reason code", byte(w.Code), p.ReasonCode)
		props5(&d, "properties", &w.Props, p.Properties)
	default:
		return nil, fmt.Errorf("no comparison for %T", c.want)
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := cp.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("paho.golang WriteTo: %w", err)
	}
	return buf.Bytes(), nil
}

// props5 compares our properties with Paho's. Paho has no presence bit for
// string and binary properties (empty means absent), so those compare by
// value; pointer-valued ones compare presence and value.
func props5(d *diffs, where string, ours *Properties, theirs *paho5.Properties) {
	if theirs == nil {
		theirs = &paho5.Properties{}
	}
	ptr := func(name string, id PropID, v uint32, p any) {
		var got any = "absent"
		switch p := p.(type) {
		case *byte:
			if p != nil {
				got = uint32(*p)
			}
		case *uint16:
			if p != nil {
				got = uint32(*p)
			}
		case *uint32:
			if p != nil {
				got = *p
			}
		}
		var want any = "absent"
		if ours.Present(id) {
			want = v
		}
		d.eq(where+" "+name, want, got)
	}
	ptr("payload format", PropPayloadFormat, uint32(ours.PayloadFormat), theirs.PayloadFormat)
	ptr("message expiry", PropMessageExpiry, ours.MessageExpiry, theirs.MessageExpiry)
	ptr("session expiry", PropSessionExpiry, ours.SessionExpiry, theirs.SessionExpiryInterval)
	ptr("server keep alive", PropServerKeepAlive, uint32(ours.ServerKeepAlive), theirs.ServerKeepAlive)
	ptr("request problem information", PropRequestProblemInfo, uint32(ours.RequestProblemInfo), theirs.RequestProblemInfo)
	ptr("will delay", PropWillDelay, ours.WillDelay, theirs.WillDelayInterval)
	ptr("request response information", PropRequestResponseInfo, uint32(ours.RequestResponseInfo), theirs.RequestResponseInfo)
	ptr("receive maximum", PropReceiveMax, uint32(ours.ReceiveMax), theirs.ReceiveMaximum)
	ptr("topic alias maximum", PropTopicAliasMax, uint32(ours.TopicAliasMax), theirs.TopicAliasMaximum)
	ptr("topic alias", PropTopicAlias, uint32(ours.TopicAlias), theirs.TopicAlias)
	ptr("maximum QoS", PropMaxQoS, uint32(ours.MaxQoS), theirs.MaximumQOS)
	ptr("retain available", PropRetainAvailable, uint32(ours.RetainAvailable), theirs.RetainAvailable)
	ptr("maximum packet size", PropMaxPacketSize, ours.MaxPacketSize, theirs.MaximumPacketSize)
	ptr("wildcard subscription available", PropWildcardSubAvailable, uint32(ours.WildcardSubAvailable), theirs.WildcardSubAvailable)
	ptr("subscription identifiers available", PropSubIDAvailable, uint32(ours.SubIDAvailable), theirs.SubIDAvailable)
	ptr("shared subscription available", PropSharedSubAvailable, uint32(ours.SharedSubAvailable), theirs.SharedSubAvailable)

	d.eq(where+" content type", string(ours.ContentType), theirs.ContentType)
	d.eq(where+" response topic", string(ours.ResponseTopic), theirs.ResponseTopic)
	d.bytes(where+" correlation data", ours.CorrelationData, theirs.CorrelationData)
	d.eq(where+" assigned client id", string(ours.AssignedClientID), theirs.AssignedClientID)
	d.eq(where+" auth method", string(ours.AuthMethod), theirs.AuthMethod)
	d.bytes(where+" auth data", ours.AuthData, theirs.AuthData)
	d.eq(where+" response information", string(ours.ResponseInfo), theirs.ResponseInfo)
	d.eq(where+" server reference", string(ours.ServerReference), theirs.ServerReference)
	d.eq(where+" reason string", string(ours.ReasonString), theirs.ReasonString)

	// Paho keeps only the last Subscription Identifier it reads.
	var lastSubID any = "absent"
	if n := len(ours.SubscriptionIDs); n > 0 {
		lastSubID = int(ours.SubscriptionIDs[n-1])
	}
	var theirSubID any = "absent"
	if theirs.SubscriptionIdentifier != nil {
		theirSubID = *theirs.SubscriptionIdentifier
	}
	d.eq(where+" subscription identifier (last)", lastSubID, theirSubID)

	d.eq(where+" user properties", len(ours.User), len(theirs.User))
	for i := range min(len(ours.User), len(theirs.User)) {
		d.eq(fmt.Sprintf("%s user property %d", where, i),
			string(ours.User[i].Key)+"="+string(ours.User[i].Value), theirs.User[i].Key+"="+theirs.User[i].Value)
	}
}

// paho3RoundTrip decodes c.raw with paho.mqtt.golang, compares the result
// with c.want, and returns Paho's encoding of what it decoded.
func paho3RoundTrip(c tcase) ([]byte, error) {
	cp, err := paho3.ReadPacket(bytes.NewReader(c.raw))
	if err != nil {
		return nil, fmt.Errorf("paho.mqtt.golang ReadPacket: %w", err)
	}
	var d diffs
	switch w := c.want.(type) {
	case *Connect:
		p, ok := cp.(*paho3.ConnectPacket)
		if !ok {
			return nil, wrongType(cp)
		}
		d.eq("protocol name", string(w.ProtocolName), p.ProtocolName)
		d.eq("protocol version", byte(w.Version), p.ProtocolVersion)
		d.eq("clean session", w.CleanStart, p.CleanSession)
		d.eq("keep alive", w.KeepAlive, p.Keepalive)
		d.eq("client id", string(w.ClientID), p.ClientIdentifier)
		d.eq("will flag", w.WillFlag, p.WillFlag)
		d.eq("will QoS", w.WillQoS, p.WillQos)
		d.eq("will retain", w.WillRetain, p.WillRetain)
		d.eq("will topic", string(w.WillTopic), p.WillTopic)
		d.bytes("will payload", w.WillPayload, p.WillMessage)
		d.eq("user name flag", w.UsernameFlag, p.UsernameFlag)
		d.eq("user name", string(w.Username), p.Username)
		d.eq("password flag", w.PasswordFlag, p.PasswordFlag)
		d.bytes("password", w.Password, p.Password)
		d.eq("reserved bit", 0, p.ReservedBit)
		d.eq("Paho's validation", byte(paho3.Accepted), p.Validate())
	case *Connack:
		p, ok := cp.(*paho3.ConnackPacket)
		if !ok {
			return nil, wrongType(cp)
		}
		d.eq("session present", w.SessionPresent, p.SessionPresent)
		d.eq("return code", v311ConnackCode(w.Code), p.ReturnCode)
	case *Publish:
		p, ok := cp.(*paho3.PublishPacket)
		if !ok {
			return nil, wrongType(cp)
		}
		d.eq("dup", w.Dup, p.Dup)
		d.eq("QoS", w.QoS, p.Qos)
		d.eq("retain", w.Retain, p.Retain)
		d.eq("topic", string(w.Topic), p.TopicName)
		d.eq("packet id", w.PacketID, p.MessageID)
		d.bytes("payload", w.Payload, p.Payload)
	case *Ack:
		var id uint16
		switch p := cp.(type) {
		case *paho3.PubackPacket:
			id = p.MessageID
		case *paho3.PubrecPacket:
			id = p.MessageID
		case *paho3.PubrelPacket:
			id = p.MessageID
		case *paho3.PubcompPacket:
			id = p.MessageID
		default:
			return nil, fmt.Errorf("paho.mqtt.golang decoded a %T", cp)
		}
		d.eq("type", byte(w.Kind), typeOf3(cp))
		d.eq("packet id", w.PacketID, id)
	case *Subscribe:
		p, ok := cp.(*paho3.SubscribePacket)
		if !ok {
			return nil, wrongType(cp)
		}
		d.eq("packet id", w.PacketID, p.MessageID)
		var topics []string
		var qos []byte
		for _, f := range w.Filters {
			topics = append(topics, string(f.Filter))
			qos = append(qos, f.QoS)
		}
		d.eq("filters", topics, p.Topics)
		d.bytes("QoS", qos, p.Qoss)
	case *Suback:
		p, ok := cp.(*paho3.SubackPacket)
		if !ok {
			return nil, wrongType(cp)
		}
		d.eq("packet id", w.PacketID, p.MessageID)
		d.bytes("return codes", codeBytes(w.Codes), p.ReturnCodes)
	case *Unsubscribe:
		p, ok := cp.(*paho3.UnsubscribePacket)
		if !ok {
			return nil, wrongType(cp)
		}
		d.eq("packet id", w.PacketID, p.MessageID)
		d.eq("filters", filterStrings(w.Filters), p.Topics)
	case *Unsuback:
		p, ok := cp.(*paho3.UnsubackPacket)
		if !ok {
			return nil, wrongType(cp)
		}
		d.eq("packet id", w.PacketID, p.MessageID)
	case *Pingreq:
		if _, ok := cp.(*paho3.PingreqPacket); !ok {
			return nil, wrongType(cp)
		}
	case *Pingresp:
		if _, ok := cp.(*paho3.PingrespPacket); !ok {
			return nil, wrongType(cp)
		}
	case *Disconnect:
		if _, ok := cp.(*paho3.DisconnectPacket); !ok {
			return nil, wrongType(cp)
		}
	default:
		return nil, fmt.Errorf("no comparison for %T", c.want)
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := cp.Write(&buf); err != nil {
		return nil, fmt.Errorf("paho.mqtt.golang Write: %w", err)
	}
	return buf.Bytes(), nil
}

func wrongType(x any) error { return fmt.Errorf("Paho decoded a %T", x) }

func typeOf3(cp paho3.ControlPacket) byte {
	switch cp.(type) {
	case *paho3.PubackPacket:
		return byte(PUBACK)
	case *paho3.PubrecPacket:
		return byte(PUBREC)
	case *paho3.PubrelPacket:
		return byte(PUBREL)
	case *paho3.PubcompPacket:
		return byte(PUBCOMP)
	}
	return 0
}

func codeBytes(cs []ReasonCode) []byte {
	b := make([]byte, len(cs))
	for i, c := range cs {
		b[i] = byte(c)
	}
	return b
}

func filterStrings(fs [][]byte) []string {
	var out []string
	for _, f := range fs {
		out = append(out, string(f))
	}
	return out
}
