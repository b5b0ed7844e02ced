package admin

import (
	"encoding/base64"
	"time"
	"unicode/utf8"

	"github.com/shoal-mqtt/shoal/bridge"
	"github.com/shoal-mqtt/shoal/gateway"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
)

// The JSON of the admin API. Field names are stable (snake_case); new
// fields may be added, none renamed or removed. Times are RFC 3339 in UTC.

// RoleList is GET /v1/roles: the roles whose state this server serves.
type RoleList struct {
	Roles []string `json:"roles"`
}

// Client is a connection of a gateway.
type Client struct {
	Tenant          string    `json:"tenant"`
	ClientID        string    `json:"client_id"`
	Username        string    `json:"username,omitempty"`
	Gateway         string    `json:"gateway"`
	Address         string    `json:"address"`
	Listener        string    `json:"listener"`
	ProtocolVersion int       `json:"protocol_version"`
	ConnectedAt     time.Time `json:"connected_at"`
	KeepAliveS      int64     `json:"keep_alive_s"`
	SessionExpiryS  uint32    `json:"session_expiry_s"`
	Inflight        int       `json:"inflight"`
	Queued          int       `json:"queued"`
	InflightIn      int       `json:"inflight_in"`
	Subscriptions   int       `json:"subscriptions"`
}

// Clients is GET /v1/clients.
type Clients struct {
	Clients []Client `json:"clients"`
	// More is set when a page (limit=) has entries after it.
	More bool `json:"more,omitempty"`
}

// Session is a session as the session service keeps it.
type Session struct {
	Tenant   string `json:"tenant"`
	ClientID string `json:"client_id"`
	// State is "connected" or "offline".
	State           string `json:"state"`
	Gateway         string `json:"gateway"`
	Slot            int32  `json:"slot"`
	Generation      uint64 `json:"generation"`
	ProtocolVersion uint32 `json:"protocol_version"`
	Username        string `json:"username,omitempty"`
	// ExpiryS is the session expiry interval; 4294967295 never expires.
	ExpiryS        uint32     `json:"expiry_s"`
	ExpiresAt      *time.Time `json:"expires_at,omitempty"`
	ConnectedAt    time.Time  `json:"connected_at"`
	DisconnectedAt *time.Time `json:"disconnected_at,omitempty"`
	// Inbox is the QoS 1/2 messages kept for the session; Inflight those
	// of them sent and not acknowledged yet.
	Inbox         int `json:"inbox"`
	Inflight      int `json:"inflight"`
	InboxDropped  int `json:"inbox_dropped"`
	Subscriptions int `json:"subscriptions"`
	// Filters are the session's subscriptions (GET with client= only).
	Filters []SessionFilter `json:"filters,omitempty"`
}

// SessionFilter is one subscription of a session.
type SessionFilter struct {
	Filter string `json:"filter"`
	QoS    uint32 `json:"qos"`
}

// Sessions is GET /v1/sessions.
type Sessions struct {
	Sessions []Session `json:"sessions"`
	// More is set when a page (limit=) has entries after it.
	More bool `json:"more,omitempty"`
}

// Subscription is a subscription in the router's view.
type Subscription struct {
	Tenant            string `json:"tenant"`
	ClientID          string `json:"client_id"`
	Filter            string `json:"filter"`
	ShareGroup        string `json:"share_group,omitempty"`
	QoS               uint32 `json:"qos"`
	NoLocal           bool   `json:"no_local"`
	RetainAsPublished bool   `json:"retain_as_published"`
	RetainHandling    uint32 `json:"retain_handling"`
	SubscriptionID    uint32 `json:"subscription_id,omitempty"`
	Generation        uint64 `json:"generation"`
}

// Subscriptions is GET /v1/subscriptions.
type Subscriptions struct {
	Subscriptions []Subscription `json:"subscriptions"`
	// More is set when a page (limit=) has entries after it.
	More bool `json:"more,omitempty"`
}

// Retained is a retained message.
type Retained struct {
	Tenant      string `json:"tenant"`
	Topic       string `json:"topic"`
	QoS         uint32 `json:"qos"`
	PayloadSize int    `json:"payload_size"`
	// Payload is the payload when it is UTF-8 text, PayloadBase64
	// otherwise.
	Payload       string     `json:"payload,omitempty"`
	PayloadBase64 string     `json:"payload_base64,omitempty"`
	PublishedAt   time.Time  `json:"published_at"`
	ExpiresAt     *time.Time `json:"expires_at,omitempty"`
}

// RetainedList is GET /v1/retained.
type RetainedList struct {
	Retained []Retained `json:"retained"`
	// More is set when a page (limit=) has entries after it.
	More bool `json:"more,omitempty"`
}

// BridgeMapping is a mapping of the Kafka data bridge, with its lag.
type BridgeMapping struct {
	// Direction is "out" (MQTT to Kafka) or "in" (Kafka to MQTT).
	Direction string `json:"direction"`
	Name      string `json:"name"`
	Tenant    string `json:"tenant"`
	// From is what it reads: an out mapping's MQTT filter, an in
	// mapping's Kafka topic; To is the template of what it writes.
	From string `json:"from"`
	To   string `json:"to"`
	// Lag is the records it has yet to read (absent: not measured yet).
	Lag *int64 `json:"lag,omitempty"`
	// State is "running", or "starting" while its direction makes its
	// topics or is started again after a failure.
	State string `json:"state"`
}

// Bridges is GET /v1/bridges.
type Bridges struct {
	Mappings []BridgeMapping `json:"mappings"`
}

// Stats is GET /v1/stats: what the server's roles count now, for the
// console's overview (which takes rates from two of them).
type Stats struct {
	// Server names the process: its gateway id, or its host name.
	Server string    `json:"server"`
	At     time.Time `json:"at"`
	Roles  []string  `json:"roles"`
	// Health is each role's readiness (/readyz's).
	Health []RoleHealth `json:"health"`
	// Tenants are the gateway's counters per tenant (of the tenant
	// asked for alone with tenant=), sorted by tenant.
	Tenants []TenantStats `json:"tenants,omitempty"`
	// Lag is the records the roles' consumers have yet to read, per topic
	// and consumer group (all_tenants=true only: the log is shared).
	Lag []TopicLag `json:"lag,omitempty"`
}

// RoleHealth is a role's readiness.
type RoleHealth struct {
	Role  string `json:"role"`
	Ready bool   `json:"ready"`
}

// TenantStats are a gateway's counters of one tenant since it started.
type TenantStats struct {
	Tenant           string `json:"tenant"`
	Connections      int64  `json:"connections"`
	MessagesReceived int64  `json:"messages_received"`
	MessagesSent     int64  `json:"messages_sent"`
}

// TopicLag is the lag of the consumers of one topic in one group.
type TopicLag struct {
	Topic      string `json:"topic"`
	Group      string `json:"group,omitempty"`
	Partitions int    `json:"partitions"`
	Lag        int64  `json:"lag"`
}

// Accepted answers a mutation: the event written to the log.
type Accepted struct {
	// Event is the event written: "session_command" or "publish".
	Event  string `json:"event"`
	Detail string `json:"detail"`
}

// Error is the body of every answer that is not 2xx.
type Error struct {
	Error string `json:"error"`
}

func clientOf(ci gateway.ClientInfo, gatewayID string) Client {
	return Client{
		Tenant: ci.Tenant, ClientID: ci.ClientID, Username: ci.Username, Gateway: gatewayID,
		Address: ci.Address, Listener: ci.Listener, ProtocolVersion: ci.ProtocolVersion,
		ConnectedAt: ci.ConnectedAt.UTC(), KeepAliveS: int64(ci.KeepAlive / time.Second),
		SessionExpiryS: ci.SessionExpiryS, Inflight: ci.Inflight, Queued: ci.Queued,
		InflightIn: ci.InflightIn, Subscriptions: ci.Subscriptions,
	}
}

func sessionOf(s *sessionsvc.Session, filters bool) Session {
	out := Session{
		Tenant: s.Tenant, ClientID: s.ClientID, State: "offline", Gateway: s.Gateway,
		Slot: s.Route.GetSlot(), Generation: s.Generation, ProtocolVersion: s.ProtocolVersion,
		Username: s.Username, ExpiryS: s.ExpiryS, ConnectedAt: s.ConnectedAt.UTC(),
		Inbox: len(s.Inbox), InboxDropped: int(s.InboxDropped), Subscriptions: len(s.Subscriptions),
	}
	if s.Online {
		out.State = "connected"
	} else if !s.DisconnectedAt.IsZero() {
		d := s.DisconnectedAt.UTC()
		out.DisconnectedAt = &d
		if s.ExpiryS != ^uint32(0) {
			at := d.Add(time.Duration(s.ExpiryS) * time.Second)
			out.ExpiresAt = &at
		}
	}
	for _, e := range s.Inbox {
		if e.GetSent() {
			out.Inflight++
		}
	}
	if filters {
		for _, sub := range s.Subscriptions {
			out.Filters = append(out.Filters, SessionFilter{Filter: sub.GetFilter(), QoS: sub.GetOptions().GetQos()})
		}
	}
	return out
}

func subscriptionOf(s routersvc.Subscription) Subscription {
	o := s.Options
	return Subscription{
		Tenant: s.Tenant, ClientID: s.Client, Filter: s.Filter, ShareGroup: s.ShareGroup,
		QoS: o.GetQos(), NoLocal: o.GetNoLocal(), RetainAsPublished: o.GetRetainAsPublished(),
		RetainHandling: o.GetRetainHandling(), SubscriptionID: o.GetSubscriptionId(),
		Generation: s.Route.GetGeneration(),
	}
}

func bridgeMappingOf(m bridge.MappingStatus) BridgeMapping {
	out := BridgeMapping{Direction: m.Direction, Name: m.Name, Tenant: m.Tenant, From: m.From, To: m.To, State: "starting"}
	if m.LagKnown {
		n := m.Lag
		out.Lag = &n
	}
	if m.Running {
		out.State = "running"
	}
	return out
}

func retainedOf(env *eventspb.Envelope) Retained {
	msg := env.GetPublish().GetMessage()
	r := Retained{
		Tenant: env.GetTenant(), Topic: msg.GetTopic(), QoS: msg.GetQos(), PayloadSize: len(msg.GetPayload()),
		PublishedAt: time.UnixMicro(env.GetTimestampUs()).UTC(),
	}
	if utf8.Valid(msg.GetPayload()) {
		r.Payload = string(msg.GetPayload())
	} else {
		r.PayloadBase64 = base64.StdEncoding.EncodeToString(msg.GetPayload())
	}
	if msg.GetExpiresAtMs() != 0 {
		at := time.UnixMilli(msg.GetExpiresAtMs()).UTC()
		r.ExpiresAt = &at
	}
	return r
}
