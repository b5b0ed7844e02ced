package replay

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/kafka"
)

// MQTTTarget is where an MQTTSink publishes:
// mqtt://[user[:password]@]host:port[/prefix][?client_id=ID] (mqtts://
// over TLS, verified against the system's roots).
type MQTTTarget struct {
	Addr, User, Password string
	TLS                  bool
	// Prefix is put before each message's topic ("replay" publishes
	// "a/b" as "replay/a/b"); empty: the topic as it was.
	Prefix string
	// ClientID is the client identifier to connect with (the URL's
	// client_id query parameter); its tenant is the tenant the messages
	// are published in, on a Shoal with tenants. Empty: DialMQTT makes one.
	ClientID string
}

// ParseMQTTTarget reads --to's mqtt:// or mqtts:// URL.
func ParseMQTTTarget(s string) (MQTTTarget, error) {
	u, err := url.Parse(s)
	if err != nil {
		return MQTTTarget{}, fmt.Errorf("--to: %w", err)
	}
	var t MQTTTarget
	switch u.Scheme {
	case "mqtt":
	case "mqtts":
		t.TLS = true
	default:
		return MQTTTarget{}, fmt.Errorf("--to: %q is not an mqtt:// or mqtts:// URL", s)
	}
	if u.Host == "" {
		return MQTTTarget{}, fmt.Errorf("--to: %q names no host", s)
	}
	t.Addr = u.Host
	if u.Port() == "" {
		port := "1883"
		if t.TLS {
			port = "8883"
		}
		t.Addr = net.JoinHostPort(u.Hostname(), port)
	}
	if u.User != nil {
		t.User = u.User.Username()
		t.Password, _ = u.User.Password()
	}
	t.Prefix = strings.Trim(u.Path, "/")
	t.ClientID = u.Query().Get("client_id")
	return t, nil
}

// MQTTSink publishes the selected publish events again, to another broker
// or to Shoal, at most Rate a second: the message's topic (under the
// target's prefix), payload, QoS and 5.0 properties, with the user
// property shoal-replayed-from naming the original message identifier.
// Retain is not set again (a replay must not replace the target's
// retained messages). Other events are skipped (Skipped counts them).
type MQTTSink struct {
	c       *paho.Client
	prefix  string
	every   time.Duration
	next    time.Time
	timeout time.Duration
	// Published and Skipped count the events.
	Published, Skipped int64
}

// DialMQTT connects to t as a 5.0 client with a clean session, as
// t.ClientID or else as "shoalreplay" and a random suffix (no tenant
// separator: the default tenant).
func DialMQTT(ctx context.Context, t MQTTTarget, rate float64) (*MQTTSink, error) {
	var d net.Dialer
	d.Timeout = 10 * time.Second
	var nc net.Conn
	var err error
	if t.TLS {
		host, _, _ := net.SplitHostPort(t.Addr)
		nc, err = (&tls.Dialer{NetDialer: &d, Config: &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}}).DialContext(ctx, "tcp", t.Addr)
	} else {
		nc, err = d.DialContext(ctx, "tcp", t.Addr)
	}
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", t.Addr, err)
	}
	id := t.ClientID
	if id == "" {
		var rnd [6]byte
		_, _ = rand.Read(rnd[:])
		id = "shoalreplay" + hex.EncodeToString(rnd[:])
	}
	c := paho.NewClient(paho.ClientConfig{Conn: nc, OnClientError: func(error) {}})
	cp := &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30}
	if t.User != "" {
		cp.Username, cp.UsernameFlag = t.User, true
	}
	if t.Password != "" {
		cp.Password, cp.PasswordFlag = []byte(t.Password), true
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ca, err := c.Connect(cctx, cp)
	if err != nil {
		_ = nc.Close()
		if ca != nil {
			return nil, fmt.Errorf("connect to %s: refused, reason code 0x%02x", t.Addr, ca.ReasonCode)
		}
		return nil, fmt.Errorf("connect to %s: %w", t.Addr, err)
	}
	s := &MQTTSink{c: c, prefix: t.Prefix, timeout: 30 * time.Second}
	if rate > 0 {
		s.every = time.Duration(float64(time.Second) / rate)
	}
	return s, nil
}

// Write publishes e's message, waiting for its turn under the rate and,
// at QoS 1 and 2, for the broker's acknowledgement.
func (s *MQTTSink) Write(e *Event) error {
	m := e.Message
	if e.Type != kafka.EventPublish || m == nil {
		s.Skipped++
		return nil
	}
	if s.every > 0 {
		now := time.Now()
		if s.next.After(now) {
			time.Sleep(s.next.Sub(now))
		} else {
			s.next = now
		}
		s.next = s.next.Add(s.every)
	}
	topic := m.Topic
	if s.prefix != "" {
		topic = s.prefix + "/" + topic
	}
	props := &paho.PublishProperties{
		ContentType: m.ContentType, ResponseTopic: m.ResponseTopic, CorrelationData: m.CorrelationData,
	}
	if m.PayloadUtf8 {
		one := byte(1)
		props.PayloadFormat = &one
	}
	for _, up := range m.UserProperties {
		props.User.Add(up.Key, up.Value)
	}
	if id := e.Env.GetMessageId(); id != nil {
		props.User.Add("shoal-replayed-from", kafka.FormatMessageID(id))
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	if _, err := s.c.Publish(ctx, &paho.Publish{Topic: topic, QoS: byte(min(m.Qos, 2)), Payload: m.Payload, Properties: props}); err != nil {
		return fmt.Errorf("publish %s: %w", topic, err)
	}
	s.Published++
	return nil
}

// Flush has nothing to do: every publish was written when Write returned.
func (s *MQTTSink) Flush() error { return nil }

// Close disconnects.
func (s *MQTTSink) Close() error {
	err := s.c.Disconnect(&paho.Disconnect{})
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
