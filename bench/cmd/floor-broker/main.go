package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"sync"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18850", "listen address (loopback)")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintln(os.Stderr, "floor-broker: listening on", ln.Addr())
	b := &broker{subs: make(map[string][]*conn)}
	for {
		nc, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go b.serve(nc)
	}
}

// broker is the subscriptions: exact topic names to connections.
type broker struct {
	mu   sync.RWMutex
	subs map[string][]*conn
}

// conn is one client's connection; mu serialises writes to it.
type conn struct {
	nc net.Conn
	mu sync.Mutex
}

// write writes b whole to c; a failed write closes c, whose reader then
// ends.
func (c *conn) write(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.nc.Write(b); err != nil {
		_ = c.nc.Close()
	}
}

var errMalformed = errors.New("malformed packet")

// maxPacket bounds a packet's body: larger ones end the connection.
const maxPacket = 1 << 20

// serve reads nc's packets until it ends.
func (b *broker) serve(nc net.Conn) {
	c := &conn{nc: nc}
	defer b.drop(c)
	r := bufio.NewReaderSize(nc, 4096)
	var buf []byte
	v5 := false
	for {
		pkt, body, err := readPacket(r, buf)
		if err != nil {
			return
		}
		buf = pkt[:0]
		switch pkt[0] >> 4 {
		case 1: // CONNECT: protocol name, then its level (5: MQTT 5.0)
			if len(body) < 3 {
				return
			}
			n := int(binary.BigEndian.Uint16(body))
			if len(body) < 3+n {
				return
			}
			v5 = body[2+n] == 5
			if v5 {
				c.write([]byte{0x20, 3, 0, 0, 0})
			} else {
				c.write([]byte{0x20, 2, 0, 0})
			}
		case 3: // PUBLISH (QoS 0): forwarded as it came
			if len(body) < 2 || len(body) < 2+int(binary.BigEndian.Uint16(body)) {
				return
			}
			topic := body[2 : 2+int(binary.BigEndian.Uint16(body))]
			b.mu.RLock()
			subs := b.subs[string(topic)]
			b.mu.RUnlock()
			for _, s := range subs {
				s.write(pkt)
			}
		case 8: // SUBSCRIBE
			ack, err := b.subscribe(c, body, v5)
			if err != nil {
				return
			}
			c.write(ack)
		case 12: // PINGREQ
			c.write([]byte{0xd0, 0})
		case 14: // DISCONNECT
			return
		}
	}
}

// subscribe adds c for each topic of a SUBSCRIBE's body and returns the
// SUBACK.
func (b *broker) subscribe(c *conn, body []byte, v5 bool) ([]byte, error) {
	if len(body) < 2 {
		return nil, errMalformed
	}
	ack := []byte{0x90, 0, body[0], body[1]}
	p := 2
	if v5 { // properties: skipped
		n, k := binary.Uvarint(body[p:])
		if k <= 0 || n > uint64(len(body)-p-k) {
			return nil, errMalformed
		}
		ack = append(ack, 0)
		p += k + int(n)
	}
	for p < len(body) {
		if p+2 > len(body) {
			return nil, errMalformed
		}
		n := int(binary.BigEndian.Uint16(body[p:]))
		if p+3+n > len(body) {
			return nil, errMalformed
		}
		topic := string(body[p+2 : p+2+n])
		p += 3 + n // the name, then its options byte
		b.mu.Lock()
		b.subs[topic] = append(b.subs[topic], c)
		b.mu.Unlock()
		ack = append(ack, 0) // granted QoS 0
	}
	if len(ack)-2 > 127 {
		return nil, errMalformed
	}
	ack[1] = byte(len(ack) - 2)
	return ack, nil
}

// drop closes c and removes its subscriptions.
func (b *broker) drop(c *conn) {
	_ = c.nc.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	for t, subs := range b.subs {
		for i, s := range subs {
			if s == c {
				b.subs[t] = append(subs[:i:i], subs[i+1:]...)
				break
			}
		}
	}
}

// readPacket reads one packet into buf (grown as needed) and returns it
// whole, fixed header included, and its body.
func readPacket(r *bufio.Reader, buf []byte) (pkt, body []byte, err error) {
	h, err := r.ReadByte()
	if err != nil {
		return nil, nil, err
	}
	pkt = append(buf[:0], h)
	n, mul := 0, 1
	for i := 0; ; i++ {
		c, err := r.ReadByte()
		if err != nil {
			return nil, nil, err
		}
		if i == 4 {
			return nil, nil, errMalformed
		}
		pkt = append(pkt, c)
		n += int(c&127) * mul
		if c&128 == 0 {
			break
		}
		mul *= 128
	}
	if n > maxPacket {
		return nil, nil, errMalformed
	}
	hl := len(pkt)
	pkt = append(pkt, make([]byte, n)...)
	if _, err := io.ReadFull(r, pkt[hl:]); err != nil {
		return nil, nil, err
	}
	return pkt, pkt[hl:], nil
}
