package replay

import (
	"bytes"
	"slices"

	"github.com/shoal-mqtt/shoal/internal/mqtt/topic"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// filter decides which records become events: first on what the record
// says without decoding (keep), then on the envelope (match).
type filter struct {
	o         Options
	tenant    string
	hasTenant bool
	prefix    []byte // the tenant's key prefix, "tenant/"
	types     map[string]bool
	messages  string // shoal.messages's name
}

func newFilter(o Options, cat kafka.Catalogue) *filter {
	f := &filter{o: o, messages: cat.Messages.Name}
	f.tenant, f.hasTenant = o.tenant()
	if f.hasTenant {
		f.prefix = kafka.AppendKey(nil, f.tenant, "")
	}
	if len(o.Types) > 0 {
		f.types = map[string]bool{}
		for _, t := range o.Types {
			f.types[t] = true
		}
	}
	return f
}

// messageTypes are the events that carry a message.
var messageTypes = map[string]bool{
	kafka.EventPublish: true, kafka.EventDelivery: true, kafka.EventInboxAppend: true,
	kafka.EventSharedRedispatch: true, kafka.EventConnect: true, // a will
}

// keep reports whether r may be selected, from its header, key and time
// alone; spec is its topic's.
func (f *filter) keep(spec kafka.TopicSpec, r *kafka.Record) bool {
	if !f.o.From.IsZero() && r.Timestamp.Before(f.o.From) {
		return false
	}
	if !f.o.To.IsZero() && r.Timestamp.After(f.o.To) {
		return false
	}
	typ := recordType(r)
	if f.types != nil && !f.types[typ] {
		return false
	}
	if (f.o.TopicFilter != "" || f.o.QoS >= 0 || f.o.MessageID != nil) && !messageTypes[typ] {
		return false
	}
	if !spec.Keyed || len(r.Key) == 0 {
		return true
	}
	if f.hasTenant && !bytes.HasPrefix(r.Key, f.prefix) {
		return false
	}
	// shoal.messages: a publish's key is tenant/topic.
	if f.o.TopicFilter != "" && typ == kafka.EventPublish && spec.Name == f.messages {
		_, name, err := kafka.SplitKey(r.Key)
		if err == nil && !topic.Match(f.o.TopicFilter, string(name)) {
			return false
		}
	}
	return true
}

// match reports whether the decoded envelope is selected.
func (f *filter) match(env *eventspb.Envelope) bool {
	if f.hasTenant && env.Tenant != f.tenant {
		return false
	}
	if f.o.ClientID != "" && env.ClientId != f.o.ClientID && !targets(env, f.o.ClientID) {
		return false
	}
	if f.o.MessageID != nil {
		id := env.GetMessageId()
		if id == nil || id.GatewayEpoch != f.o.MessageID.GatewayEpoch || id.Seq != f.o.MessageID.Seq {
			return false
		}
	}
	if f.o.TopicFilter != "" || f.o.QoS >= 0 {
		m := messageOf(env)
		if m == nil {
			return false
		}
		if f.o.TopicFilter != "" && !topic.Match(f.o.TopicFilter, m.GetTopic()) {
			return false
		}
		if f.o.QoS >= 0 && m.GetQos() != uint32(f.o.QoS) {
			return false
		}
	}
	return true
}

// targets reports whether a delivery is addressed to client.
func targets(env *eventspb.Envelope, client string) bool {
	var ts []*eventspb.Target
	switch ev := env.Event.(type) {
	case *eventspb.Envelope_Delivery:
		ts = ev.Delivery.GetTargets()
	case *eventspb.Envelope_InboxAppend:
		ts = []*eventspb.Target{ev.InboxAppend.GetTarget()}
	}
	return slices.ContainsFunc(ts, func(t *eventspb.Target) bool { return t.GetClientId() == client })
}

// messageOf returns the message an event carries, nil when none.
func messageOf(env *eventspb.Envelope) *eventspb.Message {
	switch ev := env.Event.(type) {
	case *eventspb.Envelope_Publish:
		return ev.Publish.GetMessage()
	case *eventspb.Envelope_Delivery:
		return ev.Delivery.GetMessage()
	case *eventspb.Envelope_InboxAppend:
		return ev.InboxAppend.GetMessage()
	case *eventspb.Envelope_SharedRedispatch:
		return ev.SharedRedispatch.GetMessage()
	case *eventspb.Envelope_Connect:
		return ev.Connect.GetWill().GetMessage()
	}
	return nil
}
