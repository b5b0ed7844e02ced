package packet

func invalidCases() []tcase {
	const (
		mal   = CodeMalformedPacket
		proto = CodeProtocolError
	)
	var cs []tcase
	// Rules that hold in both versions, written once with the version
	// dependent part (properties) chosen by p.
	for _, v := range []Version{V311, V5} {
		p := func(props ...[]byte) []byte { // properties in 5.0, nothing in 3.1.1
			if v == V5 {
				return wprops(props...)
			}
			return nil
		}
		connect := connect4
		unsuback0 := wb(0xB0, 2, 0, 0) // 3.1.1 UNSUBACK has no payload
		if v == V5 {
			connect = connect5
			unsuback0 = wpkt(0xB0, wu16(0), wprops(), wb(0))
		}
		cs = append(cs, []tcase{
			// Truncated fields: the remaining length is right, a field inside is cut short.
			{name: "CONNECT truncated protocol name", v: v, raw: wb(0x10, 3, 0, 4, 'M'), code: mal},
			{name: "CONNECT truncated before keep alive", v: v, raw: wcat(wb(0x10, 8), wstr("MQTT"), wb(byte(v), 2)), code: mal},
			{name: "CONNECT truncated client id", v: v, raw: wpkt(0x10, connect(2), p(), wb(0, 5, 'a')), code: mal},
			{name: "CONNECT missing will payload", v: v, raw: wpkt(0x10, connect(0x06), p(), wstr("c"), p(), wstr("w/t")), code: mal},
			{name: "CONNECT missing password", v: v, raw: wpkt(0x10, connect(0xC2), p(), wstr("c"), wstr("u")), code: mal},
			{name: "CONNACK one byte", v: v, raw: wb(0x20, 1, 0), code: mal},
			{name: "PUBLISH topic longer than the packet", v: v, raw: wb(0x30, 3, 0, 5, 'a'), code: mal},
			{name: "PUBLISH QoS 1 missing packet id", v: v, raw: wpkt(0x32, wstr("a"), wb(1)), code: mal},
			{name: "PUBACK one byte", v: v, raw: wb(0x40, 1, 0), code: mal},
			{name: "PUBREL empty", v: v, raw: wb(0x62, 0), code: mal},
			{name: "SUBSCRIBE filter without options", v: v, raw: wpkt(0x82, wu16(1), p(), wstr("a/b")), code: mal},
			{name: "SUBSCRIBE truncated filter", v: v, raw: wpkt(0x82, wu16(1), p(), wb(0, 9, 'a')), code: mal},
			{name: "UNSUBSCRIBE truncated filter", v: v, raw: wpkt(0xA2, wu16(1), p(), wb(0, 9, 'a')), code: mal},
			{name: "SUBACK missing packet id", v: v, raw: wb(0x90, 1, 0), code: mal},

			// Trailing bytes after the last field.
			{name: "CONNECT trailing byte", v: v, raw: wpkt(0x10, connect(2), p(), wstr("c"), wb(0)), code: mal},
			{name: "PINGREQ with a body", v: v, raw: wb(0xC0, 1, 0), code: mal},
			{name: "PINGRESP with a body", v: v, raw: wb(0xD0, 1, 0), code: mal},

			// Strings that are not well-formed UTF-8, or contain U+0000.
			{name: "PUBLISH topic invalid UTF-8", v: v, raw: wpkt(0x30, wstr("a\xffb"), p()), code: mal},
			{name: "PUBLISH topic UTF-16 surrogate", v: v, raw: wpkt(0x30, wstr("a\xed\xa0\x80"), p()), code: mal},
			{name: "PUBLISH topic U+0000", v: v, raw: wpkt(0x30, wstr("a\x00b"), p()), code: mal},
			{name: "PUBLISH topic overlong encoding", v: v, raw: wpkt(0x30, wstr("\xc0\xafa"), p()), code: mal},
			{name: "PUBLISH topic U+0000 after multi-byte", v: v, raw: wpkt(0x30, wstr("é\x00"), p()), code: mal},
			{name: "CONNECT client id surrogate", v: v, raw: wpkt(0x10, connect(2), p(), wstr("\xed\xbf\xbf")), code: mal},
			{name: "CONNECT user name U+0000", v: v, raw: wpkt(0x10, connect(0x82), p(), wstr("c"), wstr("u\x00")), code: mal},
			{name: "CONNECT will topic invalid UTF-8", v: v, raw: wpkt(0x10, connect(0x06), p(), wstr("c"), p(), wstr("\xfe"), wstr("")), code: mal},
			{name: "SUBSCRIBE filter surrogate", v: v, raw: wpkt(0x82, wu16(1), p(), wstr("\xed\xa0\x80"), wb(0)), code: mal},
			{name: "UNSUBSCRIBE filter U+0000", v: v, raw: wpkt(0xA2, wu16(1), p(), wstr("\x00")), code: mal},

			// Wildcards in a topic name.
			{name: "PUBLISH topic with +", v: v, raw: wpkt(0x30, wstr("a/+/c"), p()), code: CodeTopicNameInvalid},
			{name: "PUBLISH topic with #", v: v, raw: wpkt(0x32, wstr("a/#"), wu16(1), p()), code: CodeTopicNameInvalid},
			{name: "PUBLISH multi-byte topic with +", v: v, raw: wpkt(0x30, wstr("é/+"), p()), code: CodeTopicNameInvalid},
			{name: "CONNECT will topic with wildcard", v: v, raw: wpkt(0x10, connect(0x06), p(), wstr("c"), p(), wstr("a/#"), wstr("")), code: CodeTopicNameInvalid},

			// Empty topic name (without topic alias in 5.0).
			{name: "PUBLISH empty topic", v: v, raw: wpkt(0x30, wstr(""), p(), bs("x")), code: proto},

			// Packet identifier 0.
			{name: "PUBLISH QoS 1 packet id 0", v: v, raw: wpkt(0x32, wstr("a"), wu16(0), p()), code: proto},
			{name: "PUBLISH QoS 2 packet id 0", v: v, raw: wpkt(0x34, wstr("a"), wu16(0), p()), code: proto},
			{name: "PUBACK packet id 0", v: v, raw: wb(0x40, 2, 0, 0), code: proto},
			{name: "PUBREC packet id 0", v: v, raw: wb(0x50, 2, 0, 0), code: proto},
			{name: "PUBREL packet id 0", v: v, raw: wb(0x62, 2, 0, 0), code: proto},
			{name: "PUBCOMP packet id 0", v: v, raw: wb(0x70, 2, 0, 0), code: proto},
			{name: "SUBSCRIBE packet id 0", v: v, raw: wpkt(0x82, wu16(0), p(), wstr("a"), wb(0)), code: proto},
			{name: "SUBACK packet id 0", v: v, raw: wpkt(0x90, wu16(0), p(), wb(0)), code: proto},
			{name: "UNSUBSCRIBE packet id 0", v: v, raw: wpkt(0xA2, wu16(0), p(), wstr("a")), code: proto},
			{name: "UNSUBACK packet id 0", v: v, raw: unsuback0, code: proto},

			// Unsupported protocol name or level.
			{name: "CONNECT protocol name MQTX", v: v, raw: wpkt(0x10, wstr("MQTX"), wb(byte(v), 2), wu16(60), p(), wstr("c")), code: CodeUnsupportedProtocolVersion},
			{name: "CONNECT protocol level 6", v: v, raw: wpkt(0x10, wstr("MQTT"), wb(6, 2), wu16(60), p(), wstr("c")), code: CodeUnsupportedProtocolVersion},
			{name: "CONNECT protocol level 3 with name MQTT", v: v, raw: wpkt(0x10, wstr("MQTT"), wb(3, 2), wu16(60), wstr("c")), code: CodeUnsupportedProtocolVersion},
			{name: "CONNECT MQIsdp with level 4", v: v, raw: wpkt(0x10, wstr("MQIsdp"), wb(4, 2), wu16(60), wstr("c")), code: CodeUnsupportedProtocolVersion},
			{name: "CONNECT lower-case protocol name", v: v, raw: wpkt(0x10, wstr("mqtt"), wb(byte(v), 2), wu16(60), p(), wstr("c")), code: CodeUnsupportedProtocolVersion},

			// CONNECT flags.
			{name: "CONNECT reserved flag", v: v, raw: wpkt(0x10, connect(0x03), p(), wstr("c")), code: mal},
			{name: "CONNECT will QoS 3", v: v, raw: wpkt(0x10, connect(0x1E), p(), wstr("c"), p(), wstr("w"), wstr("")), code: mal},
			{name: "CONNECT will QoS without will flag", v: v, raw: wpkt(0x10, connect(0x0A), p(), wstr("c")), code: mal},
			{name: "CONNECT will retain without will flag", v: v, raw: wpkt(0x10, connect(0x22), p(), wstr("c")), code: mal},

			// Reason codes and return codes.
			{name: "CONNACK reserved acknowledge flags", v: v, raw: wpkt(0x20, wb(0x02, 0), p()), code: mal},
			{name: "CONNACK reserved flags and invalid code", v: v, raw: wpkt(0x20, wb(0x80, 0xEE), p()), code: mal},
			{name: "CONNACK session present with failure", v: v, raw: wpkt(0x20, wb(1, map[Version]byte{V311: 5, V5: 0x87}[v]), p()), code: proto},

			// Subscriptions.
			{name: "SUBSCRIBE no filters", v: v, raw: wpkt(0x82, wu16(1), p()), code: proto},
			{name: "UNSUBSCRIBE no filters", v: v, raw: wpkt(0xA2, wu16(1), p()), code: proto},
			{name: "SUBSCRIBE reserved option bits 7-6", v: v, raw: wpkt(0x82, wu16(1), p(), wstr("a"), wb(0xC1)), code: mal},
			{name: "SUBSCRIBE second filter bad", v: v, raw: wpkt(0x82, wu16(1), p(), wstr("a"), wb(1), wstr("b"), wb(0x80)), code: mal},
			{name: "SUBACK no codes", v: v, raw: wpkt(0x90, wu16(1), p()), code: proto},
		}...)
	}

	// 3.1.1 only.
	v := V311
	cs = append(cs, []tcase{
		{name: "CONNECT password without user name", v: v, raw: wpkt(0x10, connect4(0x42), wstr("c"), wstr("pw")), code: mal},
		{name: "CONNACK three bytes", v: v, raw: wb(0x20, 3, 0, 0, 0), code: mal},
		{name: "CONNACK return code 6", v: v, raw: wb(0x20, 2, 0, 6), code: proto},
		{name: "CONNACK reserved flags and return code 6", v: v, raw: wb(0x20, 2, 2, 6), code: mal},
		{name: "CONNACK reserved flags and return code 0xFF", v: v, raw: wb(0x20, 2, 0xFE, 0xFF), code: mal},
		{name: "PUBACK with a reason code", v: v, raw: wb(0x40, 3, 0, 1, 0), code: mal},
		{name: "PUBREL with a reason code", v: v, raw: wb(0x62, 3, 0, 1, 0), code: mal},
		{name: "UNSUBACK with a payload", v: v, raw: wb(0xB0, 3, 0, 1, 0), code: mal},
		{name: "DISCONNECT with a reason code", v: v, raw: wb(0xE0, 1, 0), code: mal},
		{name: "SUBSCRIBE option bits 7-2 (5.0 options)", v: v, raw: wpkt(0x82, wu16(1), wstr("a"), wb(0x04)), code: mal},
		{name: "SUBSCRIBE QoS 3", v: v, raw: wpkt(0x82, wu16(1), wstr("a"), wb(3)), code: mal},
		{name: "SUBACK return code 3", v: v, raw: wb(0x90, 3, 0, 1, 3), code: proto},
		{name: "SUBACK 5.0 reason code 0x87", v: v, raw: wb(0x90, 3, 0, 1, 0x87), code: proto},
		{name: "AUTH", v: v, raw: wb(0xF0, 0), code: mal},
		{name: "AUTH with a body", v: v, raw: wb(0xF0, 1, 0x18), code: mal},
	}...)

	// 5.0 only.
	v = V5
	c5 := func(props ...[]byte) []byte { // a CONNECT with the given properties
		return wpkt(0x10, connect5(2), wprops(props...), wstr("c"))
	}
	pub := func(props ...[]byte) []byte { // a QoS 0 PUBLISH with the given properties
		return wpkt(0x30, wstr("t"), wprops(props...), bs("x"))
	}
	cs = append(cs, []tcase{
		// Truncated and trailing.
		{name: "CONNECT missing property length", v: v, raw: wpkt(0x10, connect5(2)), code: mal},
		{name: "CONNECT property length exceeds packet", v: v, raw: wpkt(0x10, connect5(2), wb(10), pU32(PropSessionExpiry, 1)), code: mal},
		{name: "CONNECT property value truncated", v: v, raw: wpkt(0x10, connect5(2), wb(3), pU32(PropSessionExpiry, 1)[:3]), code: mal},
		{name: "CONNECT user property missing value", v: v, raw: wpkt(0x10, connect5(2), wprops(wb(byte(PropUser)), wstr("k")), wstr("c")), code: mal},
		{name: "CONNECT will properties truncated", v: v, raw: wpkt(0x10, connect5(0x06), wprops(), wstr("c"), wb(5, 0x18, 0)), code: mal},
		{name: "CONNACK missing property length", v: v, raw: wb(0x20, 2, 0, 0), code: mal},
		{name: "CONNACK trailing byte", v: v, raw: wb(0x20, 4, 0, 0, 0, 0), code: mal},
		{name: "PUBLISH missing property length", v: v, raw: wpkt(0x30, wstr("t")), code: mal},
		{name: "PUBLISH subscription id truncated", v: v, raw: wpkt(0x30, wstr("t"), wb(2, byte(PropSubscriptionID), 0x80)), code: mal},
		{name: "PUBACK property length exceeds packet", v: v, raw: wb(0x40, 5, 0, 1, 0x80, 9, 0x1F), code: mal},
		{name: "PUBACK trailing byte after properties", v: v, raw: wb(0x40, 5, 0, 1, 0x80, 0, 0), code: mal},
		{name: "SUBACK missing property length", v: v, raw: wb(0x90, 2, 0, 1), code: mal},
		{name: "UNSUBACK missing property length", v: v, raw: wb(0xB0, 2, 0, 1), code: mal},
		{name: "DISCONNECT property length exceeds packet", v: v, raw: wb(0xE0, 2, 0, 1), code: mal},
		{name: "DISCONNECT trailing byte", v: v, raw: wb(0xE0, 3, 0, 0, 0), code: mal},
		{name: "AUTH property length exceeds packet", v: v, raw: wb(0xF0, 2, 0x18, 4), code: mal},

		// Variable byte integers inside the body.
		{name: "PUBLISH property length not shortest", v: v, raw: wpkt(0x30, wstr("t"), wb(0x80, 0x00)), code: mal},
		{name: "PUBLISH subscription id in 5 bytes", v: v, raw: pub(wb(byte(PropSubscriptionID), 0x81, 0x81, 0x81, 0x81, 0x01)), code: mal},
		{name: "PUBLISH subscription id not shortest", v: v, raw: pub(wb(byte(PropSubscriptionID), 0x81, 0x00)), code: mal},
		{name: "PUBLISH property identifier in two bytes", v: v, raw: pub(wb(0x81, 0x00, 1)), code: mal},

		// Strings in properties.
		{name: "PUBLISH content type invalid UTF-8", v: v, raw: pub(pStr(PropContentType, "\xff")), code: mal},
		{name: "PUBLISH user property key U+0000", v: v, raw: pub(pUser("\x00", "v")), code: mal},
		{name: "PUBLISH user property value surrogate", v: v, raw: pub(pUser("k", "\xed\xa0\x80")), code: mal},
		{name: "CONNACK reason string surrogate", v: v, raw: wpkt(0x20, wb(0, 0), wprops(pStr(PropReasonString, "\xed\xb0\x80"))), code: mal},
		{name: "PUBLISH response topic with wildcard", v: v, raw: pub(pStr(PropResponseTopic, "r/+")), code: proto},
		{name: "PUBLISH response topic empty", v: v, raw: pub(pStr(PropResponseTopic, "")), code: proto},

		// Properties not allowed for the packet type.
		{name: "CONNECT topic alias", v: v, raw: c5(pU16(PropTopicAlias, 1)), code: mal},
		{name: "CONNECT will delay in connect properties", v: v, raw: c5(pU32(PropWillDelay, 1)), code: mal},
		{name: "CONNECT maximum QoS", v: v, raw: c5(pByte(PropMaxQoS, 1)), code: mal},
		{name: "CONNECT session expiry in will properties", v: v,
			raw: wpkt(0x10, connect5(0x06), wprops(), wstr("c"), wprops(pU32(PropSessionExpiry, 1)), wstr("w"), wstr("")), code: mal},
		{name: "CONNACK request problem information", v: v, raw: wpkt(0x20, wb(0, 0), wprops(pByte(PropRequestProblemInfo, 1))), code: mal},
		{name: "PUBLISH session expiry", v: v, raw: pub(pU32(PropSessionExpiry, 1)), code: mal},
		{name: "PUBLISH reason string", v: v, raw: pub(pStr(PropReasonString, "r")), code: mal},
		{name: "PUBLISH unknown property 0x7F", v: v, raw: pub(wb(0x7F, 0)), code: mal},
		{name: "PUBLISH property identifier 0", v: v, raw: pub(wb(0x00, 0)), code: mal},
		{name: "PUBACK server reference", v: v, raw: wpkt(0x40, wu16(1), wb(0), wprops(pStr(PropServerReference, "s"))), code: mal},
		{name: "SUBSCRIBE topic alias", v: v, raw: wpkt(0x82, wu16(1), wprops(pU16(PropTopicAlias, 1)), wstr("a"), wb(0)), code: mal},
		{name: "UNSUBSCRIBE subscription identifier", v: v, raw: wpkt(0xA2, wu16(1), wprops(pVBI(PropSubscriptionID, 1)), wstr("a")), code: mal},
		{name: "SUBACK user property and session expiry", v: v, raw: wpkt(0x90, wu16(1), wprops(pUser("k", "v"), pU32(PropSessionExpiry, 1)), wb(0)), code: mal},
		{name: "UNSUBACK content type", v: v, raw: wpkt(0xB0, wu16(1), wprops(pStr(PropContentType, "c")), wb(0)), code: mal},
		{name: "DISCONNECT auth method", v: v, raw: wpkt(0xE0, wb(0), wprops(pStr(PropAuthMethod, "m"))), code: mal},
		{name: "AUTH session expiry", v: v, raw: wpkt(0xF0, wb(0x18), wprops(pStr(PropAuthMethod, "m"), pU32(PropSessionExpiry, 1))), code: mal},

		// Duplicated properties.
		{name: "CONNECT session expiry twice", v: v, raw: c5(pU32(PropSessionExpiry, 1), pU32(PropSessionExpiry, 2)), code: proto},
		{name: "CONNECT auth method twice", v: v, raw: c5(pStr(PropAuthMethod, "a"), pStr(PropAuthMethod, "a")), code: proto},
		{name: "CONNECT will delay twice", v: v,
			raw: wpkt(0x10, connect5(0x06), wprops(), wstr("c"), wprops(pU32(PropWillDelay, 1), pU32(PropWillDelay, 1)), wstr("w"), wstr("")), code: proto},
		{name: "CONNACK maximum QoS twice", v: v, raw: wpkt(0x20, wb(0, 0), wprops(pByte(PropMaxQoS, 0), pByte(PropMaxQoS, 0))), code: proto},
		{name: "PUBLISH topic alias twice", v: v, raw: pub(pU16(PropTopicAlias, 1), pU16(PropTopicAlias, 2)), code: proto},
		{name: "PUBLISH payload format twice", v: v, raw: pub(pByte(PropPayloadFormat, 0), pByte(PropPayloadFormat, 0)), code: proto},
		{name: "PUBACK reason string twice", v: v, raw: wpkt(0x40, wu16(1), wb(0x80), wprops(pStr(PropReasonString, "a"), pStr(PropReasonString, "b"))), code: proto},
		{name: "SUBSCRIBE subscription identifier twice", v: v,
			raw: wpkt(0x82, wu16(1), wprops(pVBI(PropSubscriptionID, 1), pVBI(PropSubscriptionID, 2)), wstr("a"), wb(0)), code: proto},
		{name: "DISCONNECT session expiry twice", v: v, raw: wpkt(0xE0, wb(0), wprops(pU32(PropSessionExpiry, 1), pU32(PropSessionExpiry, 1))), code: proto},

		// Property values out of range.
		{name: "CONNECT receive maximum 0", v: v, raw: c5(pU16(PropReceiveMax, 0)), code: proto},
		{name: "CONNACK receive maximum 0", v: v, raw: wpkt(0x20, wb(0, 0), wprops(pU16(PropReceiveMax, 0))), code: proto},
		{name: "CONNECT maximum packet size 0", v: v, raw: c5(pU32(PropMaxPacketSize, 0)), code: proto},
		{name: "CONNACK maximum packet size 0", v: v, raw: wpkt(0x20, wb(0, 0), wprops(pU32(PropMaxPacketSize, 0))), code: proto},
		{name: "PUBLISH topic alias 0", v: v, raw: pub(pU16(PropTopicAlias, 0)), code: CodeTopicAliasInvalid},
		{name: "PUBLISH subscription id 0", v: v, raw: pub(pVBI(PropSubscriptionID, 0)), code: proto},
		{name: "SUBSCRIBE subscription id 0", v: v, raw: wpkt(0x82, wu16(1), wprops(pVBI(PropSubscriptionID, 0)), wstr("a"), wb(0)), code: proto},
		{name: "PUBLISH payload format 2", v: v, raw: pub(pByte(PropPayloadFormat, 2)), code: proto},
		{name: "CONNECT will payload format 2", v: v,
			raw: wpkt(0x10, connect5(0x06), wprops(), wstr("c"), wprops(pByte(PropPayloadFormat, 2)), wstr("w"), wstr("")), code: proto},
		{name: "CONNECT request problem information 2", v: v, raw: c5(pByte(PropRequestProblemInfo, 2)), code: proto},
		{name: "CONNECT request response information 2", v: v, raw: c5(pByte(PropRequestResponseInfo, 2)), code: proto},
		{name: "CONNACK maximum QoS 2", v: v, raw: wpkt(0x20, wb(0, 0), wprops(pByte(PropMaxQoS, 2))), code: proto},
		{name: "CONNACK retain available 2", v: v, raw: wpkt(0x20, wb(0, 0), wprops(pByte(PropRetainAvailable, 2))), code: proto},
		{name: "CONNACK wildcard subscription available 2", v: v, raw: wpkt(0x20, wb(0, 0), wprops(pByte(PropWildcardSubAvailable, 2))), code: proto},
		{name: "CONNACK subscription identifiers available 2", v: v, raw: wpkt(0x20, wb(0, 0), wprops(pByte(PropSubIDAvailable, 2))), code: proto},
		{name: "CONNACK shared subscription available 2", v: v, raw: wpkt(0x20, wb(0, 0), wprops(pByte(PropSharedSubAvailable, 2))), code: proto},
		{name: "CONNECT auth data without auth method", v: v, raw: c5(pStr(PropAuthData, "d")), code: proto},
		{name: "PUBLISH empty topic with other properties but no alias", v: v,
			raw: wpkt(0x30, wstr(""), wprops(pByte(PropPayloadFormat, 1)), bs("x")), code: proto},

		// Subscription options.
		{name: "SUBSCRIBE reserved option bit 6", v: v, raw: wpkt(0x82, wu16(1), wprops(), wstr("a"), wb(0x40)), code: mal},
		{name: "SUBSCRIBE retain handling 3", v: v, raw: wpkt(0x82, wu16(1), wprops(), wstr("a"), wb(0x30)), code: proto},
		{name: "SUBSCRIBE maximum QoS 3", v: v, raw: wpkt(0x82, wu16(1), wprops(), wstr("a"), wb(0x03)), code: proto},

		// Invalid reason codes.
		{name: "CONNACK reason code 0x01", v: v, raw: wpkt(0x20, wb(0, 0x01), wprops()), code: proto},
		{name: "CONNACK reason code 0x8B (not for CONNACK)", v: v, raw: wpkt(0x20, wb(0, 0x8B), wprops()), code: proto},
		{name: "PUBACK reason code 0x05", v: v, raw: wb(0x40, 3, 0, 1, 0x05), code: proto},
		{name: "PUBREC reason code 0x92", v: v, raw: wb(0x50, 3, 0, 1, 0x92), code: proto},
		{name: "PUBREL reason code 0x10", v: v, raw: wb(0x62, 3, 0, 1, 0x10), code: proto},
		{name: "PUBCOMP reason code 0x80", v: v, raw: wb(0x70, 3, 0, 1, 0x80), code: proto},
		{name: "SUBACK reason code 0x03", v: v, raw: wpkt(0x90, wu16(1), wprops(), wb(0, 3)), code: proto},
		{name: "UNSUBACK reason code 0x01", v: v, raw: wpkt(0xB0, wu16(1), wprops(), wb(0x01)), code: proto},
		{name: "UNSUBACK no reason codes", v: v, raw: wpkt(0xB0, wu16(1), wprops()), code: proto},
		{name: "DISCONNECT reason code 0x01", v: v, raw: wb(0xE0, 1, 0x01), code: proto},
		{name: "DISCONNECT reason code 0x84 (CONNACK only)", v: v, raw: wb(0xE0, 1, 0x84), code: proto},
		{name: "AUTH reason code 0x01", v: v, raw: wb(0xF0, 1, 0x01), code: proto},
		{name: "AUTH reason code 0x87", v: v, raw: wpkt(0xF0, wb(0x87), wprops(pStr(PropAuthMethod, "m"))), code: proto},

		// AUTH.
		{name: "AUTH continue without auth method", v: v, raw: wb(0xF0, 1, 0x18), code: proto},
		{name: "AUTH re-authenticate with data but no method", v: v, raw: wpkt(0xF0, wb(0x19), wprops(pStr(PropAuthData, "d"))), code: proto},
		{name: "AUTH success with properties but no method", v: v, raw: wpkt(0xF0, wb(0x00), wprops(pStr(PropReasonString, "r"))), code: proto},
		{name: "AUTH success with empty properties", v: v, raw: wb(0xF0, 2, 0x00, 0x00), code: proto},
	}...)
	return cs
}
