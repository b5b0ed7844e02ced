package console_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The console's pages with 10,000 clients connected (make bench runs
// BenchmarkConsole10kClients). The clients are held by a child process
// (this test binary again, TestMain below), so that neither process needs
// more than the 20,000 open files one process may have here.

const (
	holderEnv   = "SHOAL_CONSOLE_HOLDER" // addr,count,prefix: be the child
	heldClients = 10000
)

func TestMain(m *testing.M) {
	if v := os.Getenv(holderEnv); v != "" {
		os.Exit(hold(v))
	}
	os.Exit(m.Run())
}

// hold connects count MQTT 3.1.1 clients to addr (keepalive 0: the broker
// never ends them for silence), says "ready" on stdout, and holds them
// until stdin closes.
func hold(spec string) int {
	parts := strings.Split(spec, ",")
	n, _ := strconv.Atoi(parts[1])
	conns := make([]net.Conn, 0, n)
	for i := range n {
		c, err := net.DialTimeout("tcp", parts[0], 10*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, "holder:", err)
			return 1
		}
		if err := connect311(c, fmt.Sprintf("%s%05d", parts[2], i)); err != nil {
			fmt.Fprintln(os.Stderr, "holder:", err)
			return 1
		}
		conns = append(conns, c)
	}
	fmt.Fprintln(os.Stdout, "ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		_ = c.Close()
	}
	return 0
}

// connect311 sends a clean CONNECT and reads a CONNACK that accepts it.
func connect311(c net.Conn, id string) error {
	var vh []byte
	vh = binary.BigEndian.AppendUint16(vh, 4)
	vh = append(vh, "MQTT"...)
	vh = append(vh, 4, 0x02, 0, 0) // level 4, clean session, keepalive 0
	vh = binary.BigEndian.AppendUint16(vh, uint16(len(id)))
	vh = append(vh, id...)
	pkt := []byte{0x10}
	for l := len(vh); ; {
		b := byte(l % 128)
		if l /= 128; l > 0 {
			pkt = append(pkt, b|0x80)
			continue
		}
		pkt = append(pkt, b)
		break
	}
	if _, err := c.Write(append(pkt, vh...)); err != nil {
		return err
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	ack := make([]byte, 4)
	if _, err := io.ReadFull(c, ack); err != nil {
		return fmt.Errorf("CONNACK of %s: %w", id, err)
	}
	if ack[0] != 0x20 || ack[3] != 0 {
		return fmt.Errorf("CONNACK of %s: % x", id, ack)
	}
	return c.SetReadDeadline(time.Time{})
}

// holdClients starts the child that holds count clients of the prefix.
func holdClients(b *testing.B, addr string, count int, prefix string) {
	b.Helper()
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%s", holderEnv, addr, count, prefix))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		b.Fatalf("holder: %q, %v", line, err)
	}
}

// BenchmarkConsole10kClients measures the console's pages with 10,000
// clients of one tenant connected: the first page of the clients (50
// rows), a page deep into them, a search, the sessions' first page, the
// overview and its live part; beside them the admin API's whole listing,
// which the console never asks for.
func BenchmarkConsole10kClients(b *testing.B) {
	s := startSite(b)
	start := time.Now()
	holdClients(b, s.mqtt, heldClients, "fleet-dev")
	b.Logf("%d clients connected in %s", heldClients, time.Since(start).Round(time.Millisecond))
	u := s.login(b, s.admin)
	deadline := time.Now().Add(time.Minute)
	for {
		_, body := u.get("/")
		if strings.Contains(body, `id="connections">`+strconv.Itoa(heldClients)+`<`) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the overview never counted every client")
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, p := range []struct{ name, path string }{
		{"clients-first-page", "/clients?tenant=fleet"},
		{"clients-deep-page", "/clients?tenant=fleet&after_tenant=fleet&after_client=fleet-dev09000"},
		{"clients-search", "/clients?tenant=fleet&search=dev0777"},
		{"sessions-first-page", "/sessions?tenant=fleet"},
		{"overview", "/"},
		{"overview-live", "/overview/live"},
	} {
		b.Run(p.name, func(b *testing.B) {
			u.t = b
			var size int
			for b.Loop() {
				code, body := u.get(p.path)
				if code != 200 {
					b.Fatalf("%s: %d", p.path, code)
				}
				size = len(body)
			}
			b.ReportMetric(float64(size), "page-bytes")
		})
	}
	b.Run("admin-api-whole-listing", func(b *testing.B) {
		var size int
		for b.Loop() {
			req, _ := newAdminRequest(s, "/v1/clients?tenant=fleet")
			resp, err := u.hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			size = int(n)
		}
		b.ReportMetric(float64(size), "page-bytes")
	})
}
