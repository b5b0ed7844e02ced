package realkafka

import (
	"os"
	"strings"
	"testing"
)

func TestWriteProperties(t *testing.T) {
	c := &Cluster{dir: t.TempDir(), brokerPort: 19092, ctlPort: 19093, props: []string{"add.partitions.to.txn.retry.backoff.ms=1"}}
	if err := c.writeProperties(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(c.propertiesPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\nprocess.roles=broker,controller\n",
		"\ncontroller.quorum.bootstrap.servers=127.0.0.1:19093\n",
		"\nlisteners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093\n",
		"\nadvertised.listeners=PLAINTEXT://127.0.0.1:19092\n",
		"\nlog.dirs=" + c.dataDir() + "\n",
		"\noffsets.topic.replication.factor=1\n",
		"\ntransaction.state.log.min.isr=1\n",
		"\nshare.coordinator.state.topic.replication.factor=1\n",
		"\ngroup.initial.rebalance.delay.ms=0\n",
		"\nadd.partitions.to.txn.retry.backoff.ms=1\n", // Options.Properties, last
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("server.properties lacks %q:\n%s", strings.TrimSpace(want), data)
		}
	}
	if got := c.Brokers(); len(got) != 1 || got[0] != "127.0.0.1:19092" {
		t.Errorf("Brokers() = %v", got)
	}
}

// The output keeps the latest lines for errors, whole lines only, and
// finds what a run printed since its mark.
func TestOutputTail(t *testing.T) {
	var sink strings.Builder
	o := &output{w: &sink}
	if got := o.tailSuffix(); got != "" {
		t.Errorf("tail of nothing = %q", got)
	}
	_, _ = o.Write([]byte("old run: Address already in use\n"))
	o.mark()
	if o.sinceMark("Address already in use") {
		t.Error("sinceMark sees output from before the mark")
	}
	for i := range 1000 {
		_, _ = o.Write([]byte(strings.Repeat("x", i%50) + " line\n"))
	}
	_, _ = o.Write([]byte("last line\n"))
	if !strings.HasPrefix(sink.String(), "old run") || !strings.HasSuffix(sink.String(), "last line\n") {
		t.Error("the output was not forwarded")
	}
	tail := o.tailSuffix()
	if !strings.HasSuffix(tail, "\nlast line") || len(tail) > tailBytes+100 {
		t.Errorf("tail ends %q, %d bytes", tail[max(0, len(tail)-40):], len(tail))
	}
	body := strings.TrimPrefix(tail, "\nlast output of kafka:\n")
	if first := strings.SplitN(body, "\n", 2)[0]; !strings.HasSuffix(first, " line") {
		t.Errorf("tail starts with a partial line %q", first)
	}
}
