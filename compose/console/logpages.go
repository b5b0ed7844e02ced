package console

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shoal-mqtt/shoal/compose/replay"
	"github.com/shoal-mqtt/shoal/kafka"
)

// The trace and the log pages read the event log as `shoal trace` and
// `shoal replay` do (compose/replay), with a tenant's session held to its
// tenant's events.

const (
	// logPageSize is the events of a page of the log's table.
	logPageSize = 100
	// maxDownload bounds the events of a JSON download.
	maxDownload = 100000
	// logTimeout bounds one query of the log.
	logTimeout = 30 * time.Second
)

// logQuery is the log page's form.
type logQuery struct {
	Since, From, To string
	Tenant          string
	Client, Topic   string
	Types, Topics   string
	Page            int
}

// logRow is an event of the log's table.
type logRow struct {
	Time                           time.Time
	Type, Tenant, Client, Topic    string
	QoS                            string
	MessageID, Payload, Where, Key string
}

// logView is the log page's data.
type logView struct {
	Q              logQuery
	Rows           []logRow
	Read           int64
	Prev, Next     template.URL
	Download       template.URL
	Ran, HasTenant bool
}

// options turns the form into replay's options; a tenant's session reads
// its tenant's events alone.
func (c *Console) logOptions(r *http.Request, s *session) (replay.Options, logQuery, error) {
	q := r.URL.Query()
	lq := logQuery{Since: q.Get("since"), From: q.Get("from"), To: q.Get("to"), Tenant: q.Get("tenant"),
		Client: q.Get("client"), Topic: q.Get("topic"), Types: q.Get("type"), Topics: q.Get("topics")}
	lq.Page, _ = strconv.Atoi(q.Get("page"))
	lq.Page = max(lq.Page, 0)
	o := replay.DefaultOptions()
	o.TenantSeparator = c.opt.TenantSeparator
	var errs []error
	if !s.admin {
		if q.Has("tenant") && lq.Tenant != s.tenant {
			return o, lq, errNotYours
		}
		lq.Tenant = s.tenant
		o.Tenant, o.TenantSet = s.tenant, true
	} else if q.Has("tenant") && lq.Tenant != "*" {
		o.Tenant, o.TenantSet = lq.Tenant, true
	}
	if lq.Since == "" && lq.From == "" {
		lq.Since = "1h"
	}
	if lq.Since != "" {
		d, err := time.ParseDuration(lq.Since)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("since: %q is not a duration such as 10m", lq.Since))
		} else {
			o.From = c.opt.Now().Add(-d)
		}
	}
	for _, f := range []struct {
		name, v string
		t       *time.Time
	}{{"from", lq.From, &o.From}, {"to", lq.To, &o.To}} {
		if f.v == "" {
			continue
		}
		t, err := parseFormTime(f.v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a time such as 2026-12-07T10:00:00Z", f.name, f.v))
		}
		*f.t = t
	}
	o.ClientID, o.TopicFilter = lq.Client, lq.Topic
	o.Types = splitList(lq.Types)
	if t := splitList(lq.Topics); len(t) > 0 {
		o.Topics = t
	} else {
		lq.Topics = "messages"
	}
	if err := errors.Join(errs...); err != nil {
		return o, lq, err
	}
	return o, lq, o.Validate()
}

// parseFormTime reads RFC 3339, or what a datetime-local field sends (in
// UTC).
func parseFormTime(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("not a time")
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// rows is a Sink keeping the events of one page.
type rows struct {
	skip int
	keep []logRow
	seen int
}

func (p *rows) Write(e *replay.Event) error {
	p.seen++
	if p.seen <= p.skip {
		return nil
	}
	row := logRow{Time: e.Time.UTC(), Type: e.Type, Tenant: e.Env.GetTenant(), Client: e.Env.GetClientId(), QoS: "-",
		Where: fmt.Sprintf("%s:%d/%d", strings.TrimPrefix(e.KafkaTopic, "shoal."), e.Partition, e.Offset)}
	if id := e.Env.GetMessageId(); id != nil {
		row.MessageID = kafka.FormatMessageID(id)
	}
	if m := e.Message; m != nil {
		row.Topic, row.QoS, row.Payload = m.GetTopic(), strconv.Itoa(int(m.GetQos())), preview(m.GetPayload())
	}
	p.keep = append(p.keep, row)
	return nil
}

func (p *rows) Flush() error { return nil }

// preview is the start of a payload for the table: text as it is (the
// page escapes it), else its size.
func preview(b []byte) string {
	const n = 80
	if len(b) == 0 {
		return ""
	}
	if !utf8.Valid(b) {
		return fmt.Sprintf("(%d bytes, binary)", len(b))
	}
	s := string(b)
	if utf8.RuneCountInString(s) > n {
		r := []rune(s)
		return string(r[:n]) + "…"
	}
	return s
}

func (c *Console) logPage(w http.ResponseWriter, r *http.Request, s *session) {
	o, lq, err := c.logOptions(r, s)
	v := logView{Q: lq, HasTenant: r.URL.Query().Has("tenant")}
	if errors.Is(err, errNotYours) {
		c.refuse(w, r, s, err)
		return
	}
	if err != nil || !r.URL.Query().Has("run") {
		c.render(w, r, s, http.StatusOK, "log", "Log", v, errText(err))
		return
	}
	v.Ran = true
	l, err := c.eventLog(r.Context())
	if err != nil {
		c.render(w, r, s, http.StatusOK, "log", "Log", v, errText(err))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), logTimeout)
	defer cancel()
	sink := &rows{skip: lq.Page * logPageSize}
	o.Limit = int64((lq.Page+1)*logPageSize + 1)
	st, err := replay.Run(ctx, l.Client, o, sink, nil)
	if errors.Is(err, replay.ErrNoEvents) {
		err = nil
	}
	v.Read = st.Read
	if len(sink.keep) > logPageSize {
		sink.keep = sink.keep[:logPageSize]
		v.Next = withParam(r, "page", strconv.Itoa(lq.Page+1))
	}
	if lq.Page > 0 {
		v.Prev = withParam(r, "page", strconv.Itoa(lq.Page-1))
	}
	v.Rows = sink.keep
	dl := r.URL.Query()
	dl.Del("page")
	dl.Del("run")
	v.Download = pageURL("/log.json", dl)
	c.render(w, r, s, http.StatusOK, "log", "Log", v, errText(err))
}

// withParam is the request's URL with k set to v.
func withParam(r *http.Request, k, v string) template.URL {
	q := r.URL.Query()
	q.Set(k, v)
	return pageURL(r.URL.Path, q)
}

// logJSON downloads the query's events as JSON lines, as `shoal replay`
// prints them, up to maxDownload (limit= fewer).
func (c *Console) logJSON(w http.ResponseWriter, r *http.Request, s *session) {
	o, _, err := c.logOptions(r, s)
	switch {
	case errors.Is(err, errNotYours):
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.Limit = maxDownload
	if n, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && n > 0 && n < maxDownload {
		o.Limit = int64(n)
	}
	l, err := c.eventLog(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), logTimeout)
	defer cancel()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", `attachment; filename="shoal-log.jsonl"`)
	sink := replay.NewJSONSink(w)
	if _, err := replay.Run(ctx, l.Client, o, sink, nil); err != nil && !errors.Is(err, replay.ErrNoEvents) {
		c.opt.Log.Warn("console log download failed", "err", err)
	}
	_ = sink.Flush()
}

// traceView is the trace page's data.
type traceView struct {
	ID    string
	Steps []replay.Step
}

func (c *Console) trace(w http.ResponseWriter, r *http.Request, s *session) {
	v := traceView{ID: strings.TrimSpace(r.URL.Query().Get("id"))}
	if v.ID == "" {
		c.render(w, r, s, http.StatusOK, "trace", "Trace", v, "")
		return
	}
	id, err := kafka.ParseMessageID(v.ID)
	if err != nil {
		c.render(w, r, s, http.StatusOK, "trace", "Trace", v, err.Error())
		return
	}
	l, err := c.eventLog(r.Context())
	if err != nil {
		c.render(w, r, s, http.StatusOK, "trace", "Trace", v, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), logTimeout)
	defer cancel()
	o := replay.DefaultOptions()
	o.TenantSeparator = c.opt.TenantSeparator
	if !s.admin {
		o.Tenant, o.TenantSet = s.tenant, true
	}
	evs, err := replay.Trace(ctx, l.Client, id, o)
	if err == nil && !s.admin {
		// Every event of a message is its tenant's; one of another
		// tenant's is not shown, nor said to exist.
		for _, e := range evs {
			if e.Env.GetTenant() != s.tenant {
				evs, err = nil, replay.ErrNoMessage
				break
			}
		}
	}
	v.Steps = replay.Timeline(evs)
	c.render(w, r, s, http.StatusOK, "trace", "Trace "+v.ID, v, errText(err))
}
