package console_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// browser starts Debian's chromium, headless, for the test; alerts counts
// the alert() dialogs a page opened (an XSS would), and every confirm()
// is accepted.
func browser(t *testing.T) (ctx context.Context, alerts *atomic.Int32) {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("no chromium: scripts/test-deps.sh installs Debian's (make test runs it)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(1280, 860))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	alerts = new(atomic.Int32)
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			if ev.Type == page.DialogTypeAlert {
				alerts.Add(1)
			}
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	return ctx, alerts
}

// screenshots is where the test's screenshots go: docs/console with
// SHOAL_CONSOLE_SCREENSHOTS=1 (make screenshots), else a directory the
// test removes.
func screenshots(t *testing.T) string {
	if os.Getenv("SHOAL_CONSOLE_SCREENSHOTS") == "1" {
		return filepath.Join("..", "..", "docs", "console")
	}
	return t.TempDir()
}

// step runs actions with a bound on their time.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// value runs one action that returns a value.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

func shot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png := value(t, ctx, "screenshot "+name, chromedp.CaptureScreenshot())
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConsoleInBrowser drives the console in a real browser: the login
// form, a connected client on the clients page, its kick, a log query
// that finds a message, the message's trace with its delivery, and a
// client id made of HTML that renders as text. It takes the
// screenshots docs/console.md shows.
func TestConsoleInBrowser(t *testing.T) {
	s := startSite(t)
	dir := screenshots(t)
	got := make(chan *paho.Publish, 16)
	watch := s.connect(t, "acme-dashboard", func(p *paho.Publish) {
		select {
		case got <- p:
		default: // the live stream below: not waited for
		}
	})
	subscribe(t, watch, "acme/room/#")
	sensor := s.connect(t, "acme-sensor1", nil)
	subscribe(t, sensor, "acme/cmd/sensor1")
	s.connect(t, xssID, nil)
	s.connect(t, "globex-line7", nil)
	for i, topic := range []string{"acme/room/1/temp", "acme/room/2/temp"} {
		if _, err := sensor.Publish(t.Context(), &paho.Publish{Topic: topic, Payload: []byte(`{"celsius":21.` + string(rune('0'+i)) + `}`), QoS: 1, Retain: true}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("the dashboard got no message")
		}
	}
	ctx, alerts := browser(t)
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }

	// The login form.
	step(t, ctx, "open the console", chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(css("#token")))
	if loc := value(t, ctx, "location", chromedp.Location()); !strings.Contains(loc, "/login") {
		t.Fatalf("/ without a login went to %s", loc)
	}
	shot(t, ctx, dir, "login")
	step(t, ctx, "log in", chromedp.SendKeys(css("#token"), s.admin), chromedp.Submit(css("#token")),
		chromedp.WaitVisible(css("#connections")))

	// The overview: the connections, and the live chart of a steady
	// stream of messages once six samples are in (the page refreshes its
	// live part every 2 s).
	pubCtx, stopPub := context.WithCancel(t.Context())
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for n := 0; n < 2000; n++ {
			select {
			case <-pubCtx.Done():
				return
			case <-tick.C:
			}
			if _, err := sensor.Publish(pubCtx, &paho.Publish{Topic: "acme/room/3/temp", Payload: []byte("20.5")}); err != nil {
				return
			}
		}
	}()
	step(t, ctx, "the live chart", chromedp.WaitVisible(css("svg.chart polyline.in")))
	eventually.True(t, 30*time.Second, "six points on the live chart", func() bool {
		pts := value(t, ctx, "chart points", chromedp.Evaluate[string](`document.querySelector("svg.chart polyline.in").getAttribute("points")`))
		return len(strings.Fields(pts)) >= 5
	})
	if in := value(t, ctx, "rate in", chromedp.Text(css("#rate-in"))); in == "0" {
		t.Errorf("overview: 0 messages in per second while 40 a second are published")
	}
	if conns := value(t, ctx, "connections", chromedp.Text(css("#connections"))); conns != "4" {
		t.Errorf("overview: %s connections, want 4", conns)
	}
	shot(t, ctx, dir, "overview")
	stopPub()
	<-pubDone

	// The clients page: the connected clients, the HTML client id as text.
	step(t, ctx, "clients", chromedp.Navigate(s.url+"/clients"), chromedp.WaitVisible(css("#clients")))
	table := value(t, ctx, "clients table", chromedp.Text(css("#clients")))
	for _, id := range []string{"acme-sensor1", "acme-dashboard", "globex-line7"} {
		if !strings.Contains(table, id) {
			t.Errorf("clients page lacks %s:\n%s", id, table)
		}
	}
	imgs := value(t, ctx, "img elements", chromedp.Evaluate[int](`document.querySelectorAll("main img").length`))
	xssText := value(t, ctx, "xss link", chromedp.Evaluate[string](
		`[...document.querySelectorAll("#clients a.client")].map(a => a.textContent).filter(s => s.includes("img")).join()`))
	if imgs != 0 || xssText != xssID {
		t.Errorf("the client id %q rendered as HTML: %d img elements, link text %q", xssID, imgs, xssText)
	}
	shot(t, ctx, dir, "clients")

	// A client's page, then its kick (the confirm is accepted).
	step(t, ctx, "a client's page", chromedp.Navigate(s.url+"/clients/show?tenant=acme&client=acme-sensor1"),
		chromedp.WaitVisible(css("#client-subscriptions")))
	shot(t, ctx, dir, "client")
	step(t, ctx, "kick", chromedp.Click(css("#kick")), chromedp.WaitVisible(css("#flash")))
	if flash := value(t, ctx, "flash", chromedp.Text(css("#flash"))); !strings.Contains(flash, `Kicked client "acme-sensor1"`) {
		t.Errorf("after the kick: %q", flash)
	}
	eventually.True(t, 10*time.Second, "acme-sensor1 gone from the clients page", func() bool {
		step(t, ctx, "clients", chromedp.Navigate(s.url+"/clients?tenant=acme"), chromedp.WaitVisible(css("#clients")))
		text := value(t, ctx, "clients table", chromedp.Text(css("#clients")))
		return !strings.Contains(text, "acme-sensor1") && strings.Contains(text, "acme-dashboard")
	})

	// The log's query: acme's publishes; then the first one's trace.
	step(t, ctx, "log query", chromedp.Navigate(s.url+"/log"), chromedp.WaitVisible(css("#log-query")),
		chromedp.SetValue(css(`input[name="tenant"]`), "acme"), chromedp.SetValue(css(`input[name="type"]`), "publish"),
		chromedp.Click(css("#run-query")), chromedp.WaitVisible(css("#log")))
	rows := value(t, ctx, "log table", chromedp.Text(css("#log")))
	if !strings.Contains(rows, "acme/room/1/temp") || !strings.Contains(rows, "acme/room/2/temp") {
		t.Fatalf("the log's query lacks the publishes:\n%s", rows)
	}
	shot(t, ctx, dir, "log")
	step(t, ctx, "trace", chromedp.Click(css("#log a.trace")), chromedp.WaitVisible(css("#timeline")))
	timeline := value(t, ctx, "timeline", chromedp.Text(css("#timeline")))
	for _, want := range []string{"publish", "acme-sensor1 on", "delivery", "acme-dashboard (QoS 1"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("the trace lacks %q:\n%s", want, timeline)
		}
	}
	shot(t, ctx, dir, "trace")
	// The same message found by its id, typed into the trace page's form.
	id := value(t, ctx, "the message id", chromedp.Evaluate[string](`new URLSearchParams(location.search).get("id")`))
	step(t, ctx, "trace by id", chromedp.Navigate(s.url+"/trace"), chromedp.WaitVisible(css(`input[name="id"]`)),
		chromedp.SendKeys(css(`input[name="id"]`), id), chromedp.Submit(css(`input[name="id"]`)), chromedp.WaitVisible(css("#timeline")))
	if again := value(t, ctx, "timeline", chromedp.Text(css("#timeline"))); again != timeline {
		t.Errorf("the trace of %s typed in differs from the linked one:\n%s", id, again)
	}

	step(t, ctx, "retained", chromedp.Navigate(s.url+"/retained?tenant=acme"), chromedp.WaitVisible(css("#retained")))
	shot(t, ctx, dir, "retained")
	// globex's console token, in the same browser after a log out: globex's
	// client alone.
	step(t, ctx, "log out", chromedp.Click(css("form.logout button")), chromedp.WaitVisible(css("#token")))
	step(t, ctx, "log in as globex", chromedp.SendKeys(css("#token"), s.globex), chromedp.Submit(css("#token")),
		chromedp.WaitVisible(css("#connections")), chromedp.Navigate(s.url+"/clients"), chromedp.WaitVisible(css("#clients")))
	if text := value(t, ctx, "globex's clients", chromedp.Text(css("#clients"))); !strings.Contains(text, "globex-line7") || strings.Contains(text, "acme") {
		t.Errorf("globex's clients page:\n%s", text)
	}
	if who := value(t, ctx, "who", chromedp.Text(css("#who"))); who != "tenant globex" {
		t.Errorf("globex's header says %q", who)
	}
	if n := alerts.Load(); n != 0 {
		t.Errorf("%d alert() dialogs opened: a page ran a client's text as HTML", n)
	}
}
