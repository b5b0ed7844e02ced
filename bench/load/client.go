package load

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// errStopped is returned by a publish cut short by the end of the run.
var errStopped = errors.New("run stopped")

// dialConfig says how to open one client connection.
type dialConfig struct {
	Addr       string
	ClientID   string
	Version    packet.Version
	KeepAlive  uint16 // seconds
	ReadBuf    int    // initial read buffer (it grows to the largest packet)
	WriteBuf   int
	ReceiveMax uint16 // ours, announced in a 5.0 CONNECT; 0 = not sent
	Username   string // sent with Password when not empty
	Password   string
	// SessionExpiry is the 5.0 CONNECT's Session Expiry Interval in
	// seconds; 0 = not sent (the session ends with the connection).
	SessionExpiry uint32
	// Resume sends Clean Start 0: the broker takes up the client's session.
	Resume bool
	// EndSession makes close's DISCONNECT end a persistent session (a 5.0
	// Session Expiry Interval of 0) instead of leaving it to expire.
	EndSession bool
}

// conn is a minimal MQTT client connection: the handshake is synchronous,
// then one reader goroutine decodes in place and answers acknowledgements,
// and one owner goroutine (a publisher) writes PUBLISH packets. Writes go
// through a buffered writer under mu; the reader flushes once its read
// buffer is empty, the publisher when it is about to wait.
type conn struct {
	nc             net.Conn
	rd             *packet.Reader
	version        packet.Version
	brokerRecvMax  uint16
	sessionPresent bool // the CONNACK's
	endSession     bool // dialConfig.EndSession

	// Reader goroutine only.
	in        packet.Publish
	ack       packet.Ack
	onPublish func(p *packet.Publish) // set before start; must not keep p's slices

	mu      sync.Mutex
	w       *bufio.Writer
	scratch []byte
	dirty   bool
	out     packet.Publish // publisher's reused packet
	ids     *idSet         // packet identifiers in flight (publishers of QoS 1/2)
	nextID  uint16

	slots   chan struct{} // one token per PUBLISH in flight (QoS 1/2)
	refused atomic.Uint64 // PUBACK/PUBREC with a failure reason code
	acked   atomic.Uint64 // PUBACK/PUBCOMP with a success reason code

	closing   atomic.Bool
	closeOnce sync.Once
	done      chan struct{} // closed when the reader goroutine ends
	err       error         // why the reader ended; read after done
}

// dial opens a connection and completes the CONNECT / CONNACK handshake
// within the context's deadline.
func dial(ctx context.Context, cfg dialConfig) (*conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", cfg.Addr, err)
	}
	c := &conn{
		nc:         nc,
		rd:         packet.NewReader(nc, cfg.ReadBuf),
		version:    cfg.Version,
		endSession: cfg.EndSession && cfg.SessionExpiry > 0,
		w:          bufio.NewWriterSize(nc, cfg.WriteBuf),
		done:       make(chan struct{}),
	}
	if err := c.handshake(ctx, cfg); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("connect %s as %s: %w", cfg.Addr, cfg.ClientID, err)
	}
	return c, nil
}

func (c *conn) handshake(ctx context.Context, cfg dialConfig) error {
	if dl, ok := ctx.Deadline(); ok {
		if err := c.nc.SetDeadline(dl); err != nil {
			return fmt.Errorf("set handshake deadline: %w", err)
		}
	}
	p := packet.Connect{
		Version:    cfg.Version,
		CleanStart: !cfg.Resume,
		KeepAlive:  cfg.KeepAlive,
		ClientID:   []byte(cfg.ClientID),
	}
	if cfg.Username != "" {
		p.UsernameFlag, p.Username = true, []byte(cfg.Username)
		p.PasswordFlag, p.Password = true, []byte(cfg.Password)
	}
	if cfg.Version == packet.V5 && cfg.SessionExpiry > 0 {
		p.Props.SessionExpiry = cfg.SessionExpiry
		p.Props.Set(packet.PropSessionExpiry)
	}
	if cfg.Version == packet.V5 && cfg.ReceiveMax > 0 {
		p.Props.ReceiveMax = cfg.ReceiveMax
		p.Props.Set(packet.PropReceiveMax)
	}
	if _, err := c.w.Write(p.Append(nil, cfg.Version)); err != nil {
		return fmt.Errorf("write CONNECT: %w", err)
	}
	if err := c.w.Flush(); err != nil {
		return fmt.Errorf("write CONNECT: %w", err)
	}
	h, body, err := c.rd.ReadPacket()
	if err != nil {
		return fmt.Errorf("read CONNACK: %w", err)
	}
	if h.Type != packet.CONNACK {
		return fmt.Errorf("read CONNACK: got %s", h.Type)
	}
	var ca packet.Connack
	if err := ca.Decode(h, body, cfg.Version); err != nil {
		return fmt.Errorf("decode CONNACK: %w", err)
	}
	if ca.Code.IsError() {
		return fmt.Errorf("CONNACK refused: %s (0x%02x)", ca.Code, byte(ca.Code))
	}
	c.sessionPresent = ca.SessionPresent
	c.brokerRecvMax = 65535
	if ca.Props.Present(packet.PropReceiveMax) {
		c.brokerRecvMax = ca.Props.ReceiveMax
	}
	return c.nc.SetDeadline(time.Time{})
}

// subscribe sends one SUBSCRIBE with every filter at qos and waits for its
// SUBACK. It must be called before start.
func (c *conn) subscribe(ctx context.Context, filters []string, qos packet.QoS) error {
	if dl, ok := ctx.Deadline(); ok {
		if err := c.nc.SetDeadline(dl); err != nil {
			return fmt.Errorf("set subscribe deadline: %w", err)
		}
	}
	s := packet.Subscribe{PacketID: 1}
	for _, f := range filters {
		s.Filters = append(s.Filters, packet.Subscription{Filter: []byte(f), QoS: qos})
	}
	// Under mu: the pinger writes PINGREQs to a registered connection
	// whose reader is not running yet (the connections scenario's
	// subscriptions); unlocked, their bytes interleaved and the broker
	// closed connections as malformed.
	c.mu.Lock()
	_, err := c.w.Write(s.Append(nil, c.version))
	if err == nil {
		err = c.w.Flush()
	}
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("write SUBSCRIBE: %w", err)
	}
	h, body, err := c.rd.ReadPacket()
	for err == nil && h.Type == packet.PINGRESP { // the pinger's, before the reader runs
		h, body, err = c.rd.ReadPacket()
	}
	if err != nil {
		return fmt.Errorf("read SUBACK: %w", err)
	}
	if h.Type != packet.SUBACK {
		return fmt.Errorf("read SUBACK: got %s", h.Type)
	}
	var sa packet.Suback
	if err := sa.Decode(h, body, c.version); err != nil {
		return fmt.Errorf("decode SUBACK: %w", err)
	}
	if len(sa.Codes) != len(filters) {
		return fmt.Errorf("SUBACK: %d codes for %d filters", len(sa.Codes), len(filters))
	}
	for i, code := range sa.Codes {
		if code.IsError() {
			return fmt.Errorf("SUBACK refused %q: %s (0x%02x)", filters[i], code, byte(code))
		}
	}
	return c.nc.SetDeadline(time.Time{})
}

// enableWindow prepares c to publish at QoS 1/2 with at most window
// messages in flight, capped by the broker's receive maximum.
func (c *conn) enableWindow(window int) {
	window = max(1, min(window, int(c.brokerRecvMax), 65000))
	c.slots = make(chan struct{}, window)
	c.ids = new(idSet)
}

// start runs the reader goroutine.
func (c *conn) start() { go c.readLoop() }

func (c *conn) readLoop() {
	defer close(c.done)
	for {
		h, body, err := c.rd.ReadPacket()
		if err != nil {
			c.err = fmt.Errorf("read: %w", err)
			return
		}
		if err := c.handle(h, body); err != nil {
			c.err = err
			_ = c.nc.Close()
			return
		}
		if c.rd.Buffered() == 0 {
			c.mu.Lock()
			err := c.flushLocked()
			c.mu.Unlock()
			if err != nil {
				c.err = err
				_ = c.nc.Close()
				return
			}
		}
	}
}

func (c *conn) handle(h packet.FixedHeader, body []byte) error {
	switch h.Type {
	case packet.PUBLISH:
		if err := c.in.Decode(h, body, c.version); err != nil {
			return fmt.Errorf("decode PUBLISH: %w", err)
		}
		if c.onPublish != nil {
			c.onPublish(&c.in)
		}
		switch c.in.QoS {
		case 1:
			c.writeAck(packet.PUBACK, c.in.PacketID)
		case 2:
			c.writeAck(packet.PUBREC, c.in.PacketID)
		}
	case packet.PUBACK, packet.PUBREC, packet.PUBREL, packet.PUBCOMP:
		if err := c.ack.Decode(h, body, c.version); err != nil {
			return fmt.Errorf("decode %s: %w", h.Type, err)
		}
		id := c.ack.PacketID
		switch h.Type {
		case packet.PUBACK, packet.PUBCOMP:
			c.release(id)
		case packet.PUBREC:
			if c.ack.Code.IsError() {
				c.release(id)
			} else {
				c.writeAck(packet.PUBREL, id)
			}
		case packet.PUBREL:
			c.writeAck(packet.PUBCOMP, id)
		}
		if c.ack.Code.IsError() {
			c.refused.Add(1)
		} else if h.Type == packet.PUBACK || h.Type == packet.PUBCOMP {
			c.acked.Add(1)
		}
	case packet.PINGRESP, packet.SUBACK, packet.UNSUBACK:
	case packet.DISCONNECT:
		var d packet.Disconnect
		if err := d.Decode(h, body, c.version); err != nil {
			return fmt.Errorf("decode DISCONNECT: %w", err)
		}
		return fmt.Errorf("broker sent DISCONNECT: %s (0x%02x)", d.Code, byte(d.Code))
	default:
		return fmt.Errorf("unexpected %s from the broker", h.Type)
	}
	return nil
}

func (c *conn) writeAck(kind packet.Type, id uint16) {
	a := packet.Ack{Kind: kind, PacketID: id}
	c.mu.Lock()
	c.scratch = a.Append(c.scratch[:0], c.version)
	_, _ = c.w.Write(c.scratch) // a write error is sticky: the next flush reports it
	c.dirty = true
	c.mu.Unlock()
}

// release frees the window slot of packet identifier id.
func (c *conn) release(id uint16) {
	if c.ids == nil {
		return
	}
	c.mu.Lock()
	had := c.ids.has(id)
	c.ids.clear(id)
	c.mu.Unlock()
	if had {
		<-c.slots
	}
}

// publish writes one PUBLISH into the buffer. For QoS 1/2 it first takes a
// window slot, flushing and waiting while none is free, until stop is
// closed or the connection ends.
func (c *conn) publish(topic, payload []byte, qos packet.QoS, stop <-chan struct{}) error {
	if qos > 0 {
		select {
		case c.slots <- struct{}{}:
		default:
			if err := c.flush(); err != nil {
				return err
			}
			select {
			case c.slots <- struct{}{}:
			case <-stop:
				return errStopped
			case <-c.done:
				return c.readErr()
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out.Topic, c.out.Payload, c.out.QoS, c.out.PacketID = topic, payload, qos, 0
	if qos > 0 {
		c.out.PacketID = c.ids.take(&c.nextID)
	}
	c.scratch = c.out.AppendHeader(c.scratch[:0], c.version)
	if _, err := c.w.Write(c.scratch); err != nil {
		return fmt.Errorf("write PUBLISH: %w", err)
	}
	if _, err := c.w.Write(payload); err != nil {
		return fmt.Errorf("write PUBLISH: %w", err)
	}
	c.dirty = true
	return nil
}

// flush writes what is buffered.
func (c *conn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flushLocked()
}

func (c *conn) flushLocked() error {
	if !c.dirty {
		return nil
	}
	c.dirty = false
	if err := c.w.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// buffered returns the bytes written into the buffer but not to the
// socket.
func (c *conn) buffered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.w.Buffered()
}

// ping sends a PINGREQ.
func (c *conn) ping() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = c.w.Write([]byte{byte(packet.PINGREQ) << 4, 0}) // sticky error: Flush reports it
	c.dirty = true
	return c.flushLocked()
}

// alive reports whether the reader goroutine still runs.
func (c *conn) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// readErr returns why the reader ended, once it has.
func (c *conn) readErr() error {
	<-c.done
	if c.err == nil {
		return errors.New("connection closed")
	}
	return c.err
}

// lostErr returns why the connection ended if it ended before close was
// called, or nil.
func (c *conn) lostErr() error {
	if c.closing.Load() || c.alive() {
		return nil
	}
	return c.readErr()
}

// close sends DISCONNECT (best effort, within a second; ending the
// session if endSession) and closes the socket. Safe to call more than
// once and from any goroutine.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.closing.Store(true)
		if c.alive() {
			_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second)) // best effort on the way out
			d := packet.Disconnect{}
			if c.endSession && c.version == packet.V5 {
				d.Props.SessionExpiry = 0
				d.Props.Set(packet.PropSessionExpiry)
			}
			c.mu.Lock()
			_, _ = c.w.Write(d.Append(nil, c.version))
			_ = c.w.Flush()
			c.mu.Unlock()
		}
		_ = c.nc.Close()
	})
}

// idSet is the set of packet identifiers in flight.
type idSet [65536 / 64]uint64

func (s *idSet) has(id uint16) bool { return s[id/64]&(1<<(id%64)) != 0 }
func (s *idSet) clear(id uint16)    { s[id/64] &^= 1 << (id % 64) }

// take marks and returns the first free identifier after *next (never 0).
// The window is smaller than the identifier space, so one is free.
func (s *idSet) take(next *uint16) uint16 {
	for range 65536 {
		*next++
		if *next == 0 {
			*next = 1
		}
		if !s.has(*next) {
			s[*next/64] |= 1 << (*next % 64)
			return *next
		}
	}
	panic("load: no free packet identifier") // unreachable: the window is below 65,000
}
