package replay

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoal-mqtt/shoal/kafka"
)

// The merge holds at most mergeBuffer events of a partition: a reader
// whose partition is ahead waits until the merge has written some, and
// the merge waits for every partition that has not caught up before it
// writes anything.
func TestMergeBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const size = 4
		ahead := newStream(kafka.TopicSpec{Name: "a"}, 0, span{partition: 0, end: 100}, size)
		behind := newStream(kafka.TopicSpec{Name: "a"}, 0, span{partition: 1, end: 100}, size)
		m := newMerge([]*stream{ahead, behind})
		event := func(ms int) *item {
			it := m.newItem()
			it.ev.Time = time.UnixMilli(int64(ms))
			it.ev.Offset = int64(ms)
			return it
		}
		var evs []*item
		for i := range 3 * size {
			evs = append(evs, event(1000+i))
		}
		pushed := make(chan bool, 1)
		go func() { pushed <- m.push(ahead, evs, finished) }()
		synctest.Wait()
		select {
		case <-pushed:
			t.Fatal("a push of three times the buffer returned before the merge took any")
		default:
		}
		if ahead.n != size {
			t.Errorf("%d events buffered, want the bound %d", ahead.n, size)
		}
		got := make(chan int64, 4*size)
		go func() {
			for {
				it, _ := m.next(nil)
				if it == nil {
					close(got)
					return
				}
				got <- it.ev.Offset
				m.release(it)
			}
		}()
		synctest.Wait()
		if len(got) != 0 {
			t.Fatalf("the merge wrote %d events before the partition behind had one", len(got))
		}
		m.push(behind, []*item{event(1), event(2)}, finished)
		if !<-pushed {
			t.Error("push reported the merge stopped")
		}
		var order []int64
		for off := range got {
			order = append(order, off)
		}
		if len(order) != 2+3*size || order[0] != 1 || order[1] != 2 || order[2] != 1000 || !slices.IsSorted(order) {
			t.Errorf("merged %v", order)
		}
	})
}
