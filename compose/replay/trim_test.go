package replay

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// TestTraceTrimmed: a message whose publish retention deleted is not
// merely unknown: the trace says the log now starts later, where and
// when; with later messages of the same gateway in the log, that the
// message was published before them. A search that begins after the
// log's new start says only that there is no such message.
func TestTraceTrimmed(t *testing.T) {
	c := newTestLog(t, 20*time.Millisecond)
	ms := time.Millisecond
	// Older than retention.ms: the next check deletes them.
	old := time.Now().Add(-kafka.DefaultRetention - 24*time.Hour)
	produce(t, c, []rec{
		{kafka.TopicMessages, 0, old, 1},
		{kafka.TopicMessages, 0, old.Add(ms), 2},
		{kafka.TopicMessages, 1, old.Add(2 * ms), 3},
	})
	eventually.OK(t, 10*time.Second, func() string {
		starts, err := c.StartOffsets(t.Context(), kafka.TopicMessages)
		if err != nil {
			t.Fatal(err)
		}
		if starts[0] != 2 || starts[1] != 1 {
			return fmt.Sprintf("retention did not delete the old records: the partitions start at %v", starts)
		}
		return ""
	})
	now := time.Now().Truncate(ms)
	produce(t, c, []rec{
		{kafka.TopicMessages, 0, now, 4},
		{kafka.TopicMessages, 1, now.Add(ms), 5},
		{kafka.TopicMessages, 2, now.Add(2 * ms), 6},
	})

	evs, err := Trace(t.Context(), c, &eventspb.MessageID{GatewayEpoch: 1, Seq: 5}, DefaultOptions())
	if err != nil || len(evs) != 1 || evs[0].Type != kafka.EventPublish || evs[0].Offset != 1 {
		t.Fatalf("a message still in the log: %v, %v", evs, err)
	}

	_, err = Trace(t.Context(), c, &eventspb.MessageID{GatewayEpoch: 1, Seq: 2}, DefaultOptions())
	var te *TrimmedError
	if !errors.As(err, &te) || !errors.Is(err, ErrNoMessage) {
		t.Fatalf("a deleted message: %v, want a TrimmedError", err)
	}
	wantOldest := LogStart{Topic: kafka.TopicMessages, Partition: 0, Offset: 2, Time: now}
	wantNewest := LogStart{Topic: kafka.TopicMessages, Partition: 1, Offset: 1, Time: now.Add(ms)}
	if !te.Oldest.Time.Equal(now) || te.Oldest.Offset != 2 || te.Oldest.Partition != 0 ||
		!te.Newest.Time.Equal(now.Add(ms)) || te.Newest.Offset != 1 || te.Newest.Partition != 1 || te.Trimmed != 2 || te.Partitions != 4 {
		t.Errorf("the log's start: %+v, %+v, %d of %d trimmed; want %+v, %+v, 2 of 4", te.Oldest, te.Newest, te.Trimmed, te.Partitions, wantOldest, wantNewest)
	}
	if kafka.FormatMessageID(te.Later) != "0000000000000001-4" || !te.LaterTime.Equal(now) {
		t.Errorf("the oldest later message of its gateway: %s of %s, want 0000000000000001-4 of %s", kafka.FormatMessageID(te.Later), te.LaterTime, now)
	}
	stamp := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
	for _, want := range []string{
		"0000000000000001-2: no such message in the log any more: it was published before 0000000000000001-4 (" + stamp(now) + ")",
		"the log now starts later: shoal.messages partition 0 starts at offset 2, a record of " + stamp(now),
		"and partition 1 starts at offset 1, a record of " + stamp(now.Add(ms)),
		"past the topic's retention (in 2 of its 4 partitions)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}

	// Another gateway's message: retention may have deleted it.
	_, err = Trace(t.Context(), c, &eventspb.MessageID{GatewayEpoch: 7, Seq: 1}, DefaultOptions())
	if !errors.As(err, &te) || te.Later != nil {
		t.Fatalf("an unknown gateway's message: %v, want a TrimmedError without a later message", err)
	}
	if want := "0000000000000007-1: no such message in the log, which now starts later: shoal.messages partition 0 starts at offset 2"; !strings.HasPrefix(err.Error(), want) ||
		!strings.HasSuffix(err.Error(), "a message published before then may have been one of them") {
		t.Errorf("%q, want it to begin %q", err, want)
	}

	// From the newest start on, retention deleted nothing.
	o := DefaultOptions()
	o.From = now.Add(ms)
	_, err = Trace(t.Context(), c, &eventspb.MessageID{GatewayEpoch: 7, Seq: 1}, o)
	if errors.As(err, &te) || !errors.Is(err, ErrNoMessage) {
		t.Errorf("a search from the log's new start: %v, want only ErrNoMessage", err)
	}
}
