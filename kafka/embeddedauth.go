package kafka

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// SASL is how a client authenticates to the brokers.
type SASL struct {
	// Mechanism is SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN.
	Mechanism string
	User      string
	Password  string
}

// The SASL mechanisms a Config may name.
const (
	SASLScramSHA512 = "SCRAM-SHA-512"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLPlain       = "PLAIN"
)

// String names the mechanism and the user, never the password.
func (s SASL) String() string { return s.Mechanism + " user " + s.User }

// GoString is String, so that %#v does not print the password either.
func (s SASL) GoString() string { return s.String() }

func (s SASL) validate() error {
	switch s.Mechanism {
	case SASLScramSHA512, SASLScramSHA256, SASLPlain:
	default:
		return fmt.Errorf("kafka.sasl.mechanism: %q is not one of %s, %s, %s", s.Mechanism, SASLScramSHA512, SASLScramSHA256, SASLPlain)
	}
	if s.User == "" {
		return errors.New("kafka.sasl.user: must not be empty")
	}
	return nil
}

// embeddedUser is the one user of the embedded broker.
const embeddedUser = "shoal"

// The properties of the credentials file (librdkafka's names, so that
// `kcat -F` reads the file as it is).
const (
	propProtocol  = "security.protocol"
	propMechanism = "sasl.mechanisms"
	propUser      = "sasl.username"
	propPassword  = "sasl.password"
)

// The properties of the Java client's file (JavaCredentialsName). The Java
// client knows none of librdkafka's SASL names and librdkafka refuses
// sasl.jaas.config, so one file cannot serve both.
const (
	propJavaMechanism = "sasl.mechanism"
	propJavaJAAS      = "sasl.jaas.config"
)

// loadOrCreateCredentials reads the embedded broker's credentials from
// path, or makes them (a random password of 256 bits) and writes them
// there with mode 0600 when the file does not exist yet. They stay the
// same across restarts, so that tools configured with them keep working.
func loadOrCreateCredentials(path string) (*SASL, error) {
	s, err := readCredentials(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return s, err
	}
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	s = &SASL{Mechanism: SASLScramSHA512, User: embeddedUser, Password: base64.RawURLEncoding.EncodeToString(secret[:])}
	body := fmt.Sprintf("# SASL/SCRAM credentials of Shoal's embedded Kafka, made at its first start.\n"+
		"# Every client authenticates with them; keep this file private (mode 0600).\n"+
		"%s=SASL_PLAINTEXT\n%s=%s\n%s=%s\n%s=%s\n",
		propProtocol, propMechanism, s.Mechanism, propUser, s.User, propPassword, s.Password)
	if err := writePrivate(path, []byte(body)); err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	return s, nil
}

// writeJavaCredentials writes s to path in the Java client's property
// names, mode 0600, unless the file already says that. It is derived from
// the credentials file at every start, so that it follows an edit of that
// file.
func writeJavaCredentials(path string, s *SASL) error {
	body := javaCredentials(s)
	if old, err := os.ReadFile(path); err == nil && string(old) == body {
		return nil
	}
	if err := writePrivate(path, []byte(body)); err != nil {
		return fmt.Errorf("java credentials: %w", err)
	}
	return nil
}

func javaCredentials(s *SASL) string {
	module := "org.apache.kafka.common.security.scram.ScramLoginModule"
	if s.Mechanism == SASLPlain {
		module = "org.apache.kafka.common.security.plain.PlainLoginModule"
	}
	jaas := fmt.Sprintf("%s required username=%s password=%s;", module, jaasQuote(s.User), jaasQuote(s.Password))
	return fmt.Sprintf("# The credentials of Shoal's embedded Kafka for the Java Kafka tools\n"+
		"# (--consumer.config, --producer.config, --command-config), made from\n"+
		"# %s at every start: edit that one. librdkafka tools (kcat -F) read\n"+
		"# %s. Keep this file private (mode 0600).\n"+
		"%s=SASL_PLAINTEXT\n%s=%s\n%s=%s\n",
		CredentialsName, CredentialsName, propProtocol, propJavaMechanism, s.Mechanism, propJavaJAAS, propertiesEscape(jaas))
}

// jaasQuote quotes v as a string of a JAAS configuration.
func jaasQuote(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}

// propertiesEscape escapes v as the value of a Java properties file.
func propertiesEscape(v string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`).Replace(v)
}

// writePrivate writes data to a new file at path, mode 0600: to a
// temporary file first, renamed into place, so that a reader never sees
// half of it.
func writePrivate(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".credentials-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if err := errors.Join(werr, f.Close()); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// readCredentials reads a credentials file written by
// loadOrCreateCredentials. Its errors name the file and the property,
// never the password.
func readCredentials(path string) (*SASL, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	defer func() { _ = f.Close() }()
	s := &SASL{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("credentials %s line %d: not key=value", path, n)
		}
		switch strings.TrimSpace(k) {
		case propMechanism:
			s.Mechanism = strings.TrimSpace(v)
		case propUser:
			s.User = strings.TrimSpace(v)
		case propPassword:
			s.Password = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("credentials %s: %w", path, err)
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("credentials %s: %w", path, err)
	}
	if s.Password == "" {
		return nil, fmt.Errorf("credentials %s: %s is missing", path, propPassword)
	}
	return s, nil
}

// AttachEmbedded returns the Config of a client that reaches the embedded
// broker of another process (a running `shoal all`) whose directory is
// dir (data_dir/kafka): through its Unix socket, with its credentials.
// Both are readable only by the user who runs that broker.
func AttachEmbedded(dir string) (Config, error) {
	sock := filepath.Join(dir, SocketName)
	if fi, err := os.Stat(sock); err != nil {
		return Config{}, fmt.Errorf("attach embedded kafka: %w (is `shoal all` running with this data dir?)", err)
	} else if fi.Mode().Type() != fs.ModeSocket {
		return Config{}, fmt.Errorf("attach embedded kafka: %s is not a socket", sock)
	}
	s, err := readCredentials(filepath.Join(dir, CredentialsName))
	if err != nil {
		return Config{}, fmt.Errorf("attach embedded kafka: %w", err)
	}
	var d net.Dialer
	return Config{
		Brokers: []string{embeddedAddr{}.String()},
		SASL:    s,
		// Whatever broker address the metadata names, it is this one.
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", sock)
		},
	}, nil
}

// toolListener is the embedded broker's listener as kfake sees it: the
// connections of stock Kafka tools, which come over TCP, are answered
// through toolConn. In-process and Unix socket connections are Shoal's
// own franz-go clients and are left alone.
type toolListener struct{ *inprocListener }

func (l toolListener) Accept() (net.Conn, error) {
	c, err := l.inprocListener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		return &toolConn{Conn: tc}, nil
	}
	return c, err
}

// toolConn rewrites the few responses of kfake that stock Kafka tools
// refuse, as fixResponse says. It follows the frames of both directions:
// the requests read (a request's size is followed by its key, version
// and correlation ID) and the responses written (size, correlation ID).
// Every other byte passes through unchanged.
type toolConn struct {
	net.Conn

	mu    sync.Mutex // guards asked: Read and Write run in goroutines of their own
	asked []toolAsk  // requests read whose responses are rewritten, not yet answered
	req   frameCursor

	wmu   sync.Mutex // serialises Write; guards the fields below
	resp  frameCursor
	held  []byte  // a response to rewrite being gathered, whole
	holdA toolAsk // its request
	holdN int     // its bytes still to come
}

// toolAsk is a request whose response toolConn rewrites.
type toolAsk struct {
	corr         int32
	key, version int16
}

// rewritten reports whether toolConn rewrites the responses of requests
// with key.
func rewritten(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.ApiVersions, kmsg.CreateTopics, kmsg.DescribeTopicPartitions:
		return true
	}
	return false
}

// frameCursor follows one direction of a Kafka connection: frames of a
// 4-byte big-endian size and that many bytes.
type frameCursor struct {
	head [12]byte // the current frame's first bytes
	n    int      // of head filled
	want int      // of head wanted
	left int      // bytes of the current frame after head
}

// maxHeldResponse bounds the response toolConn gathers to rewrite (kfake's
// ApiVersions response is under 1 KiB); a larger one passes unchanged.
const maxHeldResponse = 1 << 20

func (c *toolConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.readRequests(p[:n])
	return n, err
}

// readRequests notes the requests among the bytes b read whose responses
// are rewritten.
func (c *toolConn) readRequests(b []byte) {
	r := &c.req
	for len(b) > 0 {
		if r.n == 0 && r.left > 0 { // the rest of a request
			k := min(r.left, len(b))
			r.left -= k
			b = b[k:]
			continue
		}
		if r.n < 4 {
			k := copy(r.head[r.n:4], b)
			r.n += k
			b = b[k:]
			if r.n < 4 {
				return
			}
			size := int(binary.BigEndian.Uint32(r.head[:4]))
			r.want = 4 + min(size, 8) // size, key, version, correlation ID
			r.left = size - (r.want - 4)
		}
		k := copy(r.head[r.n:r.want], b)
		r.n += k
		b = b[k:]
		if r.n < r.want {
			return
		}
		r.n = 0
		if key := int16(binary.BigEndian.Uint16(r.head[4:6])); r.want == 12 && rewritten(key) {
			c.mu.Lock()
			c.asked = append(c.asked, toolAsk{
				key:     key,
				version: int16(binary.BigEndian.Uint16(r.head[6:8])),
				corr:    int32(binary.BigEndian.Uint32(r.head[8:12])),
			})
			c.mu.Unlock()
		}
	}
}

// answers returns the request that the response with correlation ID corr
// answers, if it is the oldest one not yet answered that toolConn
// rewrites (kfake answers a connection's requests in order).
func (c *toolConn) answers(corr int32) (toolAsk, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.asked) == 0 || c.asked[0].corr != corr {
		return toolAsk{}, false
	}
	a := c.asked[0]
	c.asked = c.asked[1:]
	return a, true
}

// Write writes p, responses of the broker, with the responses of the
// requests noted by readRequests rewritten. Other bytes pass through in
// as few pieces as they came: kfake writes one whole response per call.
func (c *toolConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var out net.Buffers
	w := &c.resp
	run := 0 // p[run:i] passes through unchanged
	for i := 0; i < len(p); {
		switch {
		case c.held != nil:
			k := min(c.holdN, len(p)-i)
			c.held = append(c.held, p[i:i+k]...)
			c.holdN -= k
			i += k
			run = i
			if c.holdN == 0 {
				out = append(out, fixResponse(c.held, c.holdA.key, c.holdA.version))
				c.held = nil
			}
		case w.left > 0:
			k := min(w.left, len(p)-i)
			w.left -= k
			i += k
		default: // a response's size and correlation ID
			start, split := i, w.n > 0 // split: the head began in an earlier call
			k := copy(w.head[w.n:8], p[i:])
			w.n += k
			i += k
			if w.n < 8 { // it ends in the next call
				if start > run {
					out = append(out, p[run:start])
				}
				run = i
				continue
			}
			w.n = 0
			size := int(binary.BigEndian.Uint32(w.head[:4]))
			corr := int32(binary.BigEndian.Uint32(w.head[4:8]))
			if a, ok := c.answers(corr); ok && size >= 4 && size <= maxHeldResponse {
				if start > run {
					out = append(out, p[run:start])
				}
				run = i
				c.held = append(make([]byte, 0, 4+size), w.head[:8]...)
				c.holdA, c.holdN = a, size-4
				if c.holdN == 0 {
					out = append(out, fixResponse(c.held, a.key, a.version))
					c.held = nil
				}
				continue
			}
			w.left = max(size-4, 0)
			if split { // its first bytes were kept from the earlier call
				out = append(out, append([]byte(nil), w.head[:8]...))
				run = i
			} // else the head passes through with the bytes around it
		}
	}
	if run < len(p) {
		out = append(out, p[run:])
	}
	if _, err := out.WriteTo(c.Conn); err != nil {
		return 0, err
	}
	return len(p), nil
}

// fixResponse returns frame (size, correlation ID, header tags when
// flexible, body), the response to a request of key and version, with
// what stock tools refuse of kfake's answer changed; frame itself when
// there is nothing to change:
//
//   - ApiVersions advertises SaslHandshake from version 0. kfake serves
//     version 1 only (version 0 sends the SASL tokens unframed) and says
//     so, but librdkafka (kcat, confluent-kafka-python) uses handshakes
//     only when the range includes version 0: without it, it fails with
//     "SASL Handshake not supported by broker" and never authenticates.
//     With it, librdkafka sends version 1, the highest both sides know,
//     as the Java client does; a client that sent version 0 would be
//     disconnected by kfake, as it is without this.
//   - CreateTopics gives a created topic an empty list of configs, and
//     DescribeTopicPartitions every partition empty lists of eligible
//     leader replicas, where kfake gives none (null) and Kafka lists: the
//     Java admin client fails with a NullPointerException on null
//     (kafka-topics --create exits 1 although the topic was made,
//     kafka-topics --describe prints nothing).
func fixResponse(frame []byte, key, version int16) []byte {
	resp := kmsg.ResponseForKey(key)
	if resp == nil {
		return frame
	}
	resp.SetVersion(version)
	head := 8
	// ApiVersions responses have no header tags, even flexible ones.
	if resp.IsFlexible() && key != int16(kmsg.ApiVersions) {
		if len(frame) < 9 || frame[8] != 0 { // kfake writes none
			return frame
		}
		head = 9
	}
	if err := resp.ReadFrom(frame[head:]); err != nil {
		return frame // an ApiVersions answer of UNSUPPORTED_VERSION is v0
	}
	changed := false
	switch r := resp.(type) {
	case *kmsg.ApiVersionsResponse:
		for i := range r.ApiKeys {
			if k := &r.ApiKeys[i]; r.ErrorCode == 0 && k.ApiKey == int16(kmsg.SASLHandshake) && k.MinVersion == 1 {
				k.MinVersion = 0
				changed = true
			}
		}
	case *kmsg.CreateTopicsResponse:
		for i := range r.Topics {
			if t := &r.Topics[i]; version >= 5 && t.ErrorCode == 0 && t.Configs == nil {
				t.Configs = []kmsg.CreateTopicsResponseTopicConfig{}
				changed = true
			}
		}
	case *kmsg.DescribeTopicPartitionsResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				p := &r.Topics[i].Partitions[j]
				if p.EligibleLeaderReplicas == nil {
					p.EligibleLeaderReplicas = []int32{}
					changed = true
				}
				if p.LastKnownELR == nil {
					p.LastKnownELR = []int32{}
					changed = true
				}
			}
		}
	}
	if !changed {
		return frame
	}
	out := resp.AppendTo(append(make([]byte, 0, len(frame)+8), frame[:head]...))
	binary.BigEndian.PutUint32(out[:4], uint32(len(out)-4))
	return out
}
