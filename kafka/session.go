package kafka

// What the gateway and the session service agree on about sessions, beyond
// the shape of the events (schemas/proto/shoal/v1/events.proto).

// SessionExpiryNever is the session expiry (Connect.session_expiry_s, a
// session's expiry in the session service) that means the session never
// expires: MQTT 5.0's Session Expiry Interval 0xFFFFFFFF (§3.1.2.11.2),
// which the gateway also gives a 3.1.1 client connecting without Clean
// Session.
const SessionExpiryNever uint32 = 0xFFFFFFFF

// MaxInboxPacketID is the highest packet identifier the session service
// gives the messages of a persistent session's inbox (Target.packet_id of
// the deliveries it forwards; 1–MaxInboxPacketID, kept across
// connections). Gateways number the messages they send themselves above
// it, so the two never collide on one connection.
const MaxInboxPacketID = 32767
