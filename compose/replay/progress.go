package replay

import (
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Bar is a Progress drawn on a terminal (stderr): records read, the rate
// and, when the range has an end, the time left.
type Bar struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

// NewBar returns a Bar drawing on w, which should be a terminal.
func NewBar(w io.Writer) *Bar { return &Bar{w: w} }

// Start sets the number of records to read (-1: following, no end).
func (b *Bar) Start(total int64) {
	b.bar = progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(b.w),
		progressbar.OptionSetDescription("reading"),
		progressbar.OptionSetItsString("records"),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetPredictTime(total > 0),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetWidth(30),
	)
}

// Add counts n more records read.
func (b *Bar) Add(n int64) { _ = b.bar.Add64(n) }

// Finish clears the bar.
func (b *Bar) Finish() { _ = b.bar.Finish() }
