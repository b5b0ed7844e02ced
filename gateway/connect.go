package gateway

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// CONNECT: the handshake reads the client's CONNECT, asks the session
// service for the session (a Connect record on shoal.sessions, answered by
// a ConnectResult on the gateway's slot; abandonConnect when the gateway
// gives up waiting) and queues the CONNACK.

// handshake reads CONNECT, asks the session service, and answers CONNACK.
// It reports whether the connection is established. client is the
// client's address, for the failure delay and the Connect event (its log
// lines have c.clientAddr, the same: connlog.go). Its steps: readConnect, authenticate
// (authn.go), the will's checks (those of a PUBLISH), identify,
// takeOptions, askSession (the request from connectRequest),
// restoreSubscriptions, then connack and queueConnack.
func (c *conn) handshake(ctx context.Context, client net.Addr, cert *x509.Certificate) bool {
	g := c.g
	var cp packet.Connect
	if !c.readConnect(&cp) {
		return false
	}
	if !c.authenticate(&cp, client, cert) {
		return false
	}
	if cp.WillFlag {
		if code := c.refuseMessage(cp.WillTopic, &cp.WillProps, cp.WillPayload); code != 0 {
			c.refuseFor(causeWillRefused, code, "client_id", string(cp.ClientID), "topic", string(cp.WillTopic))
			return false
		}
	}
	assigned, ok := c.identify(&cp)
	if !ok || !c.authorize(&cp) {
		return false
	}
	serverKA, ok := c.takeOptions(&cp)
	if !ok {
		return false
	}
	if !c.admit() { // the tenant's connection limits (quota.go)
		return false
	}
	if g.kafkaCut.Load() { // nothing can answer the request (kafkawatch.go)
		c.refuseFor(causeKafkaUnreachable, packet.CodeServerUnavailable)
		return false
	}
	c.connectedAt = g.clock().UnixNano()
	res, err := g.askSession(ctx, c, c.connectRequest(&cp, client))
	if err != nil {
		c.refuseFor(causeSessionUnavailable, packet.CodeServerUnavailable, "detail", "connect not answered", "err", err)
		return false
	}
	if res.ReasonCode != 0 {
		c.refuseFor(causeSessionRefused, ReasonCodeOf(res.ReasonCode))
		return false
	}
	// Accepted: the slot consumer registered the connection. From here a
	// failure must also unregister it and report its end, as clean: the
	// client gets no CONNACK, so it never had a connection whose loss its
	// will would announce.
	accepted := false
	defer func() {
		if !accepted {
			c.finish(ctx, true, packet.CodeServerUnavailable, nil)
		}
	}()
	if err := c.restoreSubscriptions(ctx, res.Subscriptions); err != nil {
		c.refuseFor(causeSessionUnavailable, packet.CodeServerUnavailable, "detail", "rebind resumed session", "err", err)
		return false
	}
	c.resumed = res.SessionPresent
	ack := c.connack(res, assigned, serverKA)
	if g.beforeConnack != nil {
		g.beforeConnack(c)
	}
	accepted = true
	// Counted before the CONNACK is queued: a client that has read its
	// CONNACK finds its connect counted (TestConnectsByReason).
	g.met.connected(c, packet.CodeSuccess)
	c.queueConnack(&ack)
	return true
}

// readConnect reads the connection's first packet, which must be a
// CONNECT, into cp, within Config.ConnectTimeout. A CONNECT that does not
// decode is answered where the specification wants it (a 5.0 client; an
// unsupported protocol version). cp's byte slices alias the read buffer
// until the next read.
func (c *conn) readConnect(cp *packet.Connect) bool {
	g := c.g
	_ = c.nc.SetReadDeadline(g.clock().Add(g.cfg.ConnectTimeout))
	h, body, err := c.rd.ReadPacket()
	if err != nil {
		c.logNoConnect(err)
		return false
	}
	if h.Type != packet.CONNECT {
		c.logClose(context.Background(), packet.CodeProtocolError, causeProtocol, "detail", "first packet is not CONNECT", "type", h.Type)
		return false
	}
	if err := cp.Decode(h, body, 0); err != nil {
		code := packet.CodeOf(err)
		c.logClose(context.Background(), code, causeProtocol, "detail", "CONNECT: "+detailOf(err))
		switch {
		case cp.Version == packet.V5:
			c.refuse(code, packet.V5)
		case code == packet.CodeUnsupportedProtocolVersion:
			// [MQTT-3.1.2-2]: answer 0x01 in the 3.1.1 format.
			c.refuse(code, packet.V311)
		}
		return false
	}
	c.version = cp.Version
	// A new client may subscribe next: readers yield for a while (order.go).
	g.order.stir(g.clock().UnixNano())
	return true
}

// identify sets the connection's client identifier (one assigned, and
// returned as assigned, when the client sent none), its tenant, and the
// keys and counters that follow from them. A 3.1.1 client without an
// identifier must start a clean session, or it is refused; a client with
// an identity (c.ident) may use only identifiers of the identity's tenant.
func (c *conn) identify(cp *packet.Connect) (assigned string, ok bool) {
	g := c.g
	clientID := string(cp.ClientID)
	if clientID == "" {
		if c.version != packet.V5 && !cp.CleanStart {
			c.refuseFor(causeClientID, packet.CodeClientIdentifierNotValid, "detail", "no client identifier without clean session")
			return "", false
		}
		assigned = newClientID(g.cfg.TenantSeparator)
		if c.ident != nil && c.ident.Tenant != "" {
			// An identity's assigned identifier is in its tenant.
			assigned = c.ident.Tenant + g.cfg.TenantSeparator + assigned
		}
		clientID = assigned
	}
	tenant := Tenant(clientID, g.cfg.TenantSeparator)
	if c.ident != nil && tenant != c.ident.Tenant {
		// An identity uses the client identifiers of its own tenant only.
		c.refuseFor(causeClientID, packet.CodeClientIdentifierNotValid, "detail", "client identifier of another tenant",
			"client_id", clientID, "user", c.ident.Name, "user_tenant", c.ident.Tenant)
		return "", false
	}
	// The tenant and the client id are views of the key: one allocation
	// that lives as long as the connection, not three.
	c.clientsKey = clientKey(tenant, clientID)
	c.tenant, c.clientID = c.clientsKey[:len(tenant)], c.clientsKey[len(tenant)+1:]
	c.ts = g.tenantStats(c.tenant)
	c.clientRecordKey = kafka.Key(c.tenant, c.clientID)
	return assigned, true
}

// takeOptions takes the limits and options the client asked for: session
// expiry, receive maximum, maximum packet size, topic aliases, problem
// information and keep alive, which Config.MaxKeepAlive caps for a 5.0
// client (serverKA: CONNACK says so). A client asking for enhanced
// authentication is refused: it is not offered.
func (c *conn) takeOptions(cp *packet.Connect) (serverKA, ok bool) {
	g := c.g
	v5 := c.version == packet.V5
	c.clientRecvMax, c.clientMaxPacket, c.problemInfo = maxWindow, packet.MaxRemainingLength+5, true
	if cp.CleanStart {
		c.sessionExpiry = 0
	} else {
		c.sessionExpiry = kafka.SessionExpiryNever
	}
	if v5 {
		pr := &cp.Props
		c.sessionExpiry = 0
		if pr.Present(packet.PropSessionExpiry) {
			c.sessionExpiry = pr.SessionExpiry
		}
		if pr.Present(packet.PropReceiveMax) {
			c.clientRecvMax = min(pr.ReceiveMax, maxWindow)
		}
		if pr.Present(packet.PropMaxPacketSize) {
			c.clientMaxPacket = pr.MaxPacketSize
		}
		c.clientAliasMax = pr.TopicAliasMax
		if pr.Present(packet.PropRequestProblemInfo) {
			c.problemInfo = pr.RequestProblemInfo == 1
		}
		if pr.Present(packet.PropAuthMethod) {
			// Enhanced authentication is not offered.
			c.refuseFor(causeAuthMethod, packet.CodeBadAuthenticationMethod, "method", string(pr.AuthMethod))
			return false, false
		}
	}
	ka := time.Duration(cp.KeepAlive) * time.Second
	if max := g.cfg.MaxKeepAlive; max > 0 && (ka == 0 || ka > max) && v5 {
		ka, serverKA = max, true
	}
	c.keepAlive = ka
	return serverKA, true
}

// connectRequest is the Connect event that asks the session service for
// the client's session, with the client's will and its network
// address (client: the socket's peer or a PROXY header's source).
func (c *conn) connectRequest(cp *packet.Connect, client net.Addr) *eventspb.Connect {
	g := c.g
	req := &eventspb.Connect{
		Route:           &eventspb.Route{Slot: g.slot.Load(), Connection: c.id},
		CleanStart:      cp.CleanStart,
		SessionExpiryS:  c.sessionExpiry,
		ProtocolVersion: uint32(c.version),
		Username:        string(cp.Username),
		RequestId:       g.reqSeq.Add(1),
	}
	if client != nil {
		req.ClientAddress = client.String()
	}
	if c.ident != nil {
		// The proven identity, not what the client wrote (a token's or a
		// certificate's client may send any user name, or none).
		req.Username = c.ident.Name
	}
	if cp.WillFlag {
		req.Will = &eventspb.Will{Message: willMessage(cp, g.clock())}
		if c.version == packet.V5 {
			req.Will.DelayIntervalS = cp.WillProps.WillDelay
			if m := req.Will.Message; m.HasExpiry {
				// The interval starts when the will is published.
				iv := cp.WillProps.MessageExpiry
				req.Will.ExpiryIntervalS = &iv
				m.HasExpiry, m.ExpiresAtMs = false, 0
			}
		}
	}
	return req
}

// restoreSubscriptions takes over the subscriptions of a resumed session
// (subs, from the session service's answer): the connection's own copy,
// and a move to this connection in every router shard before CONNACK
// (rebind), so that whatever is published after CONNACK is routed here.
func (c *conn) restoreSubscriptions(ctx context.Context, subs []*eventspb.SessionSubscription) error {
	if len(subs) == 0 {
		return nil
	}
	c.subs = make(map[string]*eventspb.SubscriptionOptions, len(subs))
	for _, s := range subs {
		c.subs[s.Filter] = s.Options
	}
	return c.rebind(ctx, subs)
}

// connack is the CONNACK of an accepted connection. In 5.0 it states the
// gateway's limits, the identifier assigned to the client (assigned), the
// server keep alive (serverKA) and how many queued messages the session's
// inbox dropped while the client was away.
func (c *conn) connack(res *eventspb.ConnectResult, assigned string, serverKA bool) packet.Connack {
	g := c.g
	ack := packet.Connack{SessionPresent: res.SessionPresent}
	if c.version == packet.V5 {
		p := &ack.Props
		p.ReceiveMax = g.cfg.ReceiveMaximum
		p.Set(packet.PropReceiveMax)
		p.MaxPacketSize = g.cfg.MaxPacketSize
		p.Set(packet.PropMaxPacketSize)
		p.TopicAliasMax = g.cfg.TopicAliasMaximum
		p.Set(packet.PropTopicAliasMax)
		if assigned != "" {
			p.AssignedClientID = []byte(assigned)
			p.Set(packet.PropAssignedClientID)
		}
		if serverKA {
			p.ServerKeepAlive = uint16(c.keepAlive / time.Second)
			p.Set(packet.PropServerKeepAlive)
		}
		if res.InboxDropped > 0 && c.problemInfo {
			p.ReasonString = []byte(strconv.FormatUint(uint64(res.InboxDropped), 10) +
				" queued messages were dropped while offline: the session's inbox was full")
			p.Set(packet.PropReasonString)
		}
	}
	return ack
}

// queueConnack queues the CONNACK, after which deliveries may be written.
// A close asked for while it was not queued yet follows it at once
// (closeLater); otherwise the deliveries that came before it follow it, in
// their order.
func (c *conn) queueConnack(ack *packet.Connack) {
	c.mu.Lock()
	c.useFlow()
	c.out.b = ack.Append(c.out.b, c.version)
	c.ready = true
	closeNow, code := c.closeAfterConnack, c.closeCode
	c.earlyDraining = !closeNow && len(c.early) > 0
	c.mu.Unlock()
	if closeNow {
		// Closed while the CONNACK was not queued yet (taken over by a
		// newer connection, the gateway stopping): the client gets its
		// CONNACK, then the DISCONNECT [MQTT-3.2.0-1]; deliveries held
		// for it go back with the connection's end (finish).
		c.closeWrite(code)
		return
	}
	if c.g.afterConnack != nil {
		c.g.afterConnack(c)
	}
	// Deliveries that came before CONNACK follow it, in their order, and
	// so do those that arrive while they are delivered (earlyDraining):
	// rounds until none is left.
	now := c.g.clock()
	for {
		c.mu.Lock()
		var early []earlyDelivery
		if c.flow != nil {
			early, c.early = c.early, nil
		}
		if len(early) == 0 {
			c.earlyDraining = false
			c.mu.Unlock()
			break
		}
		c.mu.Unlock()
		for _, e := range early {
			// Owned copies; fresh when they arrived.
			_, flush, sent := c.deliverFrom(nil, e.mid, e.m, e.t, now, nil, nil, true)
			if sent {
				c.add(MessagesSent, 1)
			}
			if flush {
				c.g.writes.push(c)
			}
		}
	}
	c.kickFlush()
}

// refuse answers CONNECT with a CONNACK carrying code in version v's
// format; serve then closes the socket as closeWrite does, so that the
// client reads the code.
func (c *conn) refuse(code packet.ReasonCode, v packet.Version) {
	c.g.met.connected(c, code) // counted before the client can read it
	c.writeNow((&packet.Connack{Code: code}).Append(nil, v))
	c.refused = true
}

// askSession sends the Connect request and waits for its result, at most
// Config.SessionTimeout.
//
// When it gives up (the write or the answer took too long, or the gateway
// stops), the Connect may still be written and accepted later: a failed
// ProduceSync does not mean "not written". So it ends the connection in
// the session service too: if the answer came after all (the slot consumer
// registered the connection), with the connection's own Disconnect;
// otherwise with an abandoned Disconnect, written after the Connect with
// the same key, so the idempotent producer puts it after the Connect in
// the same partition, whichever of them is written.
func (g *Gateway) askSession(ctx context.Context, c *conn, req *eventspb.Connect) (*eventspb.ConnectResult, error) {
	ch := make(chan *eventspb.ConnectResult, 1)
	g.mu.Lock()
	g.waiting[req.RequestId] = waiter{c: c, ch: ch}
	g.mu.Unlock()
	env := c.envelope(c.g.clock())
	env.Event = &eventspb.Envelope_Connect{Connect: req}
	rec := g.recs.Get()
	rec.Fill(g.topics.Sessions.Name, c.clientRecordKey, kafka.PartitionByKey, env)
	tctx, cancel := context.WithTimeout(ctx, g.cfg.SessionTimeout)
	defer cancel()
	err := g.produceSync(tctx, rec)
	if err == nil {
		g.recs.Put(rec) // written: nothing refers to it any more
		select {
		case r := <-ch:
			return r, nil // the slot consumer removed the waiter
		case <-tctx.Done():
			err = fmt.Errorf("wait for the session service's answer: %w", tctx.Err())
		}
	} else {
		err = fmt.Errorf("write connect: %w", err)
	}
	g.mu.Lock()
	delete(g.waiting, req.RequestId)
	registered := g.byID[c.id] == c
	g.mu.Unlock()
	if registered {
		// Accepted between the timeout and now.
		c.finish(ctx, true, packet.CodeServerUnavailable, nil)
	} else {
		g.abandonConnect(ctx, c)
	}
	return nil, err
}

// abandonConnect writes the abandoned Disconnect of a connection whose
// Connect the gateway gave up on (see askSession). It waits for room in
// the producer's buffer at most Config.SessionTimeout, also when the
// gateway stops; a failure is logged (the client's next connection ends
// the abandoned one anyway, by takeover).
func (g *Gateway) abandonConnect(ctx context.Context, c *conn) {
	env := c.envelope(c.g.clock())
	env.Event = &eventspb.Envelope_Disconnect{Disconnect: &eventspb.Disconnect{
		Connection: c.id,
		ReasonCode: uint32(packet.CodeServerUnavailable),
		Abandoned:  true,
	}}
	rec := kafka.NewRecord(g.topics.Sessions.Name, c.clientRecordKey, kafka.PartitionByKey, env)
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.SessionTimeout)
	defer cancel()
	g.producer(rec.Topic).Produce(pctx, rec, func(_ *kafka.Record, err error) {
		if err != nil {
			c.logWarn(context.Background(), "write abandoned connect", "connection", c.id, "err", err)
		}
	})
}

// willMessage builds the will as a message event.
func willMessage(cp *packet.Connect, now time.Time) *eventspb.Message {
	m := &eventspb.Message{
		Topic:   string(cp.WillTopic),
		Payload: append([]byte(nil), cp.WillPayload...),
		Qos:     uint32(cp.WillQoS),
		Retain:  cp.WillRetain,
	}
	if cp.Version == packet.V5 {
		setMessageProps(m, &cp.WillProps, now)
	}
	return m
}

// newClientID returns an assigned client identifier without the tenant
// separator, so that it belongs to the default tenant.
func newClientID(sep string) string {
	for {
		var b [12]byte
		_, _ = rand.Read(b[:])
		id := "shoal" + hex.EncodeToString(b[:])
		if sep == "" || !strings.Contains(id, sep) {
			return id
		}
	}
}

// waiter is a connection waiting for its ConnectResult.
type waiter struct {
	c  *conn
	ch chan *eventspb.ConnectResult
}
