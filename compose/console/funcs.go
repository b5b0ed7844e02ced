package console

import (
	"html/template"
	"strconv"
	"time"
)

// funcs are the templates' functions. Every value they return is text:
// html/template escapes it where it lands.
var funcs = template.FuncMap{
	"tenantName": func(t string) string {
		if t == "" {
			return "(default)"
		}
		return t
	},
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"whenMs": func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
	"whenPtr": func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"rate": formatRate,
	"protocol": func(v int) string {
		switch v {
		case 3:
			return "3.1"
		case 4:
			return "3.1.1"
		case 5:
			return "5.0"
		}
		return strconv.Itoa(v)
	},
	"expiry": func(s uint32) string {
		switch s {
		case 0:
			return "0 (ends with the connection)"
		case ^uint32(0):
			return "never"
		}
		return (time.Duration(s) * time.Second).String()
	},
	"lag": func(p *int64) string {
		if p == nil {
			return "-"
		}
		return strconv.FormatInt(*p, 10)
	},
}
