package bridge

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/shoal-mqtt/shoal/internal/mqtt/topic"
	"github.com/shoal-mqtt/shoal/kafka"
)

// The placeholders of the templates. Out templates (kafka_topic, key)
// render a message that is bridged out; in templates (mqtt_topic) a record
// that is bridged in.
const (
	PlaceholderTenant   = "{tenant}"
	PlaceholderTopic    = "{topic}"
	PlaceholderLevel    = "{topic[N]}"
	PlaceholderClientID = "{client_id}"
	PlaceholderKey      = "{key}"
	PlaceholderHeader   = "{header.NAME}"
)

// maxLevel bounds N of {topic[N]}: a topic of MaxLen bytes has at most
// this many levels.
const maxLevel = topic.MaxLen / 2

type partKind uint8

const (
	partLiteral partKind = iota
	partTenant
	partTopic
	partLevel
	partClientID
	partKey
	partHeader
)

// part is one piece of a template: literal text or a placeholder.
type part struct {
	kind  partKind
	text  string // the literal text, or the header's name
	level int    // N of {topic[N]}
	off   int    // where the part starts in the template
}

// TemplateError is a template that does not compile: Offset is the byte
// of the template, counted from 0, where the fault is (the '{' of a
// placeholder that is not known). Placeholder is that placeholder, braces
// included, or "" when the fault is an unbalanced brace.
type TemplateError struct {
	Template    string
	Offset      int
	Placeholder string
	Reason      string
}

func (e *TemplateError) Error() string {
	return fmt.Sprintf("%q at offset %d: %s", e.Template, e.Offset, e.Reason)
}

// OutTemplate is a compiled template of an out mapping: kafka_topic or
// key. Its placeholders are {tenant}, {topic} (the MQTT topic as its
// client published it, without the tenant), {topic[N]} (level N of the
// topic, counted from 0) and {client_id}. A level that the topic does not
// have renders as empty: {topic[2]} of "a/b" is "", as is {topic[1]} of
// "a/" (a level that is there and empty). The zero value renders nothing:
// a key of "" is no key.
type OutTemplate struct {
	src   string
	parts []part
}

// Literal returns the text of a template without placeholders, and
// whether it has none: a kafka_topic known before any message.
func (t OutTemplate) Literal() (string, bool) {
	for _, p := range t.parts {
		if p.kind != partLiteral {
			return "", false
		}
	}
	return t.src, t.src != ""
}

// InTemplate is a compiled template of an in mapping: mqtt_topic. Its
// placeholders are {key} (the record's key) and {header.NAME} (the value
// of the record's first header NAME; a header the record does not have
// renders as empty). NAME is everything between "header." and "}".
type InTemplate struct {
	src   string
	parts []part
}

// CompileOut compiles an out template; the error is a *TemplateError.
func CompileOut(src string) (OutTemplate, error) {
	parts, err := parse(src, outPlaceholder)
	return OutTemplate{src: src, parts: parts}, err
}

// CompileIn compiles an in template; the error is a *TemplateError. It
// checks the placeholders only: the checks of the topic it renders are the
// configuration's (Config.Validate) and ValidTopic's.
func CompileIn(src string) (InTemplate, error) {
	parts, err := parse(src, inPlaceholder)
	return InTemplate{src: src, parts: parts}, err
}

// String returns the template as written.
func (t OutTemplate) String() string { return t.src }

// String returns the template as written.
func (t InTemplate) String() string { return t.src }

// IsZero reports whether t is the empty template: a key of "" means
// records without a key.
func (t OutTemplate) IsZero() bool { return len(t.parts) == 0 }

// Append appends the template rendered for a message of tenant, published
// on name by clientID, to dst. It allocates only when dst must grow.
func (t OutTemplate) Append(dst []byte, tenant, name, clientID string) []byte {
	for i := range t.parts {
		p := &t.parts[i]
		switch p.kind {
		case partLiteral:
			dst = append(dst, p.text...)
		case partTenant:
			dst = append(dst, tenant...)
		case partTopic:
			dst = append(dst, name...)
		case partLevel:
			dst = append(dst, level(name, p.level)...)
		case partClientID:
			dst = append(dst, clientID...)
		}
	}
	return dst
}

// Append appends the template rendered for a record of key and headers to
// dst. It allocates only when dst must grow.
func (t InTemplate) Append(dst, key []byte, headers []kafka.Header) []byte {
	for i := range t.parts {
		p := &t.parts[i]
		switch p.kind {
		case partLiteral:
			dst = append(dst, p.text...)
		case partKey:
			dst = append(dst, key...)
		case partHeader:
			for _, h := range headers {
				if h.Key == p.text {
					dst = append(dst, h.Value...)
					break
				}
			}
		}
	}
	return dst
}

// level returns level n of the topic name, "" when it has fewer levels.
func level(name string, n int) string {
	for ; n > 0; n-- {
		i := strings.IndexByte(name, '/')
		if i < 0 {
			return ""
		}
		name = name[i+1:]
	}
	if i := strings.IndexByte(name, '/'); i >= 0 {
		return name[:i]
	}
	return name
}

// parse splits src into its parts; resolve turns a placeholder's name (the
// text between the braces) into its part, or says why it cannot.
func parse(src string, resolve func(name string) (part, string)) ([]part, error) {
	var parts []part
	lit := 0 // where the literal text being read starts
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '}':
			return nil, &TemplateError{Template: src, Offset: i, Reason: `"}" without "{" before it`}
		case '{':
			n := strings.IndexAny(src[i+1:], "{}")
			if n < 0 {
				return nil, &TemplateError{Template: src, Offset: i, Reason: `"{" without "}" after it`}
			}
			end := i + 1 + n
			if src[end] == '{' {
				return nil, &TemplateError{Template: src, Offset: end, Reason: fmt.Sprintf(`"{" inside the placeholder that starts at offset %d`, i)}
			}
			p, why := resolve(src[i+1 : end])
			if why != "" {
				return nil, &TemplateError{Template: src, Offset: i, Placeholder: src[i : end+1], Reason: why}
			}
			if lit < i {
				parts = append(parts, part{kind: partLiteral, text: src[lit:i], off: lit})
			}
			p.off = i
			parts = append(parts, p)
			i, lit = end, end+1
		}
	}
	if lit < len(src) {
		parts = append(parts, part{kind: partLiteral, text: src[lit:], off: lit})
	}
	return parts, nil
}

func outPlaceholder(name string) (part, string) {
	switch name {
	case "tenant":
		return part{kind: partTenant}, ""
	case "topic":
		return part{kind: partTopic}, ""
	case "client_id":
		return part{kind: partClientID}, ""
	}
	if n, ok := strings.CutPrefix(name, "topic["); ok {
		n, ok = strings.CutSuffix(n, "]")
		if !ok || n == "" || strings.Trim(n, "0123456789") != "" || len(n) > 5 {
			return part{}, fmt.Sprintf("{%s}: the level of {topic[N]} is a number, counted from 0", name)
		}
		l, _ := strconv.Atoi(n)
		if l > maxLevel {
			return part{}, fmt.Sprintf("{%s}: a topic has at most %d levels", name, maxLevel+1)
		}
		return part{kind: partLevel, level: l}, ""
	}
	return part{}, fmt.Sprintf("unknown placeholder {%s}: out templates take %s, %s, %s and %s",
		name, PlaceholderTenant, PlaceholderTopic, PlaceholderLevel, PlaceholderClientID)
}

func inPlaceholder(name string) (part, string) {
	if name == "key" {
		return part{kind: partKey}, ""
	}
	if h, ok := strings.CutPrefix(name, "header."); ok {
		if h == "" {
			return part{}, "{header.}: the header's name is missing"
		}
		return part{kind: partHeader, text: h}, ""
	}
	return part{}, fmt.Sprintf("unknown placeholder {%s}: in templates take %s and %s", name, PlaceholderKey, PlaceholderHeader)
}

// ErrDollarTopic is a topic that an in mapping may not publish on: one that
// starts with '$' ($SYS, $share), which MQTT keeps for the broker.
var ErrDollarTopic = errors.New("topic name: starts with '$', which MQTT keeps for the broker ($SYS) and shared subscriptions")

// ValidTopic checks a topic rendered by an in template before it is
// published: a topic name as package topic checks a PUBLISH's
// (topic.ValidateName: not empty, no '+' or '#', no U+0000, UTF-8, at most
// topic.MaxLen bytes), that does not start with '$' (ErrDollarTopic). The
// values of {key} and {header.NAME} are the producer's, so a rendered topic
// can fail where the template passed the configuration's checks. It does
// not allocate.
func ValidTopic(name string) error {
	if err := topic.ValidateName(name); err != nil {
		return err
	}
	if name[0] == '$' {
		return ErrDollarTopic
	}
	return nil
}

// checkTopic is the configuration's check of an in template: whatever its
// placeholders render, its literal text must hold no '+' or '#' (nor
// U+0000), must not start with '$', and must be there, so that the
// template cannot render an empty topic.
func (t InTemplate) checkTopic() error {
	n := 0
	for i, p := range t.parts {
		if p.kind != partLiteral {
			continue
		}
		if err := topic.ValidateName(p.text); err != nil {
			off := p.off + max(strings.IndexAny(p.text, "+#\x00"), 0)
			return fmt.Errorf("%q: its text at offset %d: %w", t.src, off, err)
		}
		if i == 0 && p.text[0] == '$' {
			return fmt.Errorf("%q: %w", t.src, ErrDollarTopic)
		}
		n += len(p.text)
	}
	switch {
	case n == 0 && len(t.parts) == 0:
		return errors.New("must not be empty")
	case n == 0:
		return fmt.Errorf("%q can render an empty topic: give it text besides the placeholders (\"from-kafka/{key}\")", t.src)
	case n > topic.MaxLen:
		return fmt.Errorf("%q: longer than %d bytes", t.src, topic.MaxLen)
	}
	return nil
}

// MaxKafkaTopicLen is the longest Kafka topic name.
const MaxKafkaTopicLen = 249

// Topic name prefixes no mapping may write or read: Kafka's internal
// topics (__consumer_offsets, __transaction_state) and Shoal's own
// (kafka.TopicMessages and the others), whose records are Shoal's
// envelopes, not plain records.
const (
	kafkaInternalPrefix = "__"
	shoalTopicPrefix    = "shoal."
)

// ValidKafkaTopic checks a Kafka topic name: 1 to 249 characters of
// a-z A-Z 0-9 '.' '_' '-', not "." or "..". It also refuses the names
// of Kafka's internal topics (starting with "__") and of Shoal's own
// (starting with "shoal."), so that no placeholder value (a client's topic
// in {topic[0]}) can make a mapping write into them. Out templates render
// the names of the topics they write, so their names are checked with it
// before each produce. It does not allocate.
func ValidKafkaTopic(name string) error {
	switch {
	case name == "":
		return errors.New("kafka topic: empty")
	case len(name) > MaxKafkaTopicLen:
		return fmt.Errorf("kafka topic: longer than %d characters", MaxKafkaTopicLen)
	case name == "." || name == "..":
		return fmt.Errorf("kafka topic: %q is not a topic name", name)
	}
	for i := 0; i < len(name); i++ {
		if !kafkaTopicChar(name[i]) {
			return fmt.Errorf("kafka topic: %q at offset %d is not allowed (only a-z A-Z 0-9 . _ -)", firstRune(name[i:]), i)
		}
	}
	return reservedKafkaTopic(name)
}

func reservedKafkaTopic(name string) error {
	switch {
	case strings.HasPrefix(name, kafkaInternalPrefix):
		return fmt.Errorf("kafka topic: %q starts with %q, as Kafka's internal topics", name, kafkaInternalPrefix)
	case strings.HasPrefix(name, shoalTopicPrefix):
		return fmt.Errorf("kafka topic: %q starts with %q, as Shoal's own topics", name, shoalTopicPrefix)
	}
	return nil
}

// firstRune is the character s starts with, for error messages.
func firstRune(s string) rune {
	r, _ := utf8.DecodeRuneInString(s)
	return r
}

func kafkaTopicChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// seg is one piece of what an out template can render for the messages of
// one mapping: text known at configuration time, or a value that is not
// known (any), which may hold '/' (slash) or not, and which is empty or
// starts with '/' (sep: the levels of a trailing "/#", which "a/#" matches
// with "a" too).
type seg struct {
	text  string
	any   bool
	slash bool
	sep   bool
	from  part // the template's part it comes from
}

// filterLevels splits a filter into its levels; hash says whether the
// last one is '#'.
func filterLevels(filter string) (levels []string, hash bool) {
	levels = strings.Split(filter, "/")
	return levels, levels[len(levels)-1] == "#"
}

// pattern is what t renders for the messages of tenant that match filter:
// {tenant} is known, {topic[N]} is known where level N of the filter is
// text, and absent where the filter has fewer levels and no '#' (an
// error: the placeholder would always be empty); {topic} is the filter
// with its wildcards unknown; {client_id} is unknown.
func (t OutTemplate) pattern(tenant, filter string) ([]seg, error) {
	levels, hash := filterLevels(filter)
	var segs []seg
	for _, p := range t.parts {
		switch p.kind {
		case partLiteral:
			segs = append(segs, seg{text: p.text, from: p})
		case partTenant:
			segs = append(segs, seg{text: tenant, from: p})
		case partClientID:
			segs = append(segs, seg{any: true, slash: true, from: p})
		case partLevel:
			switch {
			case p.level >= len(levels) && !hash:
				return nil, fmt.Errorf("%q: {topic[%d]} is always empty: mqtt_filter %q has %d levels, counted from 0", t.src, p.level, filter, len(levels))
			case p.level >= len(levels)-1 && hash, levels[p.level] == "+":
				segs = append(segs, seg{any: true, from: p})
			default:
				segs = append(segs, seg{text: levels[p.level], from: p})
			}
		case partTopic:
			for i, l := range levels {
				switch {
				case l == "#":
					segs = append(segs, seg{any: true, slash: true, sep: i > 0, from: p})
				case i > 0:
					segs = append(segs, seg{text: "/", from: p})
					fallthrough
				default:
					if l == "+" {
						segs = append(segs, seg{any: true, from: p})
					} else {
						segs = append(segs, seg{text: l, from: p})
					}
				}
			}
		}
	}
	return segs, nil
}

// checkKafkaTopic is the configuration's check of a kafka_topic template of
// an out mapping, on what is known of the names it renders (pattern): the
// text they hold whatever the message must be allowed in a Kafka topic
// name; a template that renders one name only must render a valid one
// (ValidKafkaTopic), as must one whose known beginning is reserved.
func checkKafkaTopic(t OutTemplate, segs []seg) error {
	if t.IsZero() {
		return errors.New("must not be empty")
	}
	known, prefix, fixed := 0, "", true
	for _, s := range segs {
		if s.any {
			fixed = false
			continue
		}
		for i := 0; i < len(s.text); i++ {
			if kafkaTopicChar(s.text[i]) {
				continue
			}
			switch s.from.kind {
			case partLiteral:
				return fmt.Errorf("%q: %q at offset %d is not allowed in a Kafka topic name (only a-z A-Z 0-9 . _ -)", t.src, firstRune(s.text[i:]), s.from.off+i)
			case partTopic:
				return fmt.Errorf("%q: {topic} at offset %d always renders %q for this mqtt_filter, which is not allowed in a Kafka topic name (only a-z A-Z 0-9 . _ -): take one level, {topic[N]}", t.src, s.from.off, firstRune(s.text[i:]))
			}
			return fmt.Errorf("%q: the placeholder at offset %d always renders %q, which is not allowed in a Kafka topic name (only a-z A-Z 0-9 . _ -)", t.src, s.from.off, firstRune(s.text[i:]))
		}
		known += len(s.text)
		if fixed {
			prefix += s.text
		}
	}
	if fixed {
		if err := ValidKafkaTopic(prefix); err != nil {
			return fmt.Errorf("%q renders %q: %w", t.src, prefix, err)
		}
		return nil
	}
	if known > MaxKafkaTopicLen {
		return fmt.Errorf("%q: its text is longer than a Kafka topic name (%d characters)", t.src, MaxKafkaTopicLen)
	}
	if strings.HasPrefix(prefix, kafkaInternalPrefix) || strings.HasPrefix(prefix, shoalTopicPrefix) {
		return fmt.Errorf("%q: %w", t.src, reservedKafkaTopic(prefix))
	}
	return nil
}

// mayRender reports whether a template of pattern segs can render name.
func mayRender(segs []seg, name string) bool {
	if len(segs) == 0 {
		return name == ""
	}
	s := segs[0]
	if s.sep {
		if mayRender(segs[1:], name) {
			return true
		}
		rest, ok := strings.CutPrefix(name, "/")
		s.sep = false
		return ok && mayRender(append([]seg{s}, segs[1:]...), rest)
	}
	if !s.any {
		rest, ok := strings.CutPrefix(name, s.text)
		return ok && mayRender(segs[1:], rest)
	}
	for i := 0; i <= len(name); i++ {
		if mayRender(segs[1:], name[i:]) {
			return true
		}
		if i < len(name) && name[i] == '/' && !s.slash {
			return false
		}
	}
	return false
}

// checkLevels refuses a {topic[N]} that is always empty for the messages
// of filter (a key template's check; kafka_topic's is pattern's).
func (t OutTemplate) checkLevels(filter string) error {
	_, err := t.pattern("", filter)
	return err
}
