package bridge

import (
	"context"
	"time"
)

// DefaultLagInterval is how often the bridge measures its mappings' lag.
const DefaultLagInterval = 5 * time.Second

// Lag returns what each mapping has yet to read, by direction ("out",
// "in") and mapping name, as the shoal.bridge.lag gauge last saw it.
func (b *Bridge) Lag() map[string]map[string]int64 {
	b.met.lagMu.Lock()
	defer b.met.lagMu.Unlock()
	out := map[string]map[string]int64{}
	for k, n := range b.met.lag {
		if out[k[1]] == nil {
			out[k[1]] = map[string]int64{}
		}
		out[k[1]][k[0]] = n
	}
	return out
}

// watchLag measures the consumer groups' lag every Options.LagInterval until ctx
// ends: the out group's for every out mapping, each in mapping's group for
// it. A failed measure is logged at debug level and tried again.
func (b *Bridge) watchLag(ctx context.Context, m *Mappings) {
	groups := make([]string, 0, 1+len(m.In))
	if len(m.Out) > 0 {
		groups = append(groups, b.opts.Group)
	}
	for _, im := range m.In {
		groups = append(groups, DefaultInGroupPrefix+im.Name)
	}
	t := time.NewTicker(b.opts.LagInterval)
	defer t.Stop()
	for {
		lags, err := b.client.GroupLag(ctx, groups...)
		if err != nil && ctx.Err() == nil {
			b.log.Debug("bridge lag not measured", "err", err)
		}
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
