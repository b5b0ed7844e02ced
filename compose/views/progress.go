package views

import (
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress shows records read, their rate and the time left on a
// terminal; without one it does nothing.
type progress struct {
	bar *progressbar.ProgressBar
}

func newProgress(w io.Writer, total int64) *progress {
	if w == nil || total <= 0 {
		return &progress{}
	}
	return &progress{bar: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("rebuilding"),
		progressbar.OptionShowCount(),
		progressbar.OptionSetItsString("records"),
		progressbar.OptionShowIts(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)}
}

func (p *progress) add(n int64) {
	if p.bar != nil {
		_ = p.bar.Add64(n) // a terminal write error: nothing to do
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
