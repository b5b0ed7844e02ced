package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// TestKcatReadsTheEmbeddedLog follows docs/security.md ("The embedded Kafka
// accepts no one but Shoal"): `shoal
// all --kafka-embedded-addr`, then Debian's kcat (librdkafka, installed by
// scripts/test-deps.sh) with -F data_dir/kafka/client.properties lists the
// topics and reads the record of a message an MQTT client published, by
// partition and in a consumer group.
func TestKcatReadsTheEmbeddedLog(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat not found (%v): run scripts/test-deps.sh (make test does)", err)
	}
	dir := t.TempDir()
	dumpLogs(t, dir)
	var p *shoalProc
	var kaddr string
	for attempt := 1; p == nil; attempt++ {
		kaddr = freePort(t)
		var busy bool
		if p, busy = tryStartShoal(t, dir, []string{"SHOAL_KAFKA_EMBEDDED_ADDR=" + kaddr}); p == nil && (!busy || attempt == 5) {
			t.Fatal("shoal did not start") // tryStartShoal logged why
		}
	}
	props := filepath.Join(dir, "kafka", "client.properties")
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		args = append([]string{"-F", props, "-b", kaddr}, args...)
		var out, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, kcat, args...)
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("kcat %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, &out, &stderr)
		}
		return out.String()
	}

	list := run("-L")
	for _, want := range []string{"broker 0 at " + kaddr, `topic "shoal.messages" with 4 partitions`, `topic "shoal.sessions" with 4 partitions`} {
		if !strings.Contains(list, want) {
			t.Errorf("kcat -L lacks %q:\n%s", want, list)
		}
	}

	c, _ := connect(t, p.mqtt, "acme-kcat", true)
	c.publish(t, "plant/7/temp", "read by kcat", 1, false)
	// The record is keyed tenant/topic; its value, an envelope, holds the
	// payload as it is.
	const key = "acme/plant/7/temp"
	found := func(out string) bool {
		for _, r := range kcatRecords(t, out) {
			if r[0] == key && strings.Contains(r[1], "read by kcat") {
				return true
			}
		}
		return false
	}
	format := []string{"-f", "%K %S\n%k%s\n"} // sizes first: the values are binary
	eventually.OK(t, wait, func() string {
		if out := run(append([]string{"-C", "-t", "shoal.messages", "-o", "beginning", "-e", "-q"}, format...)...); !found(out) {
			return fmt.Sprintf("kcat -C read no record %s with the payload:\n%q", key, out)
		}
		return ""
	})
	if out := run(append([]string{"-G", "kcat-test", "-o", "beginning", "-e", "-q"}, append(format, "shoal.messages")...)...); !found(out) {
		t.Errorf("kcat -G read no record %s with the payload:\n%q", key, out)
	}
}

// kcatRecords splits what kcat printed with -f "%K %S\n%k%s\n" into
// records of key and value.
func kcatRecords(t *testing.T, out string) [][2]string {
	t.Helper()
	var recs [][2]string
	for out != "" {
		line, rest, ok := strings.Cut(out, "\n")
		var ks, vs int
		if _, err := fmt.Sscanf(line, "%d %d", &ks, &vs); !ok || err != nil || ks < 0 || vs < 0 || len(rest) < ks+vs+1 {
			t.Fatalf("kcat printed %q where a record's sizes were due", out)
		}
		recs = append(recs, [2]string{rest[:ks], rest[ks : ks+vs]})
		out = rest[ks+vs+1:]
	}
	return recs
}
