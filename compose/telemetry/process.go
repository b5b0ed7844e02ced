package telemetry

import (
	"bytes"
	"context"
	"os"
	"strconv"

	"go.opentelemetry.io/otel/metric"
)

// registerProcess adds the process's resident memory and open file
// descriptors (from /proc; nothing where there is none), which the runtime
// instruments do not report: an operator sees what the kernel charges the
// process, not only the Go heap.
func registerProcess(m metric.Meter) error {
	rss, err := m.Int64ObservableGauge("process.memory.usage", metric.WithUnit("By"),
		metric.WithDescription("Resident set size of the process."))
	if err != nil {
		return err
	}
	fds, err := m.Int64ObservableGauge("process.open_file_descriptor.count", metric.WithUnit("{file_descriptor}"),
		metric.WithDescription("File descriptors the process holds open."))
	if err != nil {
		return err
	}
	pageSize := int64(os.Getpagesize())
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if b, err := os.ReadFile("/proc/self/statm"); err == nil {
			if f := bytes.Fields(b); len(f) > 1 {
				if pages, err := strconv.ParseInt(string(f[1]), 10, 64); err == nil {
					o.ObserveInt64(rss, pages*pageSize)
				}
			}
		}
		if d, err := os.Open("/proc/self/fd"); err == nil {
			names, err := d.Readdirnames(-1)
			_ = d.Close()
			if err == nil {
				o.ObserveInt64(fds, int64(len(names)-1)) // less the one just opened
			}
		}
		return nil
	}, rss, fds)
	return err
}
