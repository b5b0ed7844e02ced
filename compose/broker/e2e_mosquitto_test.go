package broker_test

import (
	"context"
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
)

// TestMosquittoClients drives Debian's mosquitto_pub and mosquitto_sub
// (installed by make test through scripts/test-deps.sh) against Shoal, in
// both protocol versions: live messages, a retained message, and the
// clients' own default identifiers (mosq-…, one tenant).
func TestMosquittoClients(t *testing.T) {
	for _, bin := range []string{"mosquitto_pub", "mosquitto_sub"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s not found: run scripts/test-deps.sh (make test does)", bin)
		}
	}
	b := startBroker(t)
	host, port, _ := net.SplitHostPort(mqttAddr(b))
	for _, v := range []string{"mqttv5", "mqttv311"} {
		t.Run(v, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			run := func(args ...string) {
				t.Helper()
				out, err := exec.CommandContext(ctx, "mosquitto_pub", append([]string{"-h", host, "-p", port, "-V", v}, args...)...).CombinedOutput()
				if err != nil {
					t.Fatalf("mosquitto_pub %v: %v\n%s", args, err, out)
				}
			}
			prefix := "tour-" + v
			run("-t", prefix+"/retained", "-m", "kept", "-r", "-q", "1")

			var out testlog.Buffer
			sub := exec.CommandContext(ctx, "mosquitto_sub", "-h", host, "-p", port, "-V", v,
				"-t", prefix+"/#", "-q", "1", "-v", "-C", "3", "-W", "20")
			sub.Stdout, sub.Stderr = &out, &out
			if err := sub.Start(); err != nil {
				t.Fatal(err)
			}
			// mosquitto_sub prints the retained message once subscribed:
			// wait for it, then publish the live ones.
			eventually.True(t, 15*time.Second, "mosquitto_sub to print the retained message", func() bool {
				return strings.Contains(out.String(), "kept")
			})
			run("-t", prefix+"/a", "-m", "hello", "-q", "1")
			run("-t", prefix+"/b/c", "-m", "world", "-q", "2")
			if err := sub.Wait(); err != nil {
				t.Fatalf("mosquitto_sub: %v\n%s", err, out.String())
			}
			// The retained message comes first; the two live ones are on
			// different topics, so in either order.
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(lines) != 3 || lines[0] != prefix+"/retained kept" {
				t.Fatalf("mosquitto_sub printed\n%s", out.String())
			}
			live := []string{lines[1], lines[2]}
			slices.Sort(live)
			if want := []string{prefix + "/a hello", prefix + "/b/c world"}; !slices.Equal(live, want) {
				t.Fatalf("mosquitto_sub printed\n%s\nwant the live lines %v", out.String(), want)
			}
		})
	}
}
