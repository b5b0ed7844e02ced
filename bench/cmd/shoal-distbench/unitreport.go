package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// unitsFile is bench/units.json.
type unitsFile struct {
	runHeader
	MemGiB   float64 `json:"mem_gib"`
	Kernel   string  `json:"kernel"`
	Go       string  `json:"go"`
	Topology string  `json:"topology"`
	// IdleCPUPercent is each kind's CPU without load (subtracted from
	// every phase), over IdleSeconds before the first phase.
	IdleCPUPercent map[string]float64 `json:"idle_cpu_percent"`
	IdleSeconds    float64            `json:"idle_s"`
	Units          []unitResult       `json:"units"`
}

// unitsReadme is the README of a units run's results.
func unitsReadme(f unitsFile) string {
	var rd strings.Builder
	fmt.Fprintf(&rd, "# What a message, a connect and a subscription cost (%s)\n\n```\n%s\n```\n\n", f.Date[:10], f.Command)
	fmt.Fprintf(&rd, "- Machine: %s, %d cores, %.0f GiB, kernel %s, %s; Kafka %s, Cassandra %s, one node each, on loopback.\n- Shoal: `%s`, topology `%s` (%s), %d partitions per event topic.\n- The costs: %s\n\n",
		f.CPU, f.Cores, f.MemGiB, f.Kernel, f.Go, f.Kafka, f.Cassandra, f.Commit, f.Topology, topoText(f.Topology), f.Partitions, unitsMethod)
	writeUnitsTable(&rd, f.Units)
	fmt.Fprintln(&rd)
	writeUnitsMemory(&rd, f.Units)
	return rd.String()
}

// writeUnitsMemory writes, for the subscribe phases, each role's memory
// per subscription, and for the offline phase its rates.
func writeUnitsMemory(w io.Writer, us []unitResult) {
	fmt.Fprintln(w, "| phase | live heap per subscription, bytes: gateway | router | session | RSS per subscription, bytes: gateway | router | session | Cassandra |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, u := range us {
		if u.Per != "subscription" {
			continue
		}
		h := func(k string) string {
			if u.HeapBytes == nil {
				return "—"
			}
			return fmt.Sprintf("%.0f", u.HeapBytes[k])
		}
		r := func(k string) string { return fmt.Sprintf("%.0f", u.RSSBytes[k]) }
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", u.Name, h("gateway"), h("router"), h("session"), r("gateway"), r("router"), r("session"), r("cassandra"))
	}
	for _, u := range us {
		if o := u.Offline; o != nil {
			first := "—"
			if o.FirstDelivery != nil {
				first = fmt.Sprintf("p50 %.0f µs, p99 %.0f µs", o.FirstDelivery.P50, o.FirstDelivery.P99)
			}
			fmt.Fprintf(w, "\n%s: %d sessions, %d messages queued at %.0f/s; %d of the sessions present on return, the backlog delivered at %.0f/s; CONNACK to the first queued message %s.\n",
				strings.TrimSuffix(u.Name, "-deliver"), o.Sessions, o.Queued, o.QueuedPerSec, o.Resumed, o.DeliveredPerSec, first)
		}
	}
}

// unitsMethod says how the units are measured, for the README.
const unitsMethod = "CPU from /proc (user + system) of every process, less what the process spends idle over as long (measured for -unit-idle before the first phase): for messages over the generator's measured window, divided by the messages published in it (the fan-out's also by its deliveries); for connects over the whole phase (the connects, an idle hold, the disconnects), divided by the connects. Kafka records (over the same window for messages, the whole phase for connects) are the growth of the topics' end offsets, bytes the growth of their logs (one replica here: a replication factor of 3 writes them three times; compaction can shrink a log during a phase). CQL requests are those Cassandra's coordinators counted on Shoal's keyspace (`system_views.coordinator_*_latency`; lightweight transactions are not among the writes). A gateway's memory per connection is its RSS growth while the connections are held. The offline phase's two rows are its stages, from stage samples: the queue (first publish to a settle after the last PUBACK) per message queued, the delivery (the sessions' return, their reconnects included, to a settle after the last delivery) per message delivered. A subscription's CPU, records and requests are those from before the first SUBSCRIBE to a settle after the last SUBACK, per filter (one SUBSCRIBE each); its memory is each role's live heap after a forced collection (`/debug/pprof/heap?gc=1`, then `/debug/memory`) before and after, and the RSS growth over the same span."

// writeUnitsTable writes the costs as a Markdown table.
func writeUnitsTable(w io.Writer, us []unitResult) {
	fmt.Fprintln(w, "| phase | per | count | CPU-µs: gateway | router | session | Shoal | Kafka | Cassandra | Kafka records | Kafka bytes | CQL reads | CQL writes | gateway bytes per connection | lost |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, u := range us {
		c := func(k string) string { return fmt.Sprintf("%.1f", u.CPUMicros[k]) }
		mem := "—"
		if u.GatewayRSSBytes > 0 {
			mem = fmt.Sprintf("%.0f", u.GatewayRSSBytes)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %.2f | %.0f | %.2f | %.2f | %s | %d |\n",
			u.Name, u.Per, u.Count, c("gateway"), c("router"), c("session"), c("shoal"), c("kafka"), c("cassandra"),
			u.KafkaRecords["total"], u.KafkaBytes, u.CQLReads, u.CQLWrites, mem, u.Lost)
		if u.CPUMicrosPerDelivery != nil {
			d := func(k string) string { return fmt.Sprintf("%.2f", u.CPUMicrosPerDelivery[k]) }
			fmt.Fprintf(w, "| %s | delivery | %d | %s | %s | %s | %s | %s | %s | | | | | | |\n",
				u.Name, u.Deliveries, d("gateway"), d("router"), d("session"), d("shoal"), d("kafka"), d("cassandra"))
		}
	}
}

// writeUnitLine prints one phase's costs.
func writeUnitLine(w io.Writer, u unitResult) {
	kinds := make([]string, 0, len(u.CPUMicros))
	for k := range u.CPUMicros {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	var cpu []string
	for _, k := range kinds {
		cpu = append(cpu, fmt.Sprintf("%s %.1f", k, u.CPUMicros[k]))
	}
	fmt.Fprintf(w, "%s: %d %ss; CPU-µs per %s: %s; kafka %.2f records, %.0f bytes; cql %.2f reads, %.2f writes; %d lost\n",
		u.Name, u.Count, u.Per, u.Per, strings.Join(cpu, ", "), u.KafkaRecords["total"], u.KafkaBytes, u.CQLReads, u.CQLWrites, u.Lost)
}
