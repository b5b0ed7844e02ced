package replay

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/shoal-mqtt/shoal/kafka"
)

// TableSink writes one line per event in fixed columns, for people: the
// time (UTC, milliseconds), where it is in the log (topic:partition/offset,
// the topic without its "shoal." prefix), the type, tenant, client, the
// message's topic, QoS and identifier, and the payload's first
// payloadColumn characters (quoted when not plain text).
type TableSink struct {
	w      *bufio.Writer
	header bool
}

// payloadColumn is how much of a payload a table shows.
const payloadColumn = 40

// NewTableSink returns a TableSink writing to w.
func NewTableSink(w io.Writer) *TableSink { return &TableSink{w: bufio.NewWriter(w)} }

const tableFormat = "%-24s %-20s %-21s %-10s %-20s %-24s %-3s %-22s %s\n"

// Write writes e as one line, after the header line the first time.
func (s *TableSink) Write(e *Event) error {
	if !s.header {
		s.header = true
		if _, err := fmt.Fprintf(s.w, tableFormat, "TIME", "WHERE", "TYPE", "TENANT", "CLIENT", "TOPIC", "QOS", "MESSAGE ID", "PAYLOAD"); err != nil {
			return err
		}
	}
	where := strings.TrimPrefix(e.KafkaTopic, "shoal.") + ":" + strconv.Itoa(int(e.Partition)) + "/" + strconv.FormatInt(e.Offset, 10)
	topic, qos, payload := "-", "-", ""
	if m := e.Message; m != nil {
		topic, qos, payload = m.Topic, strconv.Itoa(int(m.Qos)), shortPayload(m.Payload)
	}
	id := kafka.FormatMessageID(e.Env.GetMessageId())
	if id == "" {
		id = "-"
	}
	tenant := e.Env.Tenant
	if tenant == "" {
		tenant = "-"
	}
	client := e.Env.ClientId
	if client == "" {
		client = "-"
	}
	_, err := fmt.Fprintf(s.w, tableFormat, e.Time.UTC().Format("2006-01-02T15:04:05.000Z"), where, e.Type, tenant, client, topic, qos, id, payload)
	return err
}

// Flush writes out the buffered lines.
func (s *TableSink) Flush() error { return s.w.Flush() }

// shortPayload is a payload as a table shows it: the text itself when it
// is printable UTF-8, else quoted, cut to payloadColumn characters.
func shortPayload(p []byte) string {
	s := string(p)
	plain := utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) < 0
	if !plain {
		s = strconv.Quote(s)
	}
	if utf8.RuneCountInString(s) > payloadColumn {
		r := []rune(s)
		s = string(r[:payloadColumn-1]) + "…"
	}
	return s
}
