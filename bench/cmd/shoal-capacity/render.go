package main

import (
	"fmt"
	"math"
	"strings"
)

// Markers around the model's tables in docs/capacity.md: -write replaces
// what is between them, and the test checks it is current.
const (
	beginMarker = "<!-- capacity model: begin (make capacity writes this part) -->"
	endMarker   = "<!-- capacity model: end -->"
)

// render is the model's Markdown: its inputs with their sources, the
// parameters, the node counts and what they are made of, and the
// comparison with published figures.
func render(in *inputs, c *costs, p params, ss []sizing) string {
	var b strings.Builder
	renderInputs(&b, in, c)
	fmt.Fprintf(&b, "\nParameters (flags of `shoal-capacity`): nodes of %g vCPU and %g GiB; the steady load takes at most %.0f %% of a node's cores and %.0f %% of its memory; replication factor %d for the topics and the keyspace (the JVMs' CPU multiplied by it); at least %d nodes of each Shoal role and %d of Kafka and of Cassandra; at least %d partitions per event topic; a Kafka node writes at most %g MB/s, its replicas' share included; the log is kept %g h (kafka.retention).\n\n",
		p.VCPU, p.MemGiB, p.CPUTarget*100, p.MemTarget*100, p.RF, p.MinShoal, p.RF, p.MinPartitions, p.WriteMBs, p.Retention)
	fmt.Fprintln(&b, "| fleet | msg/s in | deliveries/s | gateways | routers | session services | Kafka | Cassandra | **nodes** | partitions |")
	fmt.Fprintln(&b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range ss {
		total := 0
		cells := make([]string, 0, len(kinds))
		for _, k := range kinds {
			total += s.Nodes[k]
			cells = append(cells, nodeCell(s, k))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | **%d** | %d |\n", s.W.Name, count(s.W.Rate), count(s.Deliveries), strings.Join(cells, " | "), total, s.Partitions)
	}
	fmt.Fprintln(&b, "\n(cpu, mem, write: the count that the load's cores, memory or log writes take; min: the least count; ✗ presence: the presence every router holds does not fit in a node, below.)")
	for _, s := range ss {
		if s.RouterGiB > 0 {
			fmt.Fprintf(&b, "\n%s: every router holds the presence of every device, %s GiB, more than a node's %g GiB at %.0f %%: routers need nodes of %.0f GiB.\n",
				s.W.Name, gib(s.Presence), p.MemGiB, p.MemTarget*100, math.Ceil(s.RouterGiB))
		}
	}
	fmt.Fprintln(&b, "\n| fleet | Shoal cores | Kafka cores | Cassandra cores | memory: gateways / session services / routers | log written | log kept | heartbeats | one gateway's devices resume in | every device resumes in |")
	fmt.Fprintln(&b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range ss {
		shoal := s.Cores["gateway"] + s.Cores["router"] + s.Cores["session"]
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.1f | %s / %s / %s GiB | %s/s | %s | %s/s | %s | %s |\n", s.W.Name, shoal, s.Cores["kafka"], s.Cores["cassandra"],
			gib(s.MemBytes["gateway"]), gib(s.MemBytes["session"]), gib(s.MemBytes["router"]+s.Presence*float64(s.Nodes["router"])), bytesRate(s.LogBytes), bytesRate(s.LogBytes*p.Retention*3600),
			count(s.Heartbeats), secs(s.ResumeS), secs(s.FleetResumeS))
	}
	for _, s := range ss {
		if s.FanoutS > 0 {
			fmt.Fprintf(&b, "\n%s: the gateways' cores write one message to all %s subscribers in %s at the least.\n", s.W.Name, count(s.W.Fanout), msecs(s.FanoutS))
		}
	}
	fmt.Fprintln(&b, "\n| fleet | Shoal's nodes (Kafka, Cassandra) | beside | their nodes | their load | source |")
	fmt.Fprintln(&b, "|---|---:|---|---|---|---|")
	for _, o := range others {
		for _, s := range ss {
			if s.W.Name != o.Workload {
				continue
			}
			total := 0
			for _, k := range kinds {
				total += s.Nodes[k]
			}
			src := o.Source
			if strings.HasPrefix(src, "https://") {
				host, _, _ := strings.Cut(strings.TrimPrefix(src, "https://"), "/")
				src = "[" + strings.TrimPrefix(host, "www.") + "](" + src + ")"
			}
			fmt.Fprintf(&b, "| %s | %d (%d, %d) | %s | %s | %s | %s |\n", s.W.Name, total, s.Nodes["kafka"], s.Nodes["cassandra"], o.Who, o.Nodes, o.Load, src)
		}
	}
	b.WriteString("\n")
	return b.String()
}

// renderInputs is the table of the unit costs the model used, each with
// the file and phase it came from.
func renderInputs(b *strings.Builder, in *inputs, c *costs) {
	fmt.Fprintf(b, "Inputs: `%s` (%s, %s, %d cores, commit %s), `%s` (%s), `%s` (%s)", unitsPath, in.units.Date[:10], in.units.CPU, in.units.Cores, in.units.Commit,
		stormPath, in.storm.Date[:10], ticksPath, in.ticks.Date[:10])
	if in.hold != nil {
		fmt.Fprintf(b, ", `%s` (%s)", holdPath, in.hold.Date[:10])
	}
	fmt.Fprintln(b, ".\n\n| unit cost | gateway | router | session service | Kafka | Cassandra | from |\n|---|---:|---:|---:|---:|---:|---|")
	row := func(what string, m map[string]float64, prec int, from string) {
		cells := make([]string, 0, len(kinds))
		for _, k := range kinds {
			if v, ok := m[k]; ok {
				cells = append(cells, fmt.Sprintf("%.*f", prec, v))
			} else {
				cells = append(cells, "")
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", what, strings.Join(cells, " | "), from)
	}
	row("CPU-µs per message, to a persistent session (QoS 1)", c.perMessage[phasePersistent], 1, "units `"+phasePersistent+"`")
	row("CPU-µs per message, between clean sessions (QoS 1)", c.perMessage[phaseQoS1], 1, "units `"+phaseQoS1+"`")
	row("CPU-µs per fan-out delivery", c.perDelivery, 2, "units `"+phaseFanout+"` (Kafka's from its bytes)")
	row("CPU-µs per resumed connect", c.resume, 0, "connect-storm, resume waves' mean")
	row("CPU-µs per heartbeat record", c.heartbeat, 0, "partition-costs")
	if in.hold != nil {
		row("CPU-µs per held device and second", c.idle, 3, fmt.Sprintf("fleet-hold: %d devices, keepalive %d s", in.hold.Connections, in.hold.KeepAliveS))
		mem := map[string]float64{"gateway": c.connMem["gateway"], "session": c.connMem["session"], "router": c.presence}
		row("bytes per held device (RSS; the gateway's with half the kernel's socket memory; the router's its presence, in every router)", mem, 0, "fleet-hold; the router's less its subscription")
		row("bytes per subscription (RSS), in the router owning it", map[string]float64{"router": c.subMem["router"]}, 0, "units `"+phaseConcrete+"`")
	} else {
		row("bytes per idle connection (RSS)", c.connMem, 0, "units connect phases, largest; other roles' and idle CPU not measured yet")
		row("bytes per subscription (RSS)", c.subMem, 0, "units `"+phaseConcrete+"`")
	}
	fmt.Fprintf(b, "\nThe log takes %.0f B per message to a persistent session and %.0f B between clean sessions (one replica, units), with each payload byte beyond the measured %d B once more in each record that carries it (%g and %g records).\n",
		c.bytes[phasePersistent], c.bytes[phaseQoS1], c.payload[phasePersistent], c.payloadRecs[phasePersistent], c.payloadRecs[phaseQoS1])
}

// boundWord is how the tables print what bounds a count.
var boundWord = map[string]string{"cpu": "cpu", "memory": "mem", "min": "min", "write": "write", "presence": "✗ presence"}

func nodeCell(s sizing, k string) string {
	return fmt.Sprintf("%d %s", s.Nodes[k], boundWord[s.Bound[k]])
}

// count prints n with thousands separators, or as k/M past them.
func count(n float64) string {
	switch {
	case n >= 1e6:
		return trim(fmt.Sprintf("%.2f", n/1e6)) + "M"
	case n >= 1e4:
		return trim(fmt.Sprintf("%.1f", n/1e3)) + "k"
	}
	return trim(fmt.Sprintf("%.1f", n))
}

func trim(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

func gib(b float64) string { return trim(fmt.Sprintf("%.1f", b/(1<<30))) }

func msecs(s float64) string { return trim(fmt.Sprintf("%.1f", s*1e3)) + " ms" }

// bytesRate prints b bytes in MB, GB, TB or PB.
func bytesRate(b float64) string {
	switch {
	case b >= 1e15:
		return trim(fmt.Sprintf("%.2f", b/1e15)) + " PB"
	case b >= 1e12:
		return trim(fmt.Sprintf("%.2f", b/1e12)) + " TB"
	}
	if b >= 1e9 {
		return trim(fmt.Sprintf("%.2f", b/1e9)) + " GB"
	}
	return trim(fmt.Sprintf("%.1f", b/1e6)) + " MB"
}

func secs(s float64) string {
	if s >= 100 {
		return fmt.Sprintf("%.0f s", s)
	}
	return trim(fmt.Sprintf("%.1f", s)) + " s"
}
