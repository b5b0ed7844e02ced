package kafka

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestEmbeddedAcceptsOnlyItsProcess: by default the embedded broker opens
// no TCP listener and no socket: it advertises a host that resolves
// nowhere, and only this process's clients, through Dial and with the
// credentials, reach it.
func TestEmbeddedAcceptsOnlyItsProcess(t *testing.T) {
	before := listeningTCP(t)
	dir := t.TempDir()
	e := startEmbedded(t, dir)
	if got, want := e.Addrs(), []string{EmbeddedHost + ":9092"}; len(got) != 1 || got[0] != want[0] {
		t.Fatalf("Addrs() = %v, want %v", got, want)
	}
	if after := listeningTCP(t); after != nil && len(after) != len(before) {
		t.Errorf("the process listens on %d TCP sockets after StartEmbedded, %d before", len(after), len(before))
	}
	if _, err := os.Stat(filepath.Join(dir, SocketName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a socket exists without EmbeddedConfig.Socket: %v", err)
	}
	newTestClient(t, e, Config{}) // this process's clients reach it

	// A client that dials the network does not.
	cfg := e.ClientConfig(Config{})
	cfg.Dial = nil
	expectNoBroker(t, cfg)
	// Nor one of this process without the credentials, or with others.
	cfg = e.ClientConfig(Config{})
	cfg.SASL = nil
	expectNoBroker(t, cfg)
	cfg = e.ClientConfig(Config{})
	cfg.SASL.Password = "guess"
	expectNoBroker(t, cfg)
}

// TestEmbeddedTCPNeedsCredentials: the TCP listener of
// kafka.embedded_addr refuses a client without the SCRAM credentials.
func TestEmbeddedTCPNeedsCredentials(t *testing.T) {
	e := startEmbedded2(t, EmbeddedConfig{Dir: t.TempDir(), Addr: "127.0.0.1:0"})
	if strings.HasPrefix(e.Addrs()[0], EmbeddedHost) {
		t.Fatalf("Addrs() = %v, want the TCP address", e.Addrs())
	}
	expectNoBroker(t, Config{Brokers: e.Addrs()})
	cfg := e.ClientConfig(Config{})
	cfg.Dial = nil // over TCP
	newTestClient(t, e, cfg)
}

// expectNoBroker checks that a client with cfg cannot reach a broker.
func expectNoBroker(t *testing.T, cfg Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := NewClient(ctx, cfg, testLogger(t))
	if err == nil {
		c.Close()
		t.Fatalf("a client with %s reached the embedded broker", describe(cfg))
	}
}

func describe(cfg Config) string {
	return fmt.Sprintf("brokers %v, dial set %t, sasl %v", cfg.Brokers, cfg.Dial != nil, cfg.SASL)
}

// TestEmbeddedSocket: with EmbeddedConfig.Socket, a tool of another
// process attaches through the Unix socket in the directory (mode 0600,
// its directory 0700) with the credentials kept there (0600), which stay
// the same across restarts. A socket file left by a killed process is
// replaced; Close removes the socket.
func TestEmbeddedSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "k")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, SocketName)
	if err := os.WriteFile(sock, []byte("left by a killed process"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := startEmbedded2(t, EmbeddedConfig{Dir: dir, Socket: true})
	for path, want := range map[string]fs.FileMode{dir: fs.ModeDir | 0o700, sock: fs.ModeSocket | 0o600, filepath.Join(dir, CredentialsName): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s has mode %v, want %v", path, fi.Mode(), want)
		}
	}
	cfg, err := AttachEmbedded(dir)
	if err != nil {
		t.Fatal(err)
	}
	tool := newAttached(t, cfg)
	inproc := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := tool.ProduceSync(ctx, &Record{Topic: TopicSessions, Key: []byte("t/tool"), Partition: 0, Value: []byte("over the socket")}); err != nil {
		t.Fatal(err)
	}
	if got := consumeN(t, inproc, ConsumeConfig{Topic: TopicSessions, Partitions: []int32{0}}, 1); string(got[0].Value) != "over the socket" {
		t.Errorf("in-process client read %q", got[0].Value)
	}
	bad := cfg
	s := *cfg.SASL
	s.Password = "guess"
	bad.SASL = &s
	expectNoBroker(t, bad)
	tool.Close()

	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket after Close: %v", err)
	}
	if _, err := AttachEmbedded(dir); err == nil || !strings.Contains(err.Error(), "running") {
		t.Errorf("AttachEmbedded of a stopped broker: %v", err)
	}
	startEmbedded2(t, EmbeddedConfig{Dir: dir, Socket: true})
	again, err := AttachEmbedded(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again.SASL.Password != cfg.SASL.Password {
		t.Error("the credentials changed across a restart")
	}
	newAttached(t, again)
}

func newAttached(t *testing.T, cfg Config) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, err := NewClient(ctx, cfg, testLogger(t))
	if err != nil {
		t.Fatalf("attached client: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestEmbeddedSocketPathTooLong: a directory too deep for a socket
// address starts without the socket, saying so, rather than failing.
func TestEmbeddedSocketPathTooLong(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 120))
	e := startEmbedded2(t, EmbeddedConfig{Dir: dir, Socket: true})
	if e.socket != "" {
		t.Errorf("socket = %q", e.socket)
	}
	newTestClient(t, e, Config{})
}

// TestCredentialsErrorsKeepTheSecret: a credentials file that does not
// parse is named in the error, its password is not.
func TestCredentialsErrorsKeepTheSecret(t *testing.T) {
	const secret = "hunter2-very-secret"
	for name, body := range map[string]string{
		"mechanism": "sasl.mechanisms=GSSAPI\nsasl.username=shoal\nsasl.password=" + secret + "\n",
		"user":      "sasl.mechanisms=SCRAM-SHA-512\nsasl.password=" + secret + "\n",
		"line":      "sasl.password=" + secret + "\ngarbage\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), CredentialsName)
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := readCredentials(path)
			if err == nil {
				t.Fatal("readCredentials succeeded")
			}
			if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q", err)
			}
			if s := fmt.Sprintf("%v %+v %#v", SASL{Password: secret}, SASL{Password: secret}, SASL{Password: secret}); strings.Contains(s, secret) {
				t.Errorf("SASL printed as %q", s)
			}
		})
	}
}

// listeningTCP returns the inodes of the TCP sockets this process listens
// on (Linux; nil elsewhere).
func listeningTCP(t *testing.T) map[string]bool {
	t.Helper()
	if runtime.GOOS != "linux" {
		return nil
	}
	mine := map[string]bool{}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(l, "socket:[") {
			mine[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	listening := map[string]bool{}
	for _, table := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 9 && fields[3] == "0A" && mine[fields[9]] { // 0A: LISTEN
				listening[fields[9]] = true
			}
		}
		_ = f.Close()
	}
	return listening
}

// apiVersions sends an ApiVersions request of version v on a new
// connection made by dial and returns the response.
func apiVersions(t *testing.T, dial func(context.Context, string, string) (net.Conn, error), addr string, v int16) *kmsg.ApiVersionsResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(testTimeout))
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = v
	req.ClientSoftwareName, req.ClientSoftwareVersion = "shoal-test", "1.0"
	const corr = 7
	if _, err := conn.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("test")).AppendRequest(nil, req, corr)); err != nil {
		t.Fatal(err)
	}
	var head [8]byte
	if _, err := io.ReadFull(conn, head[:]); err != nil {
		t.Fatal(err)
	}
	if got := int32(binary.BigEndian.Uint32(head[4:])); got != corr {
		t.Fatalf("correlation ID %d, want %d", got, corr)
	}
	body := make([]byte, binary.BigEndian.Uint32(head[:4])-4)
	if _, err := io.ReadFull(conn, body); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = v
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("ApiVersions v%d response: %v", v, err)
	}
	return resp
}

// TestEmbeddedTCPAdvertisesSASLHandshakeV0: over TCP, where stock tools
// come, the broker advertises SaslHandshake versions 0 to 1, without
// which librdkafka (kcat) does not authenticate; every other key and
// field is kfake's, as the in-process path answers it.
func TestEmbeddedTCPAdvertisesSASLHandshakeV0(t *testing.T) {
	e := startEmbedded2(t, EmbeddedConfig{Dir: t.TempDir(), Addr: "127.0.0.1:0"})
	var d net.Dialer
	for v := range int16(6) {
		tcp := apiVersions(t, d.DialContext, e.Addrs()[0], v)
		inproc := apiVersions(t, e.Dial, e.Addrs()[0], v)
		var found bool
		for i, k := range tcp.ApiKeys {
			if k.ApiKey != int16(kmsg.SASLHandshake) {
				continue
			}
			found = true
			if k.MinVersion != 0 || k.MaxVersion != 1 {
				t.Errorf("v%d: SaslHandshake versions %d..%d over TCP, want 0..1", v, k.MinVersion, k.MaxVersion)
			}
			tcp.ApiKeys[i].MinVersion = 1 // as kfake says
		}
		if !found {
			t.Errorf("v%d: SaslHandshake not advertised over TCP", v)
		}
		if a, b := inproc.AppendTo(nil), tcp.AppendTo(nil); !bytes.Equal(a, b) {
			t.Errorf("v%d: ApiVersions over TCP differs from in-process beyond SaslHandshake:\n%x\n%x", v, b, a)
		}
	}
}

// responseFrame is resp as kfake writes it: size, correlation ID, header
// tags when flexible (none for ApiVersions), body.
func responseFrame(corr int32, resp kmsg.Response) []byte {
	b := []byte{0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[4:], uint32(corr))
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		b = append(b, 0)
	}
	b = resp.AppendTo(b)
	binary.BigEndian.PutUint32(b[:4], uint32(len(b)-4))
	return b
}

// toolConnCase is a request, the response kfake gives and the response
// a stock tool must receive.
type toolConnCase struct {
	req        kmsg.Request
	kfake, out kmsg.Response
}

func toolConnCases() []toolConnCase {
	apiVersions := func(v, saslMin int16, code int16) *kmsg.ApiVersionsResponse {
		r := kmsg.NewPtrApiVersionsResponse()
		r.Version, r.ErrorCode = v, code
		for _, k := range [][3]int16{{0, 3, 13}, {17, saslMin, 1}, {18, 0, 5}, {36, 0, 2}} {
			r.ApiKeys = append(r.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k[0], MinVersion: k[1], MaxVersion: k[2]})
		}
		if v >= 3 {
			r.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{{Name: "metadata.version", MinVersion: 1, MaxVersion: 27}}
		}
		return r
	}
	apiVersionsReq := func(v int16) *kmsg.ApiVersionsRequest {
		r := kmsg.NewPtrApiVersionsRequest()
		r.Version, r.ClientSoftwareName, r.ClientSoftwareVersion = v, "kcat", "1.7.1"
		return r
	}
	createTopics := func(v int16, configs []kmsg.CreateTopicsResponseTopicConfig, code int16) *kmsg.CreateTopicsResponse {
		r := kmsg.NewPtrCreateTopicsResponse()
		r.Version = v
		t := kmsg.NewCreateTopicsResponseTopic()
		t.Topic, t.ErrorCode, t.NumPartitions, t.ReplicationFactor, t.Configs = "tools.test", code, 2, 1, configs
		r.Topics = append(r.Topics, t)
		return r
	}
	createTopicsReq := func(v int16) *kmsg.CreateTopicsRequest {
		r := kmsg.NewPtrCreateTopicsRequest()
		r.Version = v
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = "tools.test", 2, 1
		r.Topics = append(r.Topics, t)
		return r
	}
	describe := func(elr, last []int32) *kmsg.DescribeTopicPartitionsResponse {
		r := kmsg.NewPtrDescribeTopicPartitionsResponse()
		t := kmsg.NewDescribeTopicPartitionsResponseTopic()
		t.Topic = kmsg.StringPtr("tools.test")
		for p := range int32(2) {
			tp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
			tp.Partition, tp.Replicas, tp.ISR = p, []int32{0}, []int32{0}
			tp.EligibleLeaderReplicas, tp.LastKnownELR = elr, last
			t.Partitions = append(t.Partitions, tp)
		}
		r.Topics = append(r.Topics, t)
		return r
	}
	metadata := kmsg.NewPtrMetadataResponse()
	metadata.Version = 12
	metadata.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: "127.0.0.1", Port: 9092}}
	metadataReq := kmsg.NewPtrMetadataRequest()
	metadataReq.Version = 12
	unsupported := kmsg.NewPtrApiVersionsResponse() // to a version above kfake's: a v0 body
	unsupported.ErrorCode = 35
	unsupported.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 5}}
	none := []kmsg.CreateTopicsResponseTopicConfig{}
	some := []kmsg.CreateTopicsResponseTopicConfig{{Name: "retention.ms", Value: kmsg.StringPtr("1000")}}
	return []toolConnCase{
		{apiVersionsReq(3), apiVersions(3, 1, 0), apiVersions(3, 0, 0)},
		{metadataReq, metadata, metadata},
		{apiVersionsReq(0), apiVersions(0, 1, 0), apiVersions(0, 0, 0)},
		{apiVersionsReq(4), apiVersions(4, 0, 0), apiVersions(4, 0, 0)}, // already from 0
		{apiVersionsReq(9), unsupported, unsupported},
		{createTopicsReq(7), createTopics(7, nil, 0), createTopics(7, none, 0)},
		{createTopicsReq(7), createTopics(7, some, 0), createTopics(7, some, 0)},
		{createTopicsReq(7), createTopics(7, nil, 36), createTopics(7, nil, 36)}, // already exists: Kafka gives none either
		{createTopicsReq(4), createTopics(4, nil, 0), createTopics(4, nil, 0)},   // no configs before v5
		{kmsg.NewPtrDescribeTopicPartitionsRequest(), describe(nil, nil), describe([]int32{}, []int32{})},
		{kmsg.NewPtrDescribeTopicPartitionsRequest(), describe([]int32{0}, []int32{}), describe([]int32{0}, []int32{})},
		{apiVersionsReq(3), apiVersions(3, 1, 0), apiVersions(3, 0, 0)},
	}
}

// scriptedConn is a net.Conn that reads in from chunks of random sizes
// and keeps what is written.
type scriptedConn struct {
	net.Conn
	in  []byte
	rng *rand.Rand
	out bytes.Buffer
}

func (c *scriptedConn) Read(p []byte) (int, error) {
	if len(c.in) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 1+c.rng.IntN(40))], c.in)
	c.in = c.in[n:]
	return n, nil
}

func (c *scriptedConn) Write(p []byte) (int, error) { return c.out.Write(p) }

// TestToolConnRewritesResponses: toolConn changes exactly the responses
// stock tools refuse, whatever the pieces it reads the requests in and is
// given the responses in; every other byte passes through.
func TestToolConnRewritesResponses(t *testing.T) {
	cases := toolConnCases()
	var reqs, kfake, want []byte
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("tool"))
	for i, c := range cases {
		corr := int32(100 + i)
		reqs = append(reqs, f.AppendRequest(nil, c.req, corr)...) // it sizes dst[:4]: only from nil
		kfake = append(kfake, responseFrame(corr, c.kfake)...)
		want = append(want, responseFrame(corr, c.out)...)
	}
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 7))
		sc := &scriptedConn{in: reqs, rng: rng}
		tc := &toolConn{Conn: sc}
		buf := make([]byte, 1+rng.IntN(64))
		for {
			if _, err := tc.Read(buf); err != nil {
				break
			}
		}
		for rest := kfake; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(120))
			if seed%2 == 0 { // one whole response a call, as kfake writes them
				n = 4 + int(binary.BigEndian.Uint32(rest))
			}
			if m, err := tc.Write(rest[:n]); err != nil || m != n {
				t.Fatalf("Write = %d, %v; want %d", m, err, n)
			}
			rest = rest[n:]
		}
		if got := sc.out.Bytes(); !bytes.Equal(got, want) {
			t.Fatalf("seed %d: written\n%x\nwant\n%x", seed, got, want)
		}
		if len(tc.asked) != 0 || tc.held != nil {
			t.Errorf("seed %d: %d requests still asked, held %t", seed, len(tc.asked), tc.held != nil)
		}
	}
}

// TestEmbeddedJavaCredentials: the Java tools' file carries the
// credentials file's in the Java client's names, mode 0600, and follows
// an edit of the credentials file at the next start.
func TestEmbeddedJavaCredentials(t *testing.T) {
	dir := t.TempDir()
	e := startEmbedded(t, dir)
	s := e.SASL()
	java := filepath.Join(dir, JavaCredentialsName)
	check := func(password string) {
		t.Helper()
		fi, err := os.Stat(java)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", java, fi.Mode())
		}
		b, err := os.ReadFile(java)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"\nsecurity.protocol=SASL_PLAINTEXT\n",
			"\nsasl.mechanism=SCRAM-SHA-512\n",
			"\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"shoal\" password=\"" + password + "\";\n",
		} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s lacks %q:\n%s", java, want, b)
			}
		}
		if strings.Contains(string(b), "sasl.mechanisms") || strings.Contains(string(b), "sasl.password") {
			t.Errorf("%s has librdkafka's names:\n%s", java, b)
		}
	}
	check(s.Password)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(dir, CredentialsName)
	b, err := os.ReadFile(creds)
	if err != nil {
		t.Fatal(err)
	}
	// A password a JAAS string and a properties file both escape.
	edited := strings.Replace(string(b), "sasl.password="+s.Password, `sasl.password=a"b\c`, 1)
	if err := os.WriteFile(creds, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	e = startEmbedded(t, dir)
	if got := e.SASL().Password; got != `a"b\c` {
		t.Fatalf("password after the edit %q", got)
	}
	check(`a\\"b\\\\c`)
}
