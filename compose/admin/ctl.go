package admin

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// DefaultServer is the admin API's default address (admin.listen).
const DefaultServer = "http://127.0.0.1:9091"

// Exit codes of Ctl.
const (
	ExitOK    = 0
	ExitFail  = 1 // the request failed: unknown client, unreachable server, wrong token
	ExitUsage = 2 // the command line is wrong
)

// ctlFlags are shoal ctl's flags, allowed before and after the
// subcommand's words.
type ctlFlags struct {
	servers    []string
	tokenFile  string
	dataDir    string
	tenant     string
	tenantSet  bool
	allTenants bool
	format     string
	filter     string
	timeout    time.Duration
}

// Ctl runs `shoal ctl` with args (after "ctl"): it prints the answer to
// stdout as a table or JSON, and a failure as one line on stderr, and
// returns the exit code. httpClient may be nil (http.DefaultClient).
func Ctl(ctx context.Context, args []string, stdout, stderr io.Writer, httpClient *http.Client) int {
	f, words, err := parseCtl(args)
	if errors.Is(err, flag.ErrHelp) {
		ctlUsage(stdout)
		return ExitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "shoal ctl:", err)
		return ExitUsage
	}
	if len(words) == 0 || words[0] == "help" {
		ctlUsage(stdout)
		return ExitOK
	}
	if words[0] == "completion" {
		return completion(words[1:], stdout, stderr)
	}
	cmd, err := parseCommand(words, f)
	if err != nil {
		fmt.Fprintln(stderr, "shoal ctl:", err)
		return ExitUsage
	}
	token, err := f.token()
	if err != nil {
		fmt.Fprintln(stderr, "shoal ctl:", err)
		return ExitFail
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	c := &APIClient{Servers: f.servers, Token: token, HTTP: httpClient}
	if err := cmd.run(ctx, c, f, stdout); err != nil {
		fmt.Fprintln(stderr, "shoal ctl:", oneLine(err))
		return ExitFail
	}
	return ExitOK
}

func parseCtl(args []string) (ctlFlags, []string, error) {
	f := ctlFlags{dataDir: "./shoal-data", format: "table", timeout: 10 * time.Second}
	fs := flag.NewFlagSet("shoal ctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Func("server", "admin API URL or host:port; repeatable or comma-separated (default "+DefaultServer+")", func(v string) error {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				f.servers = append(f.servers, s)
			}
		}
		return nil
	})
	fs.StringVar(&f.tokenFile, "token-file", "", "file holding the admin token (admin.token_file)")
	fs.StringVar(&f.dataDir, "data-dir", f.dataDir, "data directory of shoal all, whose admin.token is read without --token-file")
	fs.Func("tenant", "the tenant (empty: the default tenant)", func(v string) error { f.tenant, f.tenantSet = v, true; return nil })
	fs.BoolVar(&f.allTenants, "all-tenants", false, "every tenant (listings only)")
	fs.StringVar(&f.format, "format", f.format, "table or json")
	fs.StringVar(&f.filter, "filter", "", "subscriptions: those with this filter; retained: those whose topic it matches")
	fs.DurationVar(&f.timeout, "timeout", f.timeout, "time limit of the whole command")
	var words []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return f, nil, err
			}
			return f, nil, flagError(err)
		}
		if fs.NArg() == 0 {
			break
		}
		words = append(words, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(f.servers) == 0 {
		f.servers = []string{DefaultServer}
	}
	if f.format != "table" && f.format != "json" {
		return f, nil, fmt.Errorf("--format: %q is not table or json", f.format)
	}
	if f.tenantSet && f.allTenants {
		return f, nil, errors.New("--tenant and --all-tenants exclude each other")
	}
	return f, words, nil
}

// flagError is the flag package's error about the command line in the
// words of shoal's other commands: the flag as the help spells it
// (--name), and the help to read.
func flagError(err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		msg = "unknown flag --" + name
	} else if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		msg = "flag needs an argument: --" + name
	}
	return fmt.Errorf("%s; see shoal ctl -h", msg)
}

// token reads --token-file, or the token shoal all made in --data-dir.
func (f ctlFlags) token() (string, error) {
	path := f.tokenFile
	if path == "" {
		path = filepath.Join(f.dataDir, TokenFileName)
	}
	tok, err := ReadToken(path)
	if err != nil && f.tokenFile == "" {
		return "", fmt.Errorf("%w (give --token-file, or --data-dir of shoal all)", err)
	}
	return tok, err
}

func (f ctlFlags) scope(listing bool) (Scope, error) {
	switch {
	case f.allTenants && listing:
		return Scope{AllTenants: true}, nil
	case f.allTenants:
		return Scope{}, errors.New("--all-tenants is for listings; a change names one --tenant")
	case !f.tenantSet:
		return Scope{}, errors.New("--tenant is required (--tenant '' for the default tenant), or --all-tenants for a listing")
	}
	return Scope{Tenant: f.tenant}, nil
}

// command is one parsed subcommand.
type command struct {
	kind  string // clients, sessions, subscriptions, retained, bridges, kick, delete-session, delete-retained
	show  string // the argument of show, kick and delete
	scope Scope
}

func parseCommand(words []string, f ctlFlags) (command, error) {
	var c command
	arg := func(what string, rest []string) (string, error) {
		if len(rest) != 1 {
			return "", fmt.Errorf("%s takes one argument, %s", strings.Join(words[:len(words)-len(rest)], " "), what)
		}
		return rest[0], nil
	}
	var err error
	listing := false
	switch w := words[0]; w {
	case "clients", "sessions", "subscriptions", "retained":
		c.kind = w
		what := "CLIENT"
		if w == "retained" {
			what = "TOPIC"
		}
		switch {
		case len(words) == 1 || (len(words) == 2 && words[1] == "list"):
			listing = true
		case words[1] == "show":
			c.show, err = arg(what, words[2:])
		default:
			err = fmt.Errorf("%s: unknown action %q (list or show %s)", w, words[1], what)
		}
	case "bridges":
		c.kind = w
		listing = true
		if len(words) > 1 && (len(words) > 2 || words[1] != "list") {
			err = fmt.Errorf("bridges: unknown action %q (list)", words[1])
		}
	case "kick":
		c.kind = "kick"
		c.show, err = arg("CLIENT", words[1:])
	case "delete":
		switch {
		case len(words) > 1 && words[1] == "session":
			c.kind = "delete-session"
			c.show, err = arg("CLIENT", words[2:])
		case len(words) > 1 && words[1] == "retained":
			c.kind = "delete-retained"
			c.show, err = arg("TOPIC", words[2:])
		default:
			err = errors.New("delete: say what: delete session CLIENT, or delete retained TOPIC")
		}
	default:
		return c, fmt.Errorf("unknown command %q (shoal ctl help lists them)", w)
	}
	if err != nil {
		return c, err
	}
	c.scope, err = f.scope(listing)
	return c, err
}

func (cmd command) run(ctx context.Context, c *APIClient, f ctlFlags, w io.Writer) error {
	tenant := cmd.scope.Tenant
	switch cmd.kind {
	case "clients":
		l, err := c.Clients(ctx, cmd.scope, cmd.show)
		if err != nil {
			return err
		}
		if cmd.show != "" {
			if len(l) == 0 {
				return fmt.Errorf("client %q of tenant %q is not connected to any gateway given", cmd.show, tenant)
			}
			return output(w, f.format, l[0], true)
		}
		return output(w, f.format, Clients{Clients: l}, false)
	case "sessions":
		l, err := c.Sessions(ctx, cmd.scope, cmd.show)
		if err != nil {
			return err
		}
		if cmd.show != "" {
			if len(l) == 0 {
				return fmt.Errorf("client %q of tenant %q has no session", cmd.show, tenant)
			}
			return output(w, f.format, l[0], true)
		}
		return output(w, f.format, Sessions{Sessions: l}, false)
	case "subscriptions":
		l, err := c.Subscriptions(ctx, cmd.scope, cmd.show, f.filter)
		if err != nil {
			return err
		}
		return output(w, f.format, Subscriptions{Subscriptions: l}, false)
	case "retained":
		filter := f.filter
		if filter == "" {
			filter = "#" // as MQTT's "#": not the broker's $SYS topics ('--filter $SYS/#' shows them)
		}
		if cmd.show != "" {
			filter = cmd.show // a topic name matches itself alone
		}
		l, err := c.Retained(ctx, cmd.scope, filter)
		if err != nil {
			return err
		}
		if cmd.show != "" {
			if len(l) == 0 {
				return fmt.Errorf("tenant %q has no retained message on %q", tenant, cmd.show)
			}
			return output(w, f.format, l[0], true)
		}
		return output(w, f.format, RetainedList{Retained: l}, false)
	case "bridges":
		l, err := c.Bridges(ctx, cmd.scope)
		if err != nil {
			return err
		}
		return output(w, f.format, Bridges{Mappings: l}, false)
	}
	var a Accepted
	var err error
	switch cmd.kind {
	case "kick":
		a, err = c.Kick(ctx, tenant, cmd.show)
	case "delete-session":
		a, err = c.DeleteSession(ctx, tenant, cmd.show)
	case "delete-retained":
		a, err = c.DeleteRetained(ctx, tenant, cmd.show)
	}
	if err != nil {
		return err
	}
	if f.format == "json" {
		return output(w, "json", a, true)
	}
	switch cmd.kind {
	case "kick":
		fmt.Fprintf(w, "kicked client %q of tenant %q (written to the log: %s)\n", cmd.show, tenant, a.Detail)
	case "delete-session":
		fmt.Fprintf(w, "deleted the session of client %q of tenant %q (written to the log: %s)\n", cmd.show, tenant, a.Detail)
	default:
		fmt.Fprintf(w, "deleted the retained message on %q of tenant %q (written to the log: %s)\n", cmd.show, tenant, a.Detail)
	}
	return nil
}

// oneLine keeps an error to one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// output writes v as JSON, or as a table: a list (a struct whose one field
// is a slice) one row per element, a single item one "field value" line
// per field. Columns are the JSON names.
func output(w io.Writer, format string, v any, single bool) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if single {
		rv := reflect.ValueOf(v)
		for i := range rv.NumField() {
			name, cell, ok := column(rv.Type().Field(i), rv.Field(i))
			if ok {
				fmt.Fprintf(tw, "%s\t%s\n", name, cell)
			}
		}
		return tw.Flush()
	}
	list := reflect.ValueOf(v).Field(0)
	et := list.Type().Elem()
	var head []string
	for i := range et.NumField() {
		if name, _, ok := column(et.Field(i), reflect.Zero(et.Field(i).Type)); ok && !wide(name) {
			head = append(head, strings.ToUpper(name))
		}
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for j := range list.Len() {
		row := list.Index(j)
		var cells []string
		for i := range et.NumField() {
			if name, cell, ok := column(et.Field(i), row.Field(i)); ok && !wide(name) {
				cells = append(cells, cell)
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// wide names the columns a table of many rows leaves to show and JSON.
func wide(name string) bool {
	switch name {
	case "username", "keep_alive_s", "inflight_in", "generation", "protocol_version", "slot", "payload_base64",
		"no_local", "retain_as_published", "retain_handling", "subscription_id", "published_at", "expires_at",
		"disconnected_at", "inbox_dropped", "session_expiry_s", "filters", "payload_size":
		return true
	}
	return false
}

// column is a field's JSON name and its cell.
func column(sf reflect.StructField, v reflect.Value) (string, string, bool) {
	name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
	if name == "" || name == "-" {
		return "", "", false
	}
	return name, cell(name, v), true
}

func cell(name string, v reflect.Value) string {
	switch x := v.Interface().(type) {
	case string:
		if name == "tenant" && x == "" {
			return "(default)"
		}
		if name == "payload" && len(x) > 40 {
			return strconv.Quote(x[:37] + "...")
		}
		if name == "payload" {
			return strconv.Quote(x)
		}
		if x == "" {
			return "-"
		}
		return x
	case time.Time:
		if x.IsZero() {
			return "-"
		}
		return x.Format(time.RFC3339)
	case *time.Time:
		if x == nil {
			return "-"
		}
		return x.Format(time.RFC3339)
	case *int64:
		if x == nil {
			return "-"
		}
		return strconv.FormatInt(*x, 10)
	case uint32:
		if name == "expiry_s" && x == ^uint32(0) {
			return "never"
		}
		return strconv.FormatUint(uint64(x), 10)
	case []SessionFilter:
		var fs []string
		for _, f := range x {
			fs = append(fs, fmt.Sprintf("%s (qos %d)", f.Filter, f.QoS))
		}
		if len(fs) == 0 {
			return "-"
		}
		return strings.Join(fs, ", ")
	}
	return fmt.Sprint(v.Interface())
}
