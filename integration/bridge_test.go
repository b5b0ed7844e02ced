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

	"github.com/shoal-mqtt/shoal/internal/localserver/serverproc"
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
// Kafka, with stock clients on the other side: kcat and the Kafka
// distribution's console consumer and producer. MQTT messages of QoS 1 and
// 2 from gateway A land in the mapping's topic, read_committed, each once
// and in order per topic, also with the bridge killed (SIGKILL) and
// restarted in the middle of the stream; a record each producer writes
// reaches a subscriber on gateway B.
func testClusterBridge(t *testing.T, c *cluster, ga, gb, br *proc) {
	const n = 300
	var restarted time.Time
	retried := bridgeStream(t, ga.mqtt, "it-kb-pub", "kb/kill", n, func(i int) {
		if i == n/2 {
			br.kill()
			br.restart()
			restarted = time.Now()
		}
	})
	got := c.readBridged(t, "kb/kill", n)
	t.Logf("%d records read committed %v after the bridge's restart", n, time.Since(restarted).Round(time.Millisecond))
	checkBridged(t, got, "kb/kill", n, retried)

	// The console consumer of the Kafka distribution, read_committed.
	lib := kafkaToolsLib(t)
	java, err := serverproc.JavaPath("the Kafka tools need Java 17 or newer")
	if err != nil {
		t.Fatal(err)
	}
	bootstrap := strings.Join(c.kafka.Brokers(), ",")
	out := javaTool(t, lib, java, bootstrap, "", "", toolConsumer, "--topic", "it.kb", "--from-beginning",
		"--isolation-level", "read_committed", "--max-messages", strconv.Itoa(n), "--timeout-ms", "60000",
		"--formatter-property", "print.key=true")
	fromJava := map[string][]int{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		key, v, _ := strings.Cut(line, "\t")
		k, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("console consumer record %q: not a message number", line)
		}
		fromJava[key] = append(fromJava[key], k)
	}
	checkBridged(t, fromJava, "kb/kill", n, retried)

	sub, _ := dialMQTT(t, gb.mqtt, "it-kb-sub", true, 0)
	sub.subscribe("cmd/+", 1)
	expect := func(topic, payload, from string) {
		t.Helper()
		select {
		case m := <-sub.msgs:
			if m.Topic != topic || string(m.Payload) != payload {
				t.Fatalf("subscriber got %q on %s, want %s on %s", m.Payload, m.Topic, payload, topic)
			}
		case <-time.After(clusterWait):
			t.Fatalf("the record %s produced to it.commands never reached the subscriber", from)
		}
	}
	c.kcat(t, "reboot", "-P", "-t", "it.commands", "-k", "dev7")
	expect("cmd/dev7", "reboot", "kcat")
	javaTool(t, lib, java, bootstrap, "", "dev8:halt\n", toolProducer, "--topic", "it.commands",
		"--reader-property", "parse.key=true", "--reader-property", "key.separator=:")
	expect("cmd/dev8", "halt", "the console producer")
}

// testClusterBridgeKafkaRestart: Kafka stops and starts again under a
// stream of bridged QoS 1 and 2 messages: every acknowledged message lands
// once in the mapping's topic, in order per MQTT topic (one the publisher
// sent again after a failed publish may land twice, as MQTT allows).
func testClusterBridgeKafkaRestart(t *testing.T, c *cluster, ga, br *proc) {
	rk := restartable(t, c.kafka)
	const n = 300
	restarted := make(chan struct{})
	retried := bridgeStream(t, ga.mqtt, "it-kbr-pub", "kb/restart", n, func(i int) {
		if i != n/3 {
			return
		}
		go func() {
			defer close(restarted)
			if err := rk.Stop(); err != nil {
				t.Errorf("stop kafka: %v", err)
				return
			}
			stopped := time.Now()
			t.Log("kafka stopped")
			ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
			defer cancel()
			if err := rk.Restart(ctx); err != nil {
				t.Errorf("restart kafka: %v", err)
				return
			}
			t.Logf("kafka restarted, down for %s", time.Since(stopped).Round(time.Millisecond))
		}()
	})
	<-restarted
	began := time.Now()
	got := c.readBridged(t, "kb/restart", n)
	t.Logf("%d messages streamed (%d sent again), read committed %s after the stream", n, len(retried), time.Since(began).Round(time.Millisecond))
	if total := len(got["kb/restart/1"]) + len(got["kb/restart/2"]); total < n {
		br.goroutines(t)
	}
	checkBridged(t, got, "kb/restart", n, retried)
}

// bridgeStream publishes n numbered messages from a client of tenant it on
// gateway addr, QoS 1 and 2 in turn on prefix/1 and prefix/2, calling at
// before each. A publish that fails is sent again on a new connection; the
// numbers of those are returned.
func bridgeStream(t *testing.T, addr, id, prefix string, n int, at func(i int)) map[int]bool {
	t.Helper()
	retried := map[int]bool{}
	pub, _ := dialMQTT(t, addr, id, true, 0)
	for i := range n {
		at(i)
		qos := byte(1 + i%2)
		for attempt := 1; ; attempt++ {
			err := pub.publish(fmt.Sprintf("%s/%d", prefix, qos), strconv.Itoa(i), qos, false)
			if err == nil {
				break
			}
			if attempt == 5 {
				t.Fatalf("publish %d: %v (after %d attempts)", i, err, attempt)
			}
			t.Logf("publish %d: %v; reconnecting", i, err)
			retried[i] = true
			pub = redial(t, addr, id)
		}
	}
	return retried
}

// readBridged reads it.kb read_committed with kcat until the records of
// prefix's topics number n (or clusterWait passed): the message numbers by
// MQTT topic.
func (c *cluster) readBridged(t *testing.T, prefix string, n int) map[string][]int {
	t.Helper()
	got := map[string][]int{}
	// Not eventually: at the deadline it returns what it read, and the
	// caller names what is missing.
	for deadline := time.Now().Add(clusterWait); ; time.Sleep(200 * time.Millisecond) {
		clear(got)
		out := c.kcat(t, "", "-X", "isolation.level=read_committed", "-C", "-t", "it.kb", "-o", "beginning", "-e", "-q", "-f", "%k %s\n")
		total := 0
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			key, v, ok := strings.Cut(line, " ")
			if !ok || !strings.HasPrefix(key, prefix+"/") {
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
			return got
		}
	}
}

// checkBridged checks that the records of prefix/1 and prefix/2 are the
// stream's messages of QoS 1 and 2, each once and in order; a message
// sent again (retried) may be there twice in a row.
func checkBridged(t *testing.T, got map[string][]int, prefix string, n int, retried map[int]bool) {
	t.Helper()
	for _, qos := range []int{1, 2} {
		key := fmt.Sprintf("%s/%d", prefix, qos)
		var recs []int
		for i, k := range got[key] {
			if i > 0 && k == got[key][i-1] && retried[k] {
				continue
			}
			recs = append(recs, k)
		}
		if len(recs) != n/2 {
			t.Errorf("%s: %d records (%d with repeats of messages sent again), want each of the %d messages once", key, len(recs), len(got[key]), n/2)
		}
		for i, k := range recs {
			if want := 2*i + qos - 1; k != want {
				t.Fatalf("%s: record %d is message %d, want %d: once each, in order (%v)", key, i, k, want, got[key])
			}
		}
	}
}
