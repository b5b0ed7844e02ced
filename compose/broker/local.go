package broker

import (
	"github.com/shoal-mqtt/shoal/gateway"
	"github.com/shoal-mqtt/shoal/kafka"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// localPath is the in-process fast path of `shoal all`
// (docs/local-path.md) as one value: each role is given, at construction,
// the seam it needs of the others (the router a hand-off, the session
// service a taker of answers, the gateway an express router), and this
// value forwards to the roles once they are all made, before any runs.
// The roles themselves read as the distributed design.
type localPath struct {
	gw     *gateway.Gateway
	router *routersvc.Router
}

// Handoff is routersvc.Handoff: the gateway of the process.
func (l *localPath) Handoff(slot int32, rec *kafka.Record, now bool) []byte {
	return l.gw.Handoff(slot, rec, now)
}

// Answer is sessionsvc.Answers: the gateway of the process.
func (l *localPath) Answer(slot int32, res *eventspb.ConnectResult) { l.gw.Answer(slot, res) }

// Express is gateway.Express: the router of the process.
func (l *localPath) Express(rec *kafka.Record) bool { return l.router.Express(rec) }
