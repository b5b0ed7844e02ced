package replay

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/compose/broker/brokertest"
	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/internal/testutil/pahoconn"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// line is one JSON line as a consumer reads it.
type line struct {
	KafkaTopic    string          `json:"kafka_topic"`
	Partition     int32           `json:"partition"`
	Offset        int64           `json:"offset"`
	Time          time.Time       `json:"time"`
	Type          string          `json:"type"`
	Tenant        string          `json:"tenant"`
	ClientID      string          `json:"client_id"`
	MessageID     string          `json:"message_id"`
	Topic         string          `json:"topic"`
	QoS           *int            `json:"qos"`
	Retain        *bool           `json:"retain"`
	Payload       string          `json:"payload"`
	PayloadBase64 bool            `json:"payload_base64"`
	Event         json.RawMessage `json:"event"`
}

func (l line) payload(t *testing.T) string {
	if !l.PayloadBase64 {
		return l.Payload
	}
	b, err := base64.StdEncoding.DecodeString(l.Payload)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// read runs o against log and returns the JSON lines, parsed, with the
// run's stats and error.
func read(t *testing.T, log *kafka.Client, o Options) ([]line, []byte, Stats, error) {
	t.Helper()
	var out bytes.Buffer
	st, err := Run(t.Context(), log, o, NewJSONSink(&out), nil)
	var lines []line
	sc := bufio.NewScanner(bytes.NewReader(out.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if !json.Valid(sc.Bytes()) {
			t.Fatalf("not JSON: %s", sc.Bytes())
		}
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	return lines, out.Bytes(), st, err
}

// publish connects id to addr and publishes each message (topic, payload,
// QoS) in turn, waiting for the acknowledgements.
func publish(t *testing.T, addr, id string, msgs ...struct {
	topic, payload string
	qos            byte
}) {
	t.Helper()
	c := connect(t, addr, id, nil)
	for _, m := range msgs {
		if _, err := c.Publish(t.Context(), &paho.Publish{Topic: m.topic, Payload: []byte(m.payload), QoS: m.qos}); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.Disconnect(&paho.Disconnect{})
}

func connect(t *testing.T, addr, id string, onPublish func(*paho.Publish)) *paho.Client {
	t.Helper()
	return pahoconn.Connect(t, addr, id, onPublish)
}

// openLog opens the log of the shoal all whose data directory is dir (4
// partitions, brokertest's), closed when the test ends.
func openLog(t *testing.T, dir string) *Log {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir, cfg.Kafka.Partitions = dir, 4
	l, err := Open(t.Context(), cfg, testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

type msg = struct {
	topic, payload string
	qos            byte
}

// TestReplay reads a shoal all's log while it runs (through its socket)
// and after it stopped (its files), with every filter, and checks what
// comes out against what the clients did.
func TestReplay(t *testing.T) {
	dir := t.TempDir()
	b, stop := brokertest.Run(t, func(c *config.Config) { c.DataDir = dir })
	addr := b.Addr("mqtt").String()
	publish(t, addr, "acme-pub", msg{"a/1", "one", 1}, msg{"a/2", "two", 1}, msg{"a/3", "three", 2}, msg{"b/1", "\x00\x01\xff binary", 1}, msg{"a/1", "one again", 1})
	publish(t, addr, "globex-pub", msg{"a/1", "globex's", 0})

	cfg := config.Default()
	cfg.DataDir, cfg.Kafka.Partitions = dir, 4
	acmePublishes := func() Options {
		o := DefaultOptions()
		o.Tenant, o.TenantSet, o.Types, o.ClientID = "acme", true, []string{kafka.EventPublish}, "acme-pub"
		return o
	}

	running, err := Open(t.Context(), cfg, testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(running.Where, "running") {
		t.Errorf("opened %s, want the running shoal all", running.Where)
	}
	lines, live, _, err := read(t, running.Client, acmePublishes())
	if err != nil {
		t.Fatal(err)
	}
	var payloads []string
	ids := map[string]bool{}
	for _, l := range lines {
		if l.KafkaTopic != kafka.TopicMessages || l.Type != kafka.EventPublish || l.Tenant != "acme" || l.ClientID != "acme-pub" || l.QoS == nil || l.Retain == nil || len(l.Event) == 0 {
			t.Errorf("line %+v", l)
		}
		if _, err := kafka.ParseMessageID(l.MessageID); err != nil || ids[l.MessageID] {
			t.Errorf("message id %q: %v (or seen twice)", l.MessageID, err)
		}
		ids[l.MessageID] = true
		payloads = append(payloads, l.payload(t))
		if (l.Topic == "b/1") != l.PayloadBase64 {
			t.Errorf("%s: payload_base64 %v", l.Topic, l.PayloadBase64)
		}
	}
	slices.Sort(payloads)
	if want := []string{"\x00\x01\xff binary", "one", "one again", "three", "two"}; !slices.Equal(payloads, want) {
		t.Fatalf("acme's publishes: %q, want %q", payloads, want)
	}
	// The publisher's session ended with its connection: the routers
	// forget its presence by a tombstone, which replay names.
	gone := DefaultOptions()
	gone.Topics, gone.Types, gone.ClientID = []string{"presence"}, []string{TypeTombstone}, "acme-pub"
	eventually.True(t, 10*time.Second, "a tombstone of acme-pub's presence in the log", func() bool {
		lines, raw, _, err := read(t, running.Client, gone)
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) == 0 {
			return false
		}
		if l := lines[0]; len(lines) != 1 || l.KafkaTopic != kafka.TopicPresence || l.Type != TypeTombstone || l.Tenant != "acme" || l.ClientID != "acme-pub" || len(l.Event) != 0 {
			t.Errorf("acme-pub's presence tombstone: %s", raw)
		}
		return true
	})
	if err := running.Close(); err != nil {
		t.Fatal(err)
	}

	// Published again to the running broker, under a prefix, into
	// tenant acme: a subscriber there gets them, marked.
	got := make(chan *paho.Publish, 16)
	watch := connect(t, addr, "acme-watch", func(p *paho.Publish) { got <- p })
	if _, err := watch.Subscribe(t.Context(), &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "replayed/#", QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	again, err := Open(t.Context(), cfg, testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	target, err := ParseMQTTTarget("mqtt://" + addr + "/replayed?client_id=acme-replayer")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := DialMQTT(t.Context(), target, 1000)
	if err != nil {
		t.Fatal(err)
	}
	o := acmePublishes()
	o.TopicFilter = "a/+"
	if _, err := Run(t.Context(), again.Client, o, ms, nil); err != nil {
		t.Fatal(err)
	}
	_ = ms.Close()
	_ = again.Close()
	for range 4 {
		select {
		case p := <-got:
			if !strings.HasPrefix(p.Topic, "replayed/a/") || p.Properties.User.Get("shoal-replayed-from") == "" {
				t.Errorf("replayed %s with user properties %v", p.Topic, p.Properties.User)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the replayed messages did not arrive")
		}
	}

	// Stopped: the same read from the files gives the same bytes.
	stop()
	stopped, err := Open(t.Context(), cfg, testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stopped.Close() })
	if !strings.Contains(stopped.Where, "stopped") {
		t.Errorf("opened %s, want the stopped shoal all", stopped.Where)
	}
	log := stopped.Client
	_, files, _, err := read(t, log, acmePublishes())
	if err != nil {
		t.Fatal(err)
	}
	// The same lines in the same order: the merge's order is the log's.
	if !bytes.Equal(files, live) {
		t.Errorf("read from the files:\n%s\nwhile running:\n%s", files, live)
	}

	t.Run("client, one partition of sessions", func(t *testing.T) {
		o := DefaultOptions()
		o.Topics, o.ClientID = []string{"sessions"}, "acme-pub"
		lines, _, st, err := read(t, log, o)
		if err != nil {
			t.Fatal(err)
		}
		if st.Partitions != 1 {
			t.Errorf("read %d partitions, want the client's one", st.Partitions)
		}
		var types []string
		for _, l := range lines {
			if l.ClientID != "acme-pub" {
				t.Errorf("line of %s", l.ClientID)
			}
			types = append(types, l.Type)
		}
		if !slices.Contains(types, kafka.EventConnect) || !slices.Contains(types, kafka.EventDisconnect) {
			t.Errorf("acme-pub's session events: %v", types)
		}
	})
	t.Run("exact topic, one partition", func(t *testing.T) {
		o := acmePublishes()
		o.TopicFilter = "a/1"
		lines, _, st, err := read(t, log, o)
		if err != nil {
			t.Fatal(err)
		}
		if st.Partitions != 1 || len(lines) != 2 {
			t.Errorf("%d lines from %d partitions, want 2 from 1", len(lines), st.Partitions)
		}
	})
	t.Run("wildcard topic", func(t *testing.T) {
		o := DefaultOptions()
		o.TopicFilter = "a/+"
		lines, _, st, err := read(t, log, o)
		if err != nil {
			t.Fatal(err)
		}
		if st.Partitions != 4 || len(lines) != 5 {
			t.Errorf("%d lines from %d partitions, want 5 (4 acme, 1 globex) from 4", len(lines), st.Partitions)
		}
	})
	t.Run("qos and tenant", func(t *testing.T) {
		o := DefaultOptions()
		o.QoS = 0
		o.Tenant, o.TenantSet = "globex", true
		lines, _, _, err := read(t, log, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) != 1 || lines[0].payload(t) != "globex's" {
			t.Errorf("globex's QoS 0 publishes: %+v", lines)
		}
	})
	t.Run("message id", func(t *testing.T) {
		o := DefaultOptions()
		o.MessageID, _ = kafka.ParseMessageID(lines[0].MessageID)
		got, _, _, err := read(t, log, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].MessageID != lines[0].MessageID || got[0].Offset != lines[0].Offset {
			t.Errorf("message %s: %+v", lines[0].MessageID, got)
		}
	})
	t.Run("offsets and limit", func(t *testing.T) {
		o := DefaultOptions()
		l := lines[len(lines)-1]
		o.Partitions, o.FromOffset, o.ToOffset = []int32{l.Partition}, l.Offset, l.Offset
		got, _, _, err := read(t, log, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Offset != l.Offset || got[0].Partition != l.Partition {
			t.Errorf("offset %d of partition %d: %+v", l.Offset, l.Partition, got)
		}
		o = DefaultOptions()
		o.Limit = 2
		if got, _, _, _ := read(t, log, o); len(got) != 2 {
			t.Errorf("limit 2: %d lines", len(got))
		}
	})
	t.Run("time range", func(t *testing.T) {
		times := make([]time.Time, len(lines))
		for i, l := range lines {
			times[i] = l.Time
		}
		if !slices.IsSortedFunc(times, time.Time.Compare) {
			t.Fatalf("lines out of time order: %v", times)
		}
		o := acmePublishes()
		o.From, o.To = times[1], times[len(times)-1]
		got, _, _, err := read(t, log, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range got {
			if l.Time.Before(o.From) || l.Time.After(o.To) {
				t.Errorf("%s is outside [%s, %s]", l.Time, o.From, o.To)
			}
		}
		if len(got) == 0 || len(got) >= len(lines) {
			t.Errorf("%d of %d publishes in the range", len(got), len(lines))
		}
		o.From, o.To = time.Now().Add(time.Hour), time.Time{}
		if _, _, _, err := read(t, log, o); !errors.Is(err, ErrNoEvents) {
			t.Errorf("a range after the log: %v, want ErrNoEvents", err)
		}
	})
}

func TestOpenNoDataDir(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = t.TempDir() + "/nothing"
	if _, err := Open(t.Context(), cfg, testlog.New(t)); err == nil || !strings.Contains(err.Error(), "no Shoal data directory") {
		t.Errorf("Open of a missing directory: %v", err)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		mut  func(*Options)
		want string
	}{
		{func(o *Options) { o.Topics = []string{"nope"} }, "--topics"},
		{func(o *Options) { o.Types = []string{"nope"} }, "--type"},
		{func(o *Options) { o.QoS = 3 }, "--qos"},
		{func(o *Options) { o.TopicFilter = "a/#/b" }, "--topic"},
		{func(o *Options) { o.FromOffset = 3 }, "--partitions too"},
		{func(o *Options) { o.From, o.To = time.Now(), time.Now().Add(-time.Hour) }, "before --from"},
		{func(o *Options) { o.Follow, o.To = true, time.Now() }, "--follow"},
	} {
		o := DefaultOptions()
		tc.mut(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", o, err, tc.want)
		}
	}
	if err := DefaultOptions().Validate(); err != nil {
		t.Error(err)
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote\back`, "\x00\x1f\n\t\r", "é ✓ 😀", "bad \xff utf-8", "\u2028"} {
		b := appendString(nil, s)
		var back string
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%q → %s: %v", s, b, err)
		}
		want := strings.ToValidUTF8(s, "\uFFFD")
		if back != want {
			t.Errorf("%q → %s → %q", s, b, back)
		}
	}
}

func TestCompactJSON(t *testing.T) {
	in := `{ "a" : [1, 2],  "b":"x  y\" z" }`
	got := string(compactJSON([]byte("prefix"+in), len("prefix")))
	if want := `prefix{"a":[1,2],"b":"x  y\" z"}`; got != want {
		t.Errorf("%s, want %s", got, want)
	}
}

func TestParseMQTTTarget(t *testing.T) {
	tg, err := ParseMQTTTarget("mqtts://u:p@broker.example:8884/re/play?client_id=acme-r")
	if err != nil {
		t.Fatal(err)
	}
	if want := (MQTTTarget{Addr: "broker.example:8884", User: "u", Password: "p", TLS: true, Prefix: "re/play", ClientID: "acme-r"}); tg != want {
		t.Errorf("%+v, want %+v", tg, want)
	}
	if tg, _ := ParseMQTTTarget("mqtt://h"); tg.Addr != "h:1883" {
		t.Errorf("default port: %s", tg.Addr)
	}
	for _, bad := range []string{"http://h", "mqtt://", "h:1883"} {
		if _, err := ParseMQTTTarget(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestTableSink(t *testing.T) {
	var out bytes.Buffer
	s := NewTableSink(&out)
	env := &eventspb.Envelope{Tenant: "acme", ClientId: "acme-1", TimestampUs: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC).UnixMicro(),
		MessageId: &eventspb.MessageID{GatewayEpoch: 1, Seq: 2},
		Event:     &eventspb.Envelope_Publish{Publish: &eventspb.Publish{Message: &eventspb.Message{Topic: "a/b", Qos: 1, Payload: []byte("\x00" + strings.Repeat("x", 60))}}}}
	var e Event
	e.fill(&kafka.Record{Topic: kafka.TopicMessages, Partition: 3, Offset: 42}, env)
	if err := s.Write(&e); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(rows) != 2 || !strings.HasPrefix(rows[0], "TIME") {
		t.Fatalf("table:\n%s", out.String())
	}
	for _, want := range []string{"2026-11-25T10:00:00.000Z", "messages:3/42", "publish", "acme-1", "a/b", "0000000000000001-2", `"\x00xxx`, "…"} {
		if !strings.Contains(rows[1], want) {
			t.Errorf("row %q lacks %q", rows[1], want)
		}
	}
}

// TestEveryEventType: every case of the envelope's event oneof has a type
// name a filter accepts and a body the JSON sink prints, so that an event
// added to the schema cannot be left out of replay.
func TestEveryEventType(t *testing.T) {
	od := (&eventspb.Envelope{}).ProtoReflect().Descriptor().Oneofs().ByName("event")
	for i := range od.Fields().Len() {
		fd := od.Fields().Get(i)
		env := &eventspb.Envelope{}
		m := env.ProtoReflect()
		m.Set(fd, m.NewField(fd))
		typ := kafka.EnvelopeType(env)
		if typ == "" || !slices.Contains(knownTypes, typ) {
			t.Errorf("%s: type %q is not one replay's --type accepts", fd.Name(), typ)
		}
		if kafka.EventBody(env) == nil {
			t.Errorf("%s: no body for the JSON sink", fd.Name())
		}
	}
}

// A tombstone (a keyed record without a value) is named by its key: the
// tenant and the client id, or the gateway id on the quotas topic; a key
// that is not a record key fails as an undecodable envelope does.
func TestDecodeTombstone(t *testing.T) {
	env := new(eventspb.Envelope)
	pres := &kafka.Record{Topic: kafka.TopicPresence, Key: kafka.Key("a/b", "a/b-dev")}
	if err := decode(pres, env, kafka.TopicQuotas); err != nil || env.Tenant != "a/b" || env.ClientId != "a/b-dev" || env.Gateway != "" {
		t.Errorf("presence tombstone: %v, %v", env, err)
	}
	if typ := recordType(pres); typ != TypeTombstone {
		t.Errorf("presence tombstone of type %q", typ)
	}
	quota := &kafka.Record{Topic: kafka.TopicQuotas, Key: kafka.Key("acme", "gw-1")}
	if err := decode(quota, env, kafka.TopicQuotas); err != nil || env.Tenant != "acme" || env.Gateway != "gw-1" || env.ClientId != "" {
		t.Errorf("quota tombstone: %v, %v", env, err)
	}
	for _, key := range []string{"no-separator", "bad%zz/c"} {
		if err := decode(&kafka.Record{Topic: kafka.TopicPresence, Key: []byte(key)}, env, kafka.TopicQuotas); err == nil {
			t.Errorf("tombstone key %q decoded as %v", key, env)
		}
	}
	// Without a key a record without a value is no tombstone: an empty
	// envelope.
	if err := decode(&kafka.Record{Topic: kafka.TopicPresence}, env, kafka.TopicQuotas); err != nil || env.Tenant != "" || recordType(&kafka.Record{}) == TypeTombstone {
		t.Errorf("keyless record without a value: %v, %v", env, err)
	}
}
