package sessionsvc

import (
	"context"
	"errors"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/shoal-mqtt/shoal/internal/obs"
)

// The session service's instruments: its sessions online and offline and
// the messages waiting in the offline ones' inboxes, counted by each
// partition as it commits (sessionCounts, not a scan at each collection),
// and the messages it drops (shoal.messages.dropped: an inbox full, an
// inbox message expired). Made once, by WithTelemetry.

// sessionCounts are a partition's committed sessions by state, and the
// messages held in the inboxes of its offline ones. Guarded by the
// partition's mu once the partition is shared.
type sessionCounts struct {
	online, offline, inbox int64
}

// add counts s (sign 1) or uncounts it (-1); nil and ended sessions count
// nothing.
func (c *sessionCounts) add(s *Session, sign int64) {
	switch {
	case s == nil || !s.Active:
	case s.Online:
		c.online += sign
	default:
		c.offline += sign
		c.inbox += sign * int64(len(s.Inbox))
	}
}

// update replaces the committed sessions that dirty changes by their new
// versions in the counts.
func (c *sessionCounts) update(committed, dirty map[clientKey]*Session) {
	for k, s := range dirty {
		c.add(committed[k], -1)
		c.add(s, 1)
	}
}

// registerMetrics makes the service's instruments on s.tel's meter: the
// dropped-message counter the machine counts into, and the gauges of the
// partitions' sessionCounts.
func (s *Service) registerMetrics() error {
	m := s.tel.Meter.Meter(obs.Scope)
	drops, err := obs.NewDrops(m)
	if err != nil {
		return err
	}
	s.m.drops = drops
	sessions, err1 := m.Int64ObservableGauge("shoal.session.sessions", metric.WithUnit("{session}"),
		metric.WithDescription("Sessions held by this session service: state=online (client connected), offline (a persistent session waiting for its client)."))
	depth, err2 := m.Int64ObservableGauge("shoal.session.inbox.depth", metric.WithUnit("{message}"),
		metric.WithDescription("Messages waiting in the inboxes of offline persistent sessions."))
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	online := metric.WithAttributeSet(attribute.NewSet(attribute.String("state", "online")))
	offline := metric.WithAttributeSet(attribute.NewSet(attribute.String("state", "offline")))
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		var total sessionCounts
		s.mu.Lock()
		parts := slices.Clone(s.parts)
		s.mu.Unlock()
		for _, p := range parts {
			if p == nil {
				continue
			}
			p.mu.Lock()
			c := p.counts
			p.mu.Unlock()
			total.online += c.online
			total.offline += c.offline
			total.inbox += c.inbox
		}
		o.ObserveInt64(sessions, total.online, online)
		o.ObserveInt64(sessions, total.offline, offline)
		o.ObserveInt64(depth, total.inbox)
		return nil
	}, sessions, depth)
	return err
}
