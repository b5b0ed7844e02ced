//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/localserver/realkafka"
	"github.com/shoal-mqtt/shoal/internal/localserver/serverproc"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
	"github.com/shoal-mqtt/shoal/kafka"
)

// toolsTimeout bounds one run of a Kafka tool (a JVM start included).
const toolsTimeout = 90 * time.Second

// TestKafkaToolsOnEmbedded runs the Kafka distribution's own command-line
// tools (the Java client, from the jars of scripts/fetch-kafka.sh) against
// the embedded backbone's TCP listener (kafka.embedded_addr) with the file
// it writes for them, data_dir/kafka/client-java.properties: kafka-topics
// lists, creates and describes, the console producer writes records that
// Shoal's client reads, and the console consumer reads them and a record
// Shoal wrote.
func TestKafkaToolsOnEmbedded(t *testing.T) {
	lib := kafkaToolsLib(t)
	java, err := serverproc.JavaPath("the Kafka tools need Java 17 or newer")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e, err := kafka.StartEmbedded(kafka.EmbeddedConfig{Dir: dir, Addr: "127.0.0.1:0"}, testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), kafkaTestTimeout)
	defer cancel()
	c, err := kafka.NewClient(ctx, e.ClientConfig(kafka.Config{}), testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.EnsureTopics(ctx); err != nil {
		t.Fatal(err)
	}
	shoalRec := &kafka.Record{Topic: kafka.TopicMessages, Key: []byte("acme/plant/9"), Partition: kafka.PartitionByKey, Value: []byte("written by shoal")}
	if err := c.ProduceSync(ctx, shoalRec); err != nil {
		t.Fatal(err)
	}

	props := filepath.Join(dir, kafka.JavaCredentialsName)
	addr := e.Addrs()[0]
	tool := func(stdin, class string, args ...string) string {
		t.Helper()
		return javaTool(t, lib, java, addr, props, stdin, class, args...)
	}

	list := strings.Fields(tool("", toolTopics, "--list"))
	for _, want := range []string{kafka.TopicMessages, kafka.TopicSessions, kafka.TopicDeliveries} {
		if !slices.Contains(list, want) {
			t.Errorf("kafka-topics --list: %q lacks %s", list, want)
		}
	}
	const topic = "tools.java"
	if out := tool("", toolTopics, "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1"); !strings.Contains(out, "Created topic "+topic) {
		t.Errorf("kafka-topics --create: %q", out)
	}
	if out := tool("", toolTopics, "--describe", "--topic", topic); !strings.Contains(out, "PartitionCount: 2") {
		t.Errorf("kafka-topics --describe: %q", out)
	}

	tool("k1:from java 1\nk2:from java 2\n", toolProducer, "--topic", topic,
		"--reader-property", "parse.key=true", "--reader-property", "key.separator=:")
	got := map[string]string{}
	done := errors.New("done")
	err = c.Consume(ctx, kafka.ConsumeConfig{Topic: topic, Partitions: []int32{0, 1}}, func(_ context.Context, b kafka.Batch) error {
		for _, r := range b.Records {
			got[string(r.Key)] = string(r.Value)
		}
		if len(got) == 2 {
			return done
		}
		return nil
	})
	if !errors.Is(err, done) {
		t.Fatalf("Shoal's client read %v of the console producer's records: %v", got, err)
	}
	if want := map[string]string{"k1": "from java 1", "k2": "from java 2"}; !maps.Equal(got, want) {
		t.Errorf("Shoal's client read %v, want %v", got, want)
	}

	out := tool("", toolConsumer, "--topic", topic, "--from-beginning", "--max-messages", "2", "--formatter-property", "print.key=true")
	for _, want := range []string{"k1\tfrom java 1\n", "k2\tfrom java 2\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("console consumer of %s: %q lacks %q", topic, out, want)
		}
	}
	out = tool("", toolConsumer, "--topic", kafka.TopicMessages, "--from-beginning", "--max-messages", "1", "--formatter-property", "print.key=true")
	if want := "acme/plant/9\twritten by shoal\n"; out != want {
		t.Errorf("console consumer of %s: %q, want %q", kafka.TopicMessages, out, want)
	}
}

// The Kafka tools' main classes.
const (
	toolTopics   = "org.apache.kafka.tools.TopicCommand"
	toolProducer = "org.apache.kafka.tools.ConsoleProducer"
	toolConsumer = "org.apache.kafka.tools.consumer.ConsoleConsumer"
)

// javaTool runs the Kafka tool class (the jars of lib, on java) against
// the brokers of bootstrap, with the client properties props ("" for
// none), and returns its standard output.
func javaTool(t *testing.T, lib, java, bootstrap, props, stdin, class string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), toolsTimeout)
	defer cancel()
	argv := []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", filepath.Join(lib, "*"), class, "--bootstrap-server", bootstrap}
	if props != "" {
		argv = append(argv, "--command-config", props)
	}
	cmd := exec.CommandContext(ctx, java, append(argv, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	began := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", class, strings.Join(args, " "), err, &out, &stderr)
	}
	t.Logf("%s %s: %s", class, strings.Join(args, " "), time.Since(began).Round(time.Millisecond))
	return out.String()
}

// kafkaToolsLib returns the directory of the Kafka jars, the tools' among
// them, running scripts/fetch-kafka.sh (a no-op once they are cached).
func kafkaToolsLib(t *testing.T) string {
	t.Helper()
	script, err := serverproc.FindScript("scripts/fetch-kafka.sh")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), kafkaStartTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, &stderr)
	}
	lib := strings.TrimSpace(stdout.String())
	jar := filepath.Join(lib, "kafka-tools-"+realkafka.Version+".jar")
	if _, err := os.Stat(jar); err != nil {
		t.Fatalf("the console tools' jar: %v (%s must fetch org.apache.kafka:kafka-tools, where Kafka 4 keeps ConsoleProducer, ConsoleConsumer and TopicCommand)", err, script)
	}
	return lib
}
