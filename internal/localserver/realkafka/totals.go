package realkafka

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TopicTotals returns, for every topic whose name starts with prefix, the
// sum of its partitions' end offsets (the records it ever held) and the
// size of its logs on every broker (replicas counted), as a benchmark reads
// what a load wrote to the log.
func TopicTotals(ctx context.Context, brokers []string, prefix string) (records, bytes map[string]int64, err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ClientID("realkafka-totals"), kgo.DisableClientMetrics())
	if err != nil {
		return nil, nil, fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	offs, err := adm.ListEndOffsets(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("end offsets: %w", err)
	}
	records, bytes = map[string]int64{}, map[string]int64{}
	var oerr error
	offs.Each(func(o kadm.ListedOffset) {
		if !strings.HasPrefix(o.Topic, prefix) {
			return
		}
		if o.Err != nil {
			oerr = errors.Join(oerr, fmt.Errorf("%s[%d]: %w", o.Topic, o.Partition, o.Err))
		}
		records[o.Topic] += o.Offset
	})
	if oerr != nil {
		return nil, nil, fmt.Errorf("end offsets: %w", oerr)
	}
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("log dirs: %w", err)
	}
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if strings.HasPrefix(p.Topic, prefix) {
				bytes[p.Topic] += p.Size
			}
		})
	})
	return records, bytes, nil
}
