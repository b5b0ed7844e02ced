package broker_test

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/config"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// TestReasonCodeReadWhileSending: when Shoal closes a connection with a
// reason code, a client that is still writing reads the DISCONNECT (or the
// refusing CONNACK) off its socket, then the server's orderly end of the
// stream (EOF), and none of its writes fails. A server that closes its socket while the client's
// bytes wait unread in it resets the connection instead: the client's
// writes fail with ECONNRESET (a client library then gives up before it
// reads the reason), and a peer may drop the DISCONNECT it has not read.
func TestReasonCodeReadWhileSending(t *testing.T) {
	b := startBroker(t, func(c *config.Config) { c.Gateway.ReceiveMaximum = 5 })
	ping := (&packet.Pingreq{}).Append(nil, packet.V5)

	t.Run("receive maximum exceeded", func(t *testing.T) {
		r := dialRaw(t, mqttAddr(b), packet.V5)
		r.connect(&packet.Connect{ClientID: []byte("close-rmx"), CleanStart: true, KeepAlive: 30})
		// QoS 2 publishes never released: the sixth exceeds receive maximum 5.
		_, done := r.keepSending(func(i int) []byte {
			p := &packet.Publish{QoS: 2, PacketID: uint16(i%65535 + 1), Topic: []byte("close/rmx"), Payload: []byte("x")}
			return p.Append(nil, packet.V5)
		})
		(<-done).check(t, packet.DISCONNECT, packet.CodeReceiveMaximumExceeded)
	})

	t.Run("malformed packet", func(t *testing.T) {
		r := dialRaw(t, mqttAddr(b), packet.V5)
		r.connect(&packet.Connect{ClientID: []byte("close-malformed"), CleanStart: true, KeepAlive: 30})
		_, done := r.keepSending(func(i int) []byte {
			if i == 20 {
				return []byte{0x36, 0x05, 0x00, 0x01, 'a', 0x00, 0x01} // PUBLISH with QoS 3
			}
			return ping
		})
		(<-done).check(t, packet.DISCONNECT, packet.CodeMalformedPacket)
	})

	t.Run("session taken over", func(t *testing.T) {
		old := dialRaw(t, mqttAddr(b), packet.V5)
		old.connect(&packet.Connect{ClientID: []byte("close-takeover"), CleanStart: true, KeepAlive: 30})
		started, done := old.keepSending(func(int) []byte { return ping })
		<-started
		dialRaw(t, mqttAddr(b), packet.V5).connect(&packet.Connect{ClientID: []byte("close-takeover"), CleanStart: true, KeepAlive: 30})
		(<-done).check(t, packet.DISCONNECT, packet.CodeSessionTakenOver)
	})

	t.Run("connect refused", func(t *testing.T) {
		r := dialRaw(t, mqttAddr(b), packet.V5)
		cp := &packet.Connect{Version: packet.V5, ClientID: []byte("close-refused"), CleanStart: true, KeepAlive: 30}
		cp.Props.AuthMethod = []byte("SCRAM-SHA-1") // enhanced authentication is not offered
		cp.Props.Set(packet.PropAuthMethod)
		_, done := r.keepSending(func(i int) []byte {
			if i == 0 {
				return cp.Append(nil, packet.V5)
			}
			return ping
		})
		(<-done).check(t, packet.CONNACK, packet.CodeBadAuthenticationMethod)
	})
}

// closeSeen is how a client that kept sending saw its connection end.
type closeSeen struct {
	last     packet.Packet // the DISCONNECT or refusing CONNACK read; nil if none
	code     packet.ReasonCode
	readErr  error // what ended the reading (after last, if any)
	writeErr error // the first write that failed; nil if none
	written  int   // packets written
}

// keepSending writes next(0), next(1), … to r without pause from one
// goroutine while another reads whatever the server sends. Once it has
// read a DISCONNECT or a refusing CONNACK it stops writing, shuts down its
// own sending side (a client closing) and reads until the connection
// ends. started is closed after the first writes; done gets the outcome
// once both goroutines end. Every read and write is bounded by wait.
func (r *rawClient) keepSending(next func(i int) []byte) (started <-chan struct{}, done <-chan closeSeen) {
	st, dn := make(chan struct{}), make(chan closeSeen, 1)
	stop := make(chan struct{})
	werr := make(chan error, 1)
	var written int
	go func() {
		for i := 0; ; i++ {
			if i == 10 {
				close(st)
			}
			select {
			case <-stop:
				werr <- nil
				return
			default:
			}
			_ = r.nc.SetWriteDeadline(time.Now().Add(wait))
			if _, err := r.nc.Write(next(i)); err != nil {
				if i < 10 {
					close(st)
				}
				werr <- err
				return
			}
			written = i + 1
		}
	}()
	go func() {
		var s closeSeen
		for s.last == nil {
			p, err := r.read(wait)
			if err != nil {
				s.readErr = err
				break
			}
			switch p := p.(type) {
			case *packet.Disconnect:
				s.last, s.code = p, p.Code
			case *packet.Connack:
				if p.Code.IsError() {
					s.last, s.code = p, p.Code
				}
			}
		}
		close(stop)
		s.writeErr = <-werr
		s.written = written
		if s.last != nil {
			if tc, ok := r.nc.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			for s.readErr == nil {
				_, s.readErr = r.read(wait)
			}
		}
		dn <- s
	}()
	return st, dn
}

// check requires a packet of type typ with reason code want, then the
// server's orderly close, and no failed write.
func (s closeSeen) check(t *testing.T, typ packet.Type, want packet.ReasonCode) {
	t.Helper()
	if s.writeErr != nil {
		t.Errorf("a write failed while the client was still sending (%d packets written): %v", s.written, s.writeErr)
	}
	if s.last == nil {
		t.Fatalf("no %v read (%d packets written); reading ended with %v", typ, s.written, s.readErr)
	}
	if s.last.Type() != typ || s.code != want {
		t.Errorf("%v %v, want %v %v", s.last.Type(), s.code, typ, want)
	}
	if !errors.Is(s.readErr, io.EOF) {
		t.Errorf("after the %v the connection ended with %v, want the server's orderly close (EOF)", s.last.Type(), s.readErr)
	}
}
