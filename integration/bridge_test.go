//go:build integration

package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clusterBridges are the cluster's Kafka bridge mappings (shoal bridge):
// tenant it's kb/ topics to it.kb, and it.commands to tenant it.
const clusterBridges = `bridges:
  kafka:
    instance_id: bridge-0
    out:
      - name: kb
        tenant: it
        mqtt_filter: "kb/#"
        kafka_topic: "it.kb"
        key: "{topic}"
    in:
      - name: commands
        tenant: it
        kafka_topic: "it.commands"
        mqtt_topic: "cmd/{key}"
        qos: 1
`

// appendConfig adds YAML to the cluster's configuration file, before its
// processes start.
func (c *cluster) appendConfig(yaml string) {
	c.t.Helper()
	f, err := os.OpenFile(c.cfgPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := f.WriteString(yaml); err != nil {
		c.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		c.t.Fatal(err)
	}
}

// kcat runs Debian's kcat against the cluster's Kafka.
func (c *cluster) kcat(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat not found (%v): run scripts/test-deps.sh (make test does)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-b", strings.Join(c.kafka.Brokers(), ",")}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %v: %v\n%s", args, err, &errOut)
	}
	return out.String()
}

// testClusterBridge: the bridge of a distributed deployment, on a real
// Kafka, with stock kcat on the other side. MQTT messages of QoS 1 and 2
// from gateway A land in the mapping's topic, read_committed, each once
// and in order per topic, also with the bridge killed (SIGKILL) and
// restarted in the middle of the stream; a record kcat produces reaches a
// subscriber on gateway B.
func testClusterBridge(t *testing.T, c *cluster, ga, gb, br *proc) {
	pub, _ := dialMQTT(t, ga.mqtt, "it-kb-pub", true, 0)
	const n = 300
	var restarted time.Time
	for i := range n {
		if i == n/2 {
			br.kill()
			br.restart()
			restarted = time.Now()
		}
		qos := byte(1 + i%2)
		if err := pub.publish(fmt.Sprintf("kb/%d", qos), strconv.Itoa(i), qos, false); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	got := map[string][]int{}
	for deadline := time.Now().Add(clusterWait); ; time.Sleep(200 * time.Millisecond) {
		clear(got)
		out := c.kcat(t, "", "-X", "isolation.level=read_committed", "-C", "-t", "it.kb", "-o", "beginning", "-e", "-q", "-f", "%k %s\n")
		total := 0
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			key, v, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			k, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("record %q: not a message number", line)
			}
			got[key] = append(got[key], k)
			total++
		}
		if total >= n || time.Now().After(deadline) {
			t.Logf("%d records read committed %v after the bridge's restart", total, time.Since(restarted).Round(time.Millisecond))
			break
		}
	}
	for _, qos := range []int{1, 2} {
		key := fmt.Sprintf("kb/%d", qos)
		recs := got[key]
		if len(recs) != n/2 {
			t.Errorf("%s: %d records, want each of the %d messages once", key, len(recs), n/2)
		}
		for i, k := range recs {
			if want := 2*i + qos - 1; k != want {
				t.Fatalf("%s: record %d is message %d, want %d: once each, in order (%v)", key, i, k, want, recs)
			}
		}
	}

	sub, _ := dialMQTT(t, gb.mqtt, "it-kb-sub", true, 0)
	sub.subscribe("cmd/+", 1)
	c.kcat(t, "reboot", "-P", "-t", "it.commands", "-k", "dev7")
	select {
	case m := <-sub.msgs:
		if m.Topic != "cmd/dev7" || string(m.Payload) != "reboot" {
			t.Fatalf("subscriber got %q on %s, want reboot on cmd/dev7", m.Payload, m.Topic)
		}
	case <-time.After(clusterWait):
		t.Fatal("the record kcat produced to it.commands never reached the subscriber")
	}
}
