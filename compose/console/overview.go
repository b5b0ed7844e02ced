package console

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shoal-mqtt/shoal/compose/admin"
)

// The overview's live chart: the console samples every server's counters
// when a browser asks for the overview (every 2 s while one shows it),
// keeps the last chartSamples of them, and draws the messages in and out
// per second as an SVG the page replaces in place. No sampling happens
// while no one looks.

const (
	chartSamples = 150 // 5 minutes at one sample every 2 s
	// minSampleGap keeps two browsers from sampling twice a second.
	minSampleGap = time.Second
	chartW       = 640.0
	chartH       = 160.0
)

// counters are a tenant's, summed over the gateways.
type counters struct{ conns, in, out int64 }

type sample struct {
	at      time.Time
	tenants map[string]counters
}

// chart is the overview's samples.
type chart struct {
	mu      sync.Mutex
	samples []sample
}

// add keeps a sample, unless the last is less than minSampleGap old.
func (ch *chart) add(sm sample) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if n := len(ch.samples); n > 0 && sm.at.Sub(ch.samples[n-1].at) < minSampleGap {
		return
	}
	ch.samples = append(ch.samples, sm)
	if len(ch.samples) > chartSamples {
		ch.samples = slices.Delete(ch.samples, 0, len(ch.samples)-chartSamples)
	}
}

// point is the rates between two samples.
type point struct {
	at      time.Time
	in, out float64
}

// rates are the messages in and out per second of the tenants keep
// accepts, between each two samples (a counter that went back, a gateway
// that restarted, counts as 0).
func (ch *chart) rates(keep func(string) bool) []point {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	var out []point
	for i := 1; i < len(ch.samples); i++ {
		a, b := ch.samples[i-1], ch.samples[i]
		secs := b.at.Sub(a.at).Seconds()
		if secs <= 0 {
			continue
		}
		p := point{at: b.at}
		for t, cb := range b.tenants {
			if !keep(t) {
				continue
			}
			ca := a.tenants[t]
			p.in += float64(max(cb.in-ca.in, 0)) / secs
			p.out += float64(max(cb.out-ca.out, 0)) / secs
		}
		out = append(out, p)
	}
	return out
}

// tenantRow is a tenant's line of the overview.
type tenantRow struct {
	Tenant      string
	Connections int64
	In, Out     float64
}

// serverRow is a server's line: its roles' health, or why it did not
// answer.
type serverRow struct {
	Server, URL string
	Health      []admin.RoleHealth
	Err         string
}

// overviewData is the live part of the overview.
type overviewData struct {
	At          time.Time
	Connections int64
	In, Out     float64
	Tenants     []tenantRow
	Servers     []serverRow
	Lag         []admin.TopicLag
	Admin       bool
	// Tenant is the tenant= the admin picked ("" for every tenant), and
	// Refresh the live part's URL with it.
	Tenant, Refresh   string
	Picked            bool
	Chart             chartSVG
	AllReady, Partial bool
}

// chartSVG is the chart, drawn.
type chartSVG struct {
	W, H            float64
	InPts, OutPts   string
	Max             string
	Span            string
	HasData         bool
	Gridlines       []float64
	LastIn, LastOut string
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, s *session) {
	if _, _, err := scopeOf(r, s); err != nil {
		c.refuse(w, r, s, err)
		return
	}
	d := c.overviewNow(r, s)
	c.render(w, r, s, http.StatusOK, "overview", "Overview", d, "")
}

func (c *Console) overviewLive(w http.ResponseWriter, r *http.Request, s *session) {
	if _, _, err := scopeOf(r, s); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	c.fragment(w, "overview", "live", c.overviewNow(r, s))
}

// overviewNow samples the servers and makes the overview: a tenant's
// session sees its tenant's counters and the roles' health; the lag is
// the admin's (the log is every tenant's).
func (c *Console) overviewNow(r *http.Request, s *session) overviewData {
	stats := c.opt.API.Stats(r.Context(), admin.Scope{AllTenants: true})
	now := c.opt.Now()
	sm := sample{at: now, tenants: map[string]counters{}}
	d := overviewData{At: now.UTC(), Admin: s.admin, AllReady: true, Refresh: "/overview/live"}
	lag := map[[2]string]*admin.TopicLag{}
	for _, st := range stats {
		row := serverRow{Server: st.Server, URL: st.URL, Health: st.Health}
		if st.URL == admin.LocalServer {
			row.URL = "this process"
		}
		if st.Err != nil {
			row.Err, d.AllReady, d.Partial = st.Err.Error(), false, true
		}
		for _, h := range st.Health {
			d.AllReady = d.AllReady && h.Ready
		}
		d.Servers = append(d.Servers, row)
		for _, t := range st.Tenants {
			cn := sm.tenants[t.Tenant]
			cn.conns += t.Connections
			cn.in += t.MessagesReceived
			cn.out += t.MessagesSent
			sm.tenants[t.Tenant] = cn
		}
		for _, l := range st.Lag {
			k := [2]string{l.Topic, l.Group}
			if x := lag[k]; x != nil {
				x.Lag += l.Lag
				x.Partitions += l.Partitions
			} else {
				cp := l
				lag[k] = &cp
			}
		}
	}
	c.chart.add(sm)
	// A tenant's session sees its tenant; the admin every tenant, or the
	// one of tenant= (the chart and the cards of that tenant alone).
	only, one := s.tenant, !s.admin
	if q := r.URL.Query(); s.admin && q.Has("tenant") && q.Get("tenant") != "*" {
		only, one = q.Get("tenant"), true
	}
	keep := func(t string) bool { return !one || t == only }
	if s.admin && one {
		d.Tenant, d.Picked, d.Refresh = only, true, "/overview/live?"+url.Values{"tenant": {only}}.Encode()
	}
	pts := c.chart.rates(keep)
	last := map[string]tenantRow{}
	c.chart.mu.Lock()
	if n := len(c.chart.samples); n >= 2 {
		a, b := c.chart.samples[n-2], c.chart.samples[n-1]
		secs := b.at.Sub(a.at).Seconds()
		for t, cb := range b.tenants {
			ca := a.tenants[t]
			last[t] = tenantRow{Tenant: t, In: float64(max(cb.in-ca.in, 0)) / secs, Out: float64(max(cb.out-ca.out, 0)) / secs}
		}
	}
	c.chart.mu.Unlock()
	for t, cn := range sm.tenants {
		if !keep(t) {
			continue
		}
		row := last[t]
		row.Tenant, row.Connections = t, cn.conns
		d.Tenants = append(d.Tenants, row)
		d.Connections += cn.conns
		d.In += row.In
		d.Out += row.Out
	}
	slices.SortFunc(d.Tenants, func(a, b tenantRow) int { return strings.Compare(a.Tenant, b.Tenant) })
	if s.admin {
		for _, l := range lag {
			d.Lag = append(d.Lag, *l)
		}
		slices.SortFunc(d.Lag, func(a, b admin.TopicLag) int {
			return strings.Compare(a.Topic+"\x00"+a.Group, b.Topic+"\x00"+b.Group)
		})
	}
	d.Chart = draw(pts)
	return d
}

// draw draws the rates: x is time over the samples kept, y the rate from 0
// to a round maximum.
func draw(pts []point) chartSVG {
	ch := chartSVG{W: chartW, H: chartH}
	if len(pts) < 2 {
		return ch // a line needs two points
	}
	top := 1.0
	for _, p := range pts {
		top = max(top, p.in, p.out)
	}
	top = niceCeil(top)
	t0, t1 := pts[0].at, pts[len(pts)-1].at
	span := t1.Sub(t0).Seconds()
	var in, out strings.Builder
	for i, p := range pts {
		x := chartW
		if span > 0 {
			x = chartW * p.at.Sub(t0).Seconds() / span
		}
		sep := " "
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(&in, "%s%.1f,%.1f", sep, x, chartH-chartH*p.in/top)
		fmt.Fprintf(&out, "%s%.1f,%.1f", sep, x, chartH-chartH*p.out/top)
	}
	ch.InPts, ch.OutPts, ch.HasData = in.String(), out.String(), true
	ch.Max = formatRate(top)
	ch.Span = (time.Duration(span) * time.Second).Round(time.Second).String()
	ch.Gridlines = []float64{0, chartH / 4, chartH / 2, 3 * chartH / 4}
	ch.LastIn, ch.LastOut = formatRate(pts[len(pts)-1].in), formatRate(pts[len(pts)-1].out)
	return ch
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*e {
			return m * e
		}
	}
	return 10 * e
}

// formatRate writes a rate for people: 12, 3.4k, 1.2M per second.
func formatRate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v >= 10 || v == 0:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
