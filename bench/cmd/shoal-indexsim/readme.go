package main

import (
	"fmt"
	"io"
	"strings"
)

// readme writes the README of runs[0], with the other runs and the
// process's figures (nil: none) beside it.
func readme(w io.Writer, runs []*result, proc *processFile) error {
	r := runs[0]
	var b strings.Builder
	fmt.Fprintf(&b, "# The router's index simulated at %s concrete and %s wildcard filters (%s)\n\n",
		count(r.Flags.Concrete), count(r.Flags.Wildcard), date(r.Date))
	fmt.Fprintf(&b, "```\n%s\n```\n\n", r.Command)
	for _, o := range runs[1:] {
		fmt.Fprintf(&b, "Beside it, the same at %s concrete filters:\n\n```\n%s\n```\n\n", count(o.Flags.Concrete), o.Command)
	}
	fmt.Fprintf(&b, "- Machine: %s, %d cores, %d GiB; %s; Shoal `%s`.\n", r.CPU, r.Cores, r.MemGiB, r.Go, r.Commit)
	fmt.Fprintf(&b, "- One process, the real shards of `router-svc` (`Shard.LoadSubscription`, `Shard.Apply`) and nothing else: no Kafka client, no store, no gateway. %d shards (one per partition); tenants: %d; the filters of %d clients of each kind, named as shoal-distbench's index ceiling names them (`bench-ixc-c-{i}` holds `bench-ixc/sub/{i}/{j}`, `bench-ixw-c-{i}` holds `bench-ixw/sub/{i}/{j}/+`). A concrete filter is in the shard of its partition (`kafka.PartitionForKey` of `kafka.Key(tenant, filter)`, as the gateway keys its record), a wildcard filter in every shard.\n",
		r.Flags.Partitions, r.Flags.Tenants, r.Flags.Clients)
	fmt.Fprintf(&b, "- Times are those of the shard calls alone, the making of their inputs left out; CPU time is the whole process's (getrusage), the garbage collector's included. Live heap is `/gc/heap/live:bytes` after `runtime.GC()`, the figure shoal-distbench reads from a router. Peak RSS %s, %.0f s in all; load average %.2f at the start, %.2f at the end.\n\n",
		mib(r.PeakRSSBytes), r.WallS, r.LoadAvg[0], r.LoadAvg[1])

	summary(&b, runs, proc)
	phases(&b, r)
	if proc != nil {
		against(&b, runs, proc)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// summary is the table of the figures docs/capacity.md quotes, a column
// per run and one for the process.
func summary(b *strings.Builder, runs []*result, proc *processFile) {
	fmt.Fprint(b, "## The figures\n\n|")
	for _, r := range runs {
		fmt.Fprintf(b, " | %s + %s, simulated", count(r.Flags.Concrete), count(r.Flags.Wildcard))
	}
	if proc != nil {
		fmt.Fprintf(b, " | %s + %s, router process ([%s](%s))", count(proc.Concrete), count(proc.Wildcard), date(proc.Date), proc.link)
	}
	fmt.Fprint(b, " |\n|---|")
	for range runs {
		fmt.Fprint(b, "---:|")
	}
	if proc != nil {
		fmt.Fprint(b, "---:|")
	}
	fmt.Fprintln(b)
	row := func(name string, f func(r *result) string, p string) {
		fmt.Fprintf(b, "| %s |", name)
		for _, r := range runs {
			fmt.Fprintf(b, " %s |", f(r))
		}
		if proc != nil {
			fmt.Fprintf(b, " %s |", p)
		}
		fmt.Fprintln(b)
	}
	var pc, pw, rebuilt, built, pMatch string
	if proc != nil {
		pc = fmt.Sprintf("%.0f (subscribed)", proc.heapPer("subscribe-concrete"))
		pw = fmt.Sprintf("%s (subscribed)", perSize(proc.heapPer("subscribe-wildcard")))
		h := proc.RouterHeapBytes
		built = fmt.Sprintf("%s (subscribed)", mib(h["concrete_and_wildcard"]-h["empty"]))
		rebuilt = fmt.Sprintf("%s (rebuilt from CQL)", mib(h["rebuilt"]-h["empty"]))
		pMatch = fmt.Sprintf("%.1f / %.1f µs per message (the whole router at 10,000 msg/s)", proc.cpuMicros("match-full"), proc.cpuMicros("match-empty"))
	}
	row("live heap per concrete filter, B: loaded / applied", func(r *result) string {
		return fmt.Sprintf("%.0f / %.0f", r.phase("load-concrete").HeapPerItem, r.phase("apply-concrete").HeapPerItem)
	}, pc)
	row("live heap per wildcard filter (all shards), loaded / applied", func(r *result) string {
		return perSize(r.phase("load-wildcard").HeapPerItem) + " / " + perSize(r.phase("apply-wildcard").HeapPerItem)
	}, pw)
	row("the same per shard, B", func(r *result) string {
		n := float64(r.Flags.Partitions)
		return fmt.Sprintf("%.0f / %.0f", r.phase("load-wildcard").HeapPerItem/n, r.phase("apply-wildcard").HeapPerItem/n)
	}, "")
	row("live heap of the index, loaded", func(r *result) string {
		return mib(r.LiveHeapBytes["load-wildcard"] - r.LiveHeapBytes["empty"])
	}, rebuilt)
	row("live heap of the index, applied", func(r *result) string {
		if r.Flags.Apply != r.Flags.Concrete {
			return fmt.Sprintf("%s (%s concrete)", mib(r.LiveHeapBytes["apply-wildcard"]-r.LiveHeapBytes["dropped"]), count(r.Flags.Apply))
		}
		return mib(r.LiveHeapBytes["apply-wildcard"] - r.LiveHeapBytes["dropped"])
	}, built)
	row("load (rebuild), subscriptions per CPU-second: concrete / wildcard rows", func(r *result) string {
		return fmt.Sprintf("%s / %s", thousands(int(r.phase("load-concrete").RecordsPerCPUS)), thousands(int(r.phase("load-wildcard").RecordsPerCPUS)))
	}, "")
	rebuild := ""
	if proc != nil {
		rebuild = fmt.Sprintf("%.1f s to ready (consumer group, CQL reads, shards)", proc.RebuildSeconds)
	}
	row("load of the whole index: rows, shard CPU-s (wall s)", func(r *result) string {
		c, wl := r.phase("load-concrete"), r.phase("load-wildcard")
		return fmt.Sprintf("%s, %.1f (%.1f)", count(c.Records+wl.Records), c.ShardCPUS+wl.ShardCPUS, c.ShardWallS+wl.ShardWallS)
	}, rebuild)
	row("Apply, CPU-µs per SubscriptionChange: concrete / wildcard (per shard)", func(r *result) string {
		return fmt.Sprintf("%.2f / %.2f", r.phase("apply-concrete").CPUNsPerRecord/1000, r.phase("apply-wildcard").CPUNsPerRecord/1000)
	}, "")
	row("match, CPU-ns per publish matching one filter: full / empty", func(r *result) string {
		return fmt.Sprintf("%.0f / %.0f", r.phase("match-full-one").CPUNsPerRecord, r.phase("match-empty-one").CPUNsPerRecord)
	}, "")
	row("match, CPU-ns per publish outside the index: full / empty", func(r *result) string {
		return fmt.Sprintf("%.0f / %.0f", r.phase("match-full-outside").CPUNsPerRecord, r.phase("match-empty-outside").CPUNsPerRecord)
	}, pMatch)
	row("allocations per publish: one filter / outside (full index)", func(r *result) string {
		return fmt.Sprintf("%.2f / %.2f", r.phase("match-full-one").AllocsPerRecord, r.phase("match-full-outside").AllocsPerRecord)
	}, "")
	row("peak RSS", func(r *result) string { return mib(r.PeakRSSBytes) }, "")
	fmt.Fprintln(b)
}

// phases is the table of runs[0]'s phases.
func phases(b *strings.Builder, r *result) {
	fmt.Fprintf(b, "## The phases of the %s run\n\n", count(r.Flags.Concrete))
	fmt.Fprintln(b, "| phase | items | shard calls | wall s | CPU s | shard calls: wall s | CPU s | per CPU-second | CPU-ns each | allocations each | live heap after | per filter, B |")
	fmt.Fprintln(b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, p := range r.Phases {
		per := ""
		if p.index {
			per = fmt.Sprintf("%.0f", p.HeapPerItem)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %.1f | %.1f | %.2f | %.2f | %s | %.0f | %.2f | %s | %s |\n",
			p.Name, thousands(p.Items), thousands(p.Records), p.WallS, p.CPUS, p.ShardWallS, p.ShardCPUS, thousands(int(p.RecordsPerCPUS)),
			p.CPUNsPerRecord, p.AllocsPerRecord, mib(p.HeapAfter), per)
	}
	var short []string
	for _, p := range r.Phases {
		// With the collector on a second core, CPU time runs ahead of
		// wall time; far behind it, the process waited for a core.
		if p.ShardWallS > 1.2*p.ShardCPUS && p.ShardWallS > 0.5 {
			short = append(short, p.Name)
		}
	}
	if len(short) > 0 {
		fmt.Fprintf(b, "\nIn %s the shard calls took much longer in wall time than in CPU time: the process was short of a core, something else ran on the machine, and those wall times are not the shards'.\n",
			strings.Join(short, ", "))
	}
	fmt.Fprintf(b, "\nThe loaded index is dropped before the apply phases: live heap then %s (%s with empty shards at the start).\n\n",
		mib(r.LiveHeapBytes["dropped"]), mib(r.LiveHeapBytes["empty"]))
}

// against compares the run at the process's size (if any) with the
// process's figures.
func against(b *strings.Builder, runs []*result, proc *processFile) {
	var r *result
	for _, o := range runs {
		if o.Flags.Concrete == proc.Concrete && o.Flags.Wildcard == proc.Wildcard && o.Flags.Partitions == proc.Partitions {
			r = o
		}
	}
	if r == nil {
		return
	}
	fmt.Fprintf(b, "## Against the router process at %s + %s\n\n", count(proc.Concrete), count(proc.Wildcard))
	h := proc.RouterHeapBytes
	parts := float64(r.Flags.Partitions)
	pc, pw := proc.heapPer("subscribe-concrete"), proc.heapPer("subscribe-wildcard")
	lc, lw := r.phase("load-concrete").HeapPerItem, r.phase("load-wildcard").HeapPerItem
	ac, aw := r.phase("apply-concrete").HeapPerItem, r.phase("apply-wildcard").HeapPerItem
	loaded := float64(r.LiveHeapBytes["load-wildcard"] - r.LiveHeapBytes["empty"])
	applied := float64(r.LiveHeapBytes["apply-wildcard"] - r.LiveHeapBytes["dropped"])
	built, rebuilt := float64(h["concrete_and_wildcard"]-h["empty"]), float64(h["rebuilt"]-h["empty"])
	fmt.Fprintf(b, "- Concrete filters: the shards hold %.0f B per filter loaded and %.0f B applied; the router process grew by %.0f B per filter subscribed: %s the shards applying the same changes.\n",
		lc, ac, pc, relative(pc, ac))
	fmt.Fprintf(b, "- Wildcard filters: the shards hold %s per filter loaded and %s applied, %.0f and %.0f B in each shard; the process grew by %s per filter subscribed, %.0f B per shard: %s the shards applying the same changes.\n",
		perSize(lw), perSize(aw), lw/parts, aw/parts, perSize(pw), pw/float64(proc.Partitions), relative(pw, aw))
	fmt.Fprintf(b, "- The whole index: the shards hold %s loaded and %s applied. The router process held %s more than when empty once its index was subscribed (%s the shards applied), and %s once restarted and rebuilt from CQL (%s the shards loaded).\n\n",
		mib(uint64(loaded)), mib(uint64(applied)), mib(uint64(built)), relative(built, applied), mib(uint64(rebuilt)), relative(rebuilt, loaded))
	var why []string
	if abs(applied-loaded) < 0.05*loaded {
		why = append(why, "Loaded or applied, the same filters take the same heap in the shards, within a few per cent: the path does not change what the index holds.")
	}
	if built > 1.2*applied {
		why = append(why, fmt.Sprintf("The router that applied the subscriptions live held %s more than its shards would: that is not the index but what the process keeps besides, "+
			"its Kafka client and fetch buffers, the outputs and mutations it keeps from batch to batch, the store's driver (candidates, not measured one by one).", mib(uint64(built-applied))))
	}
	if abs(rebuilt-loaded) < 0.1*loaded {
		why = append(why, "The restarted router held what its shards hold: the excess went with the restart, so it was not the subscriptions'.")
	}
	if len(why) > 0 {
		fmt.Fprintf(b, "%s\n\n", strings.Join(why, " "))
	}
}

// relative says how a compares with b: "the same within 3% as", "12% more
// than", "40% less than".
func relative(a, b float64) string {
	if b == 0 {
		return "against nothing in"
	}
	d := 100 * (a - b) / b
	switch {
	case d > -5 && d < 5:
		return fmt.Sprintf("the same, within %.0f%%, as", max(1, abs(d)))
	case d > 0:
		return fmt.Sprintf("%.0f%% more than", d)
	}
	return fmt.Sprintf("%.0f%% less than", -d)
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// count writes a number of filters shortly when it is round (10M, 1.5M,
// 100k) and with thousands separators otherwise.
func count(n int) string {
	switch {
	case n >= 1_000_000 && n%100_000 == 0:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1e6), ".0") + "M"
	case n >= 10_000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return thousands(n)
}

// thousands writes n with a ',' between groups of three digits.
func thousands(n int) string {
	if n < 0 {
		return "-" + thousands(-n)
	}
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// mib writes a size in MiB, or in GiB from 10 GiB.
func mib(n uint64) string {
	if n >= 10<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}

// perSize writes a size per filter: in B, or in KB from 10,000 B.
func perSize(n float64) string {
	if n >= 10_000 {
		return fmt.Sprintf("%.1f KB", n/1000)
	}
	return fmt.Sprintf("%.0f B", n)
}
