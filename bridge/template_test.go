package bridge

import (
	"errors"
	"strings"
	"testing"

	"github.com/shoal-mqtt/shoal/internal/mqtt/topic"
	"github.com/shoal-mqtt/shoal/kafka"
)

func TestOutTemplateRender(t *testing.T) {
	for _, c := range []struct {
		tmpl, tenant, topic, client, want string
	}{
		{"iot.telemetry", "acme", "plant/1/telemetry", "c1", "iot.telemetry"},
		{"{topic}", "acme", "plant/1/telemetry", "c1", "plant/1/telemetry"},
		{"{tenant}.{topic[1]}", "acme", "plant/1/telemetry", "c1", "acme.1"},
		{"{topic[0]}-{topic[2]}", "", "a/b/c", "", "a-c"},
		{"x{topic[3]}y", "", "a/b", "", "xy"}, // a level the topic does not have
		{"x{topic[1]}y", "", "a/", "", "xy"},  // a level that is there, empty
		{"x{topic[0]}y", "", "/a", "", "xy"},  // the empty first level
		{"{topic[1]}", "", "/a", "", "a"},     // the level after it
		{"{topic[0]}", "", "single", "", "single"},
		{"dev-{client_id}!", "t", "a", "sensor-7", "dev-sensor-7!"},
		{"{tenant}{tenant}", "ab", "a", "", "abab"},
		{"", "acme", "a", "c", ""},
	} {
		tm, err := CompileOut(c.tmpl)
		if err != nil {
			t.Fatalf("CompileOut(%q): %v", c.tmpl, err)
		}
		got := string(tm.Append([]byte("pre:"), c.tenant, c.topic, c.client))
		if got != "pre:"+c.want {
			t.Errorf("%q of (%q, %q, %q) = %q, want %q", c.tmpl, c.tenant, c.topic, c.client, got, "pre:"+c.want)
		}
		if tm.String() != c.tmpl || tm.IsZero() != (c.tmpl == "") {
			t.Errorf("%q: String %q, IsZero %v", c.tmpl, tm.String(), tm.IsZero())
		}
	}
}

func TestInTemplateRender(t *testing.T) {
	hs := []kafka.Header{
		{Key: "site", Value: []byte("north")},
		{Key: "mqtt.topic", Value: []byte("orig/topic")},
		{Key: "site", Value: []byte("south")},
		{Key: "empty"},
	}
	for _, c := range []struct {
		tmpl string
		key  []byte
		want string
	}{
		{"plant/{key}/command", []byte("p1"), "plant/p1/command"},
		{"plant/{key}/command", nil, "plant//command"},
		{"{header.site}/{key}", []byte("k"), "north/k"}, // the first header of the name
		{"x/{header.missing}/y", nil, "x//y"},
		{"x/{header.empty}", nil, "x/"},
		{"from-kafka/{header.mqtt.topic}", nil, "from-kafka/orig/topic"},
		{"a{header.site}{header.site}", nil, "anorthnorth"},
	} {
		tm, err := CompileIn(c.tmpl)
		if err != nil {
			t.Fatalf("CompileIn(%q): %v", c.tmpl, err)
		}
		if got := string(tm.Append(nil, c.key, hs)); got != c.want {
			t.Errorf("%q of key %q = %q, want %q", c.tmpl, c.key, got, c.want)
		}
	}
}

// TestTemplateErrors: an unknown placeholder or an unbalanced brace is a
// *TemplateError naming the placeholder and its offset.
func TestTemplateErrors(t *testing.T) {
	for _, c := range []struct {
		in          bool
		tmpl        string
		offset      int
		placeholder string
		reason      string
	}{
		{false, "iot.{foo}", 4, "{foo}", "unknown placeholder {foo}"},
		{false, "{Tenant}", 0, "{Tenant}", "unknown placeholder {Tenant}"},
		{false, "a{}", 1, "{}", "unknown placeholder {}"},
		{false, "{key}", 0, "{key}", "out templates take {tenant}, {topic}, {topic[N]} and {client_id}"},
		{false, "x{topic[x]}", 1, "{topic[x]}", "is a number"},
		{false, "{topic[]}", 0, "{topic[]}", "is a number"},
		{false, "{topic[-1]}", 0, "{topic[-1]}", "is a number"},
		{false, "{topic[1]x}", 0, "{topic[1]x}", "is a number"},
		{false, "{topic[99999]}", 0, "{topic[99999]}", "at most 32768 levels"},
		{false, "{topic[123456]}", 0, "{topic[123456]}", "is a number"},
		{false, "a}b", 1, "", `"}" without "{"`},
		{false, "{topic}}", 7, "", `"}" without "{"`},
		{false, "ab{topic", 2, "", `"{" without "}"`},
		{false, "{a{topic}}", 2, "", `inside the placeholder that starts at offset 0`},
		{true, "plant/{topic}", 6, "{topic}", "in templates take {key} and {header.NAME}"},
		{true, "{header.}/x", 0, "{header.}", "name is missing"},
		{true, "{headers.a}/x", 0, "{headers.a}", "unknown placeholder"},
		{true, "x/{key", 2, "", `"{" without "}"`},
	} {
		var err error
		if c.in {
			_, err = CompileIn(c.tmpl)
		} else {
			_, err = CompileOut(c.tmpl)
		}
		var te *TemplateError
		if !errors.As(err, &te) {
			t.Errorf("%q: %v, want a *TemplateError", c.tmpl, err)
			continue
		}
		if te.Offset != c.offset || te.Placeholder != c.placeholder || te.Template != c.tmpl || !strings.Contains(te.Reason, c.reason) {
			t.Errorf("%q: %+v, want offset %d, placeholder %q, reason with %q", c.tmpl, *te, c.offset, c.placeholder, c.reason)
		}
		if want := "at offset " + itoa(c.offset); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), c.placeholder) {
			t.Errorf("%q: %q does not name %q and %q", c.tmpl, err, c.placeholder, want)
		}
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// TestTemplateRenderAllocs: rendering into a buffer with room allocates
// nothing.
func TestTemplateRenderAllocs(t *testing.T) {
	out, err := CompileOut("{tenant}.{topic[1]}.{topic}-{client_id}")
	if err != nil {
		t.Fatal(err)
	}
	in, err := CompileIn("plant/{key}/{header.site}/command")
	if err != nil {
		t.Fatal(err)
	}
	hs := []kafka.Header{{Key: "a", Value: []byte("1")}, {Key: "site", Value: []byte("north")}}
	key := []byte("p1")
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() {
		buf = out.Append(buf[:0], "acme", "plant/1/telemetry", "c1")
		buf = in.Append(buf[:0], key, hs)
	}); n != 0 {
		t.Errorf("%v allocations per render, want 0", n)
	}
	if string(buf) != "plant/p1/north/command" {
		t.Errorf("rendered %q", buf)
	}
}

func TestValidTopic(t *testing.T) {
	for name, want := range map[string]error{
		"plant/1/command":                   nil,
		"a//b":                              nil,
		"/":                                 nil,
		"a/$SYS":                            nil,
		"":                                  topic.ErrNameEmpty,
		"plant/+/command":                   topic.ErrNameWildcard,
		"plant/#":                           topic.ErrNameWildcard,
		"a\x00b":                            topic.ErrNameNull,
		"a\xffb":                            topic.ErrNameUTF8,
		"$SYS/broker":                       ErrDollarTopic,
		"$share/g/a":                        ErrDollarTopic,
		strings.Repeat("a", topic.MaxLen+1): topic.ErrNameTooLong,
	} {
		if err := ValidTopic(name); !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("ValidTopic(%.20q) = %v, want %v", name, err, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = ValidTopic("plant/1/command"); _ = ValidTopic("$SYS/x") }); n != 0 {
		t.Errorf("ValidTopic: %v allocations, want 0", n)
	}
}

func TestValidKafkaTopic(t *testing.T) {
	for name, want := range map[string]string{
		"iot.telemetry":                      "",
		"A-Z_a-z.0-9":                        "",
		"...":                                "",
		strings.Repeat("a", 249):             "",
		"":                                   "empty",
		".":                                  "not a topic name",
		"..":                                 "not a topic name",
		strings.Repeat("a", 250):             "longer than 249",
		"iot/telemetry":                      `'/' at offset 3`,
		"iot telemetry":                      `' ' at offset 3`,
		"iot.télé":                           `'é' at offset 5`,
		"__consumer_offsets":                 "Kafka's internal topics",
		kafka.TopicMessages:                  "Shoal's own topics",
		"shoal.anything":                     "Shoal's own topics",
		"shoal":                              "",
		"my.shoal.topic":                     "",
		"_single_underscore_is_fine":         "",
		"a.b_c-d.0123456789.ABCDEFGHIJKLMNO": "",
	} {
		err := ValidKafkaTopic(name)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("ValidKafkaTopic(%.20q) = %v, want %q", name, err, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = ValidKafkaTopic("iot.telemetry.acme") }); n != 0 {
		t.Errorf("ValidKafkaTopic: %v allocations, want 0", n)
	}
}

// TestInTemplateCheckTopic: the configuration refuses an mqtt_topic whose
// text holds a wildcard, that starts with '$', or that has no text.
func TestInTemplateCheckTopic(t *testing.T) {
	for tmpl, want := range map[string]string{
		"plant/{key}/command":      "",
		"{key}/x":                  "",
		"{key}/$x":                 "",
		"{header.site}/{key}":      "",
		"a":                        "",
		"":                         "must not be empty",
		"{key}":                    "can render an empty topic",
		"{key}{header.a}":          "can render an empty topic",
		"plant/+/{key}":            "wildcard",
		"plant/{key}/#":            "wildcard",
		"{key}/a+b":                "wildcard",
		"$SYS/{key}":               "starts with '$'",
		"$share/g/{key}":           "starts with '$'",
		"a\x00{key}":               "U+0000",
		strings.Repeat("a", 65536): "longer than 65535",
	} {
		tm, err := CompileIn(tmpl)
		if err != nil {
			t.Fatalf("CompileIn(%.20q): %v", tmpl, err)
		}
		err = tm.checkTopic()
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%.20q: %v, want %q", tmpl, err, want)
		}
	}
}

// TestOutKafkaTopicCheck: the configuration refuses a kafka_topic that
// cannot render a valid Kafka topic name for the messages of its mapping,
// from its text, its tenant and the levels of its filter.
func TestOutKafkaTopicCheck(t *testing.T) {
	for _, c := range []struct {
		tmpl, tenant, filter, want string
	}{
		{"iot.telemetry", "acme", "plant/+/telemetry", ""},
		{"iot.{topic[1]}", "acme", "plant/+/telemetry", ""},
		{"iot.{topic[2]}", "acme", "plant/+/telemetry", ""},
		{"iot.{topic}", "acme", "#", ""},          // a one-level topic renders a valid name
		{"iot.{topic}", "acme", "plant/#", ""},    // so does "plant"
		{"iot.{topic[5]}", "acme", "plant/#", ""}, // "#" may give it levels
		{"{tenant}.{client_id}", "acme", "#", ""},
		{"{topic[0]}", "", "+/x", ""},
		{".{client_id}", "", "#", ""},
		{"", "acme", "#", "must not be empty"},
		{"iot/telemetry", "acme", "#", `'/' at offset 3`},
		{"iot.{topic}", "acme", "plant/+/telemetry", "{topic} at offset 4 always renders '/'"},
		{"iot.{topic}", "acme", "+/+", "{topic} at offset 4 always renders '/'"},
		{"iot.{topic[3]}", "acme", "plant/+/telemetry", "{topic[3]} is always empty"},
		{"iot.{topic[0]}", "acme", "plant site/#", "placeholder at offset 4 always renders ' '"},
		{"{tenant}", "", "#", `renders "": kafka topic: empty`},
		{"{tenant}.x", "acme corp", "#", "placeholder at offset 0 always renders ' '"},
		{"{topic[0]}", "", "shoal.messages/#", "Shoal's own topics"},
		{"shoal.{topic[1]}", "", "a/+", "Shoal's own topics"},
		{"__{client_id}", "", "#", "Kafka's internal topics"},
		{".", "", "#", "not a topic name"},
		{"{topic[1]}", "", "a/..", `renders "..": kafka topic: ".." is not a topic name`},
		{"{topic[1]}{topic[1]}", "", "a/..", ""}, // "...." is one
		{strings.Repeat("a", 250), "", "#", "longer than 249"},
		{"{client_id}" + strings.Repeat("a", 250), "", "#", "longer than a Kafka topic name"},
	} {
		tm, err := CompileOut(c.tmpl)
		if err != nil {
			t.Fatalf("CompileOut(%q): %v", c.tmpl, err)
		}
		segs, err := tm.pattern(c.tenant, c.filter)
		if err == nil {
			err = checkKafkaTopic(tm, segs)
		}
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%.30q (tenant %q, filter %q): %v, want %q", c.tmpl, c.tenant, c.filter, err, c.want)
		}
	}
}

// TestMayRender: what an out mapping's kafka_topic can render, for the
// loop check.
func TestMayRender(t *testing.T) {
	for _, c := range []struct {
		tmpl, tenant, filter, name string
		want                       bool
	}{
		{"iot.telemetry", "", "#", "iot.telemetry", true},
		{"iot.telemetry", "", "#", "iot.commands", false},
		{"iot.{topic[0]}", "", "#", "iot.commands", true},
		{"iot.{topic[0]}", "", "plant/#", "iot.commands", false},
		{"iot.{topic[0]}", "", "plant/#", "iot.plant", true},
		{"iot.{topic[1]}", "", "plant/+", "iot.anything", true},
		{"iot.{topic[1]}", "", "plant/+", "iot.a/b", false}, // a level holds no '/'
		{"{tenant}.commands", "acme", "#", "acme.commands", true},
		{"{tenant}.commands", "acme", "#", "beta.commands", false},
		{"{client_id}.x", "", "#", "a.b.x", true},
		{"{client_id}.x", "", "#", "a.b.y", false},
		{"{topic}", "", "a/#", "a", true},
		{"{topic}", "", "a/#", "ab", false},
		{"{topic}", "", "a/#", "a/b/c", true},
		{"{topic}.x", "", "a/#", "a.x", true},
		{"{topic}.x", "", "a/#", "ab.x", false},
		{"{topic}", "", "a/+", "a/b", true},
		{"{topic[0]}{topic[1]}", "", "+/+", "", true},
	} {
		tm, err := CompileOut(c.tmpl)
		if err != nil {
			t.Fatal(err)
		}
		segs, err := tm.pattern(c.tenant, c.filter)
		if err != nil {
			t.Fatal(err)
		}
		if got := mayRender(segs, c.name); got != c.want {
			t.Errorf("%q (tenant %q, filter %q) may render %q: %v, want %v", c.tmpl, c.tenant, c.filter, c.name, got, c.want)
		}
	}
}
