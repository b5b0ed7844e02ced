// Package packet is Shoal's MQTT codec: every control packet of MQTT 3.1.1
// (protocol level 4, with level 3 "MQIsdp" accepted as 3.1) and MQTT 5.0
// (level 5), CONNECT through AUTH, with every v5 property and reason code.
//
// # Decoding works in place
//
// A [Reader] frames packets from a byte stream: [Reader.ReadPacket] returns the
// fixed header and the packet body as a slice of the reader's own buffer,
// valid until the next call. Each packet type decodes from that body with its
// Decode method; byte-slice fields of the decoded struct (topic, payload,
// client identifier, property values …) alias the body and are therefore also
// valid only until the next ReadPacket. A caller that keeps any of them longer
// copies it (the gateway copies a PUBLISH payload once, into the reference
// counted buffer that all subscribers share). Decoding into a reused struct
// allocates nothing: slices such as Properties.User keep their capacity.
//
// # Encoding appends
//
// Every packet type has Append(dst, version) which appends its wire form to
// dst and returns the extended slice, and Size(version) which returns the
// number of bytes Append would add (used against the peer's Maximum Packet
// Size). Properties are written only for version 5 and only those the packet
// type may carry; Properties.Has says which are present. Encoders trust their
// input: the caller builds valid packets (the decoders are the validators).
//
// # Errors carry reason codes
//
// Every decode error is an [*Error] whose Code is the MQTT 5.0 reason code
// the specification requires for that fault: [CodeMalformedPacket] (0x81)
// for bytes that do not form a packet, [CodeProtocolError] (0x82) for a
// well-formed packet that breaks a rule, [CodePacketTooLarge] (0x95) for a
// packet above the negotiated maximum, [CodeUnsupportedProtocolVersion]
// (0x84) for a CONNECT of an unknown protocol, [CodeTopicNameInvalid] (0x90)
// for a PUBLISH topic with wildcards. [CodeOf] extracts it, so the gateway
// can answer with the right DISCONNECT or CONNACK. For MQTT 3.1.1, which has
// no reason codes on DISCONNECT, the gateway closes the connection; CONNACK
// codes are mapped to 3.1.1 return codes by Connack.Append.
//
// The decoders are direction-agnostic: rules that depend on who sent a
// packet (a client must not send a Subscription Identifier in PUBLISH, a
// server must not send CONNECT …) are the gateway's to enforce. Topic name
// and filter syntax beyond UTF-8 and wildcard characters in names is checked
// by package topic, because an invalid filter is answered per filter in
// SUBACK, not by closing the connection.
package packet
