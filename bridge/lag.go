package bridge

import (
	"context"
	"errors"
	"maps"
	"time"
)

// DefaultLagInterval is how often the bridge measures its mappings' lag.
const DefaultLagInterval = 5 * time.Second

// MappingStatus is one mapping as the bridge runs it, with its lag.
type MappingStatus struct {
	// Direction is "out" (MQTT to Kafka) or "in".
	Direction string
	Name      string
	Tenant    string
	// From is what the mapping reads (an out mapping's MQTT filter, an in
	// mapping's Kafka topic), To the template of what it writes.
	From, To string
	// Lag is what the mapping has yet to read, as last measured
	// (LagKnown false: not measured yet, or its group has no offsets).
	Lag      int64
	LagKnown bool
	// Running says that its direction has its topics and is in or
	// joining its consumer group.
	Running bool
}

// Status lists the mappings in force, out then in, in the order of the
// configuration.
func (b *Bridge) Status() []MappingStatus {
	m := b.mappings.Load()
	running := map[string]bool{}
	if rs := b.runners.Load(); rs != nil {
		for _, r := range *rs {
			running[r.key] = r.ready.Load()
		}
	}
	b.met.lagMu.Lock()
	defer b.met.lagMu.Unlock()
	out := make([]MappingStatus, 0, len(m.Out)+len(m.In))
	for _, o := range m.Out {
		n, ok := b.met.lag[[2]string{o.Name, "out"}]
		out = append(out, MappingStatus{Direction: "out", Name: o.Name, Tenant: o.Tenant, From: o.Filter,
			To: o.KafkaTopic.String(), Lag: n, LagKnown: ok, Running: running["out"]})
	}
	for _, im := range m.In {
		n, ok := b.met.lag[[2]string{im.Name, "in"}]
		out = append(out, MappingStatus{Direction: "in", Name: im.Name, Tenant: im.Tenant, From: im.KafkaTopic,
			To: im.MQTTTopic.String(), Lag: n, LagKnown: ok, Running: running[inKey(im.Name)]})
	}
	return out
}

// watchLag measures the consumer groups' lag every Options.LagInterval until ctx
// ends: the out group's for every out mapping, each in mapping's group for
// it, of the mappings in force (Reload). A failed measure is logged at
// debug level and tried again.
func (b *Bridge) watchLag(ctx context.Context) {
	t := time.NewTicker(b.opts.LagInterval)
	defer t.Stop()
	for {
		m := b.mappings.Load()
		groups := make([]string, 0, 1+len(m.In))
		if len(m.Out) > 0 {
			groups = append(groups, b.opts.Group)
		}
		for _, im := range m.In {
			groups = append(groups, DefaultInGroupPrefix+im.Name)
		}
		// The out group is on Shoal's cluster, the in groups on the
		// mappings' (the same one unless bridges.kafka.brokers).
		lags := map[string]int64{}
		var errs []error
		if len(groups) > 0 && groups[0] == b.opts.Group {
			l, err := b.client.GroupLag(ctx, groups[0])
			maps.Copy(lags, l)
			errs = append(errs, err)
			groups = groups[1:]
		}
		if len(groups) > 0 {
			l, err := b.users().GroupLag(ctx, groups...)
			maps.Copy(lags, l)
			errs = append(errs, err)
		}
		if err := errors.Join(errs...); err != nil && ctx.Err() == nil {
			b.log.Debug("bridge lag not measured", "err", err)
		}
		b.met.keepLag(m)
		if n, ok := lags[b.opts.Group]; ok {
			for _, o := range m.Out {
				b.met.setLag(o.Name, "out", n)
			}
		}
		for _, im := range m.In {
			if n, ok := lags[DefaultInGroupPrefix+im.Name]; ok {
				b.met.setLag(im.Name, "in", n)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
