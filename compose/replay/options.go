package replay

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/topic"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// Options select what Run reads.
type Options struct {
	// Topics are the Kafka topics to read, by their catalogue names
	// ("messages", "sessions", "deliveries", "presence", "quotas") or "all".
	Topics []string
	// From and To bound the records' timestamps (the time Kafka took them);
	// zero: from the oldest record still in the log, to the last one there
	// was when Run began (or on, with Follow).
	From, To time.Time
	// Partitions, when set, are the only partitions read, and FromOffset
	// and ToOffset (-1: unset) bound their offsets, ToOffset included.
	Partitions           []int32
	FromOffset, ToOffset int64
	// Follow keeps reading new records until the context ends.
	Follow bool

	// Tenant (when TenantSet; "" is the default tenant), ClientID and
	// TopicFilter (an MQTT filter, wildcards allowed: events that carry a
	// message whose topic it matches) select events; Types are event types
	// (kafka.Event*: "publish", "connect", …); QoS (-1: any) is the QoS of
	// the event's message; MessageID one message's identifier.
	Tenant      string
	TenantSet   bool
	ClientID    string
	TopicFilter string
	Types       []string
	QoS         int
	MessageID   *eventspb.MessageID
	// TenantSeparator derives a client's tenant from its identifier when
	// Tenant is not given (gateway.tenant_separator).
	TenantSeparator string
	// Limit stops after that many events were written (0: no limit).
	Limit int64
}

// DefaultOptions reads shoal.messages, every record, unfiltered.
func DefaultOptions() Options {
	return Options{Topics: []string{"messages"}, FromOffset: -1, ToOffset: -1, QoS: -1, TenantSeparator: "-"}
}

// knownTypes are the event types a filter may name.
var knownTypes = append(kafka.EventTypes(), TypeTombstone)

// topicNames maps the names Options.Topics takes to the catalogue's specs.
func topicSpecs(cat kafka.Catalogue) map[string]kafka.TopicSpec {
	return map[string]kafka.TopicSpec{
		"messages": cat.Messages, "sessions": cat.Sessions, "presence": cat.Presence,
		"deliveries": cat.Deliveries, "quotas": cat.Quotas,
	}
}

// Validate checks the options, naming the flag of each bad one.
func (o Options) Validate() error {
	var errs []error
	if len(o.Topics) == 0 {
		errs = append(errs, errors.New("--topics: name at least one topic"))
	}
	specs := topicSpecs(kafka.DefaultCatalogue())
	for _, t := range o.Topics {
		if _, ok := specs[t]; !ok && t != "all" {
			errs = append(errs, fmt.Errorf("--topics: %q is not messages, sessions, deliveries, presence, quotas or all", t))
		}
	}
	if !o.From.IsZero() && !o.To.IsZero() && o.To.Before(o.From) {
		errs = append(errs, fmt.Errorf("--to: %s is before --from %s", o.To.Format(time.RFC3339), o.From.Format(time.RFC3339)))
	}
	if (o.FromOffset >= 0 || o.ToOffset >= 0) && len(o.Partitions) == 0 {
		errs = append(errs, errors.New("--from-offset, --to-offset: give --partitions too (offsets are a partition's)"))
	}
	if o.FromOffset >= 0 && o.ToOffset >= 0 && o.ToOffset < o.FromOffset {
		errs = append(errs, fmt.Errorf("--to-offset: %d is before --from-offset %d", o.ToOffset, o.FromOffset))
	}
	for _, p := range o.Partitions {
		if p < 0 {
			errs = append(errs, fmt.Errorf("--partitions: %d is negative", p))
		}
	}
	if o.TopicFilter != "" {
		if err := topic.ValidateFilter(o.TopicFilter); err != nil {
			errs = append(errs, fmt.Errorf("--topic: %w", err))
		}
	}
	for _, t := range o.Types {
		if !slices.Contains(knownTypes, t) {
			errs = append(errs, fmt.Errorf("--type: %q is not an event type (%s)", t, strings.Join(knownTypes, ", ")))
		}
	}
	if o.QoS < -1 || o.QoS > 2 {
		errs = append(errs, fmt.Errorf("--qos: %d is not 0, 1 or 2", o.QoS))
	}
	if o.Follow && !o.To.IsZero() {
		errs = append(errs, errors.New("--follow: not with --to (a follow has no end)"))
	}
	return errors.Join(errs...)
}

// topicNames resolves Options.Topics ("all" included) to Kafka topic
// specs, in the catalogue's order.
func (o Options) topicSpecs(cat kafka.Catalogue) []kafka.TopicSpec {
	want := map[string]bool{}
	for _, t := range o.Topics {
		want[t] = true
	}
	var out []kafka.TopicSpec
	names := []string{"messages", "sessions", "presence", "deliveries", "quotas"}
	specs := topicSpecs(cat)
	for _, n := range names {
		if want[n] || (want["all"] && n != "quotas") {
			out = append(out, specs[n])
		}
	}
	return out
}

// tenant returns the tenant the options select, and whether they select
// one: the given one, or the client's (by the separator).
func (o Options) tenant() (string, bool) {
	if o.TenantSet {
		return o.Tenant, true
	}
	if o.ClientID != "" && o.TenantSeparator != "" {
		if t, _, ok := strings.Cut(o.ClientID, o.TenantSeparator); ok {
			return t, true
		}
		return "", true // an identifier without a separator is the default tenant's
	}
	return "", false
}
