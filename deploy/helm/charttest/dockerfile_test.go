package charttest

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// repoRoot is the repository's root, the image's build context.
const repoRoot = "../../.."

// dockerInstr is one instruction of a Dockerfile, continuation lines
// joined and comments dropped.
type dockerInstr struct {
	line int    // where it starts
	cmd  string // upper case: FROM, RUN, …
	args string
}

// dockerStage is one FROM and what follows it.
type dockerStage struct {
	image, name string // the image after ARG substitution; the AS name
	instrs      []dockerInstr
}

// all returns the stage's instructions of cmd.
func (s dockerStage) all(cmd string) []dockerInstr {
	var out []dockerInstr
	for _, in := range s.instrs {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// dockerfile is a parsed Dockerfile: its global ARG defaults and stages.
type dockerfile struct {
	args   map[string]string
	stages []dockerStage
}

// parseDockerfile reads path: instructions, continuation lines ("\" at the
// end) joined, comment lines dropped (also inside continuations, as
// Docker does), the ARGs before the first FROM substituted into FROM.
func parseDockerfile(t *testing.T, path string) dockerfile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	df := dockerfile{args: map[string]string{}}
	var cur strings.Builder
	start := 0
	flush := func() {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			return
		}
		cmd, args, _ := strings.Cut(text, " ")
		in := dockerInstr{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		switch {
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			st := dockerStage{image: expandArgs(t, f[0], df.args)}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			df.stages = append(df.stages, st)
		case len(df.stages) == 0:
			if in.cmd != "ARG" {
				t.Fatalf("%s:%d: %s before the first FROM", path, in.line, in.cmd)
			}
			name, def, _ := strings.Cut(in.args, "=")
			df.args[name] = def
		default:
			st := &df.stages[len(df.stages)-1]
			st.instrs = append(st.instrs, in)
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if cur.Len() == 0 {
			if strings.TrimSpace(line) == "" {
				continue
			}
			start = n
		}
		if l, ok := strings.CutSuffix(strings.TrimRight(line, " \t"), `\`); ok {
			cur.WriteString(l + " ")
			continue
		}
		cur.WriteString(line)
		flush()
	}
	flush()
	if len(df.stages) == 0 {
		t.Fatalf("%s: no FROM", path)
	}
	return df
}

var argRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// expandArgs substitutes $NAME and ${NAME} with vars, failing on a name
// vars lacks (a build argument this test does not know of).
func expandArgs(t *testing.T, s string, vars map[string]string) string {
	t.Helper()
	return argRef.ReplaceAllStringFunc(s, func(ref string) string {
		m := argRef.FindStringSubmatch(ref)
		name := m[1] + m[2]
		v, ok := vars[name]
		if !ok {
			t.Fatalf("%q: $%s is not a known build argument", s, name)
		}
		return v
	})
}

// shellWords splits a shell command into words: blanks separate them,
// single quotes keep text as it is, double quotes and bare words expand
// $NAME and ${NAME} from vars. Enough for the Dockerfile's RUN of go build;
// anything fancier fails the test.
func shellWords(t *testing.T, s string, vars map[string]string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				t.Fatalf("unterminated ' in %q", s)
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				t.Fatalf("unterminated \" in %q", s)
			}
			part := s[i+1 : i+1+j]
			if strings.ContainsAny(part, "\\`") {
				t.Fatalf("%q: escapes and command substitution are not supported here", s)
			}
			w.WriteString(expandArgs(t, part, vars))
			i += j + 1
			inWord = true
		case strings.IndexByte("\\`|;<>&()", c) >= 0:
			t.Fatalf("%q: %q is not supported here", s, c)
		default:
			j := i
			for j < len(s) && strings.IndexByte(" \t'\"\\`|;<>&()", s[j]) < 0 {
				j++
			}
			w.WriteString(expandArgs(t, s[i:j], vars))
			i = j - 1
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// goBuild is the Dockerfile's go build: its environment assignments and
// arguments, with the build arguments given substituted.
type goBuild struct {
	stage dockerStage
	env   []string // NAME=VALUE, from the stage's ENV and the command's prefix
	args  []string // after "go"
}

// findGoBuild returns the one RUN that runs go build, in a stage other
// than the last. buildArgs are the --build-arg values.
func findGoBuild(t *testing.T, df dockerfile, buildArgs map[string]string) goBuild {
	t.Helper()
	var found []goBuild
	for _, st := range df.stages[:len(df.stages)-1] {
		vars := map[string]string{}
		var env []string
		for _, in := range st.instrs {
			switch in.cmd {
			case "ARG":
				name, def, _ := strings.Cut(in.args, "=")
				vars[name] = def
				if v, ok := buildArgs[name]; ok {
					vars[name] = v
				}
			case "ENV":
				for _, kv := range shellWords(t, in.args, vars) {
					name, v, ok := strings.Cut(kv, "=")
					if !ok {
						t.Fatalf("line %d: ENV %s: only NAME=VALUE is supported here", in.line, in.args)
					}
					vars[name] = v
					env = append(env, kv)
				}
			case "RUN":
				cmdline := in.args
				for strings.HasPrefix(cmdline, "--") { // RUN --mount=… and the like
					_, cmdline, _ = strings.Cut(cmdline, " ")
					cmdline = strings.TrimSpace(cmdline)
				}
				for _, part := range strings.Split(cmdline, "&&") {
					if !strings.Contains(part, "go build") {
						continue
					}
					words := shellWords(t, part, vars)
					e := slices.Clone(env)
					for len(words) > 0 && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(words[0]) {
						e = append(e, words[0])
						words = words[1:]
					}
					if len(words) < 2 || words[0] != "go" || words[1] != "build" {
						t.Fatalf("line %d: %q: want [NAME=VALUE …] go build …", in.line, part)
					}
					found = append(found, goBuild{stage: st, env: e, args: words[1:]})
				}
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d RUN go build in the build stages, want 1", len(found))
	}
	return found[0]
}

// getenv returns the value of name in env (NAME=VALUE, the last wins).
func getenv(env []string, name string) (string, bool) {
	v, ok := "", false
	for _, kv := range env {
		if n, val, _ := strings.Cut(kv, "="); n == name {
			v, ok = val, true
		}
	}
	return v, ok
}

// outputArg returns the index of go build's -o value in args, -1 if none.
func outputArg(args []string) int {
	for i, a := range args {
		if a == "-o" && i+1 < len(args) {
			return i + 1
		}
	}
	return -1
}

// shoalContainer is a container of the Dockerfile's image, with its
// workload and its pod's security context.
type shoalContainer struct {
	obj Object
	pod *corev1.PodSecurityContext
	ctr corev1.Container
}

// shoalContainers returns the containers of image in the workloads of
// objs.
func shoalContainers(t *testing.T, objs []Object, image string) []shoalContainer {
	t.Helper()
	var out []shoalContainer
	for _, o := range objs {
		var spec corev1.PodSpec
		switch o.Kind {
		case "Deployment":
			var d appsv1.Deployment
			if err := yaml.Unmarshal(o.YAML, &d); err != nil {
				t.Fatalf("%s: %v", o, err)
			}
			spec = d.Spec.Template.Spec
		case "StatefulSet":
			var s appsv1.StatefulSet
			if err := yaml.Unmarshal(o.YAML, &s); err != nil {
				t.Fatalf("%s: %v", o, err)
			}
			spec = s.Spec.Template.Spec
		default:
			continue
		}
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			if c.Image == image {
				out = append(out, shoalContainer{obj: o, pod: spec.SecurityContext, ctr: c})
			}
		}
	}
	return out
}

// chartImage is the Shoal image the chart renders by default: its
// repository and, as tag, the chart's appVersion.
func chartImage(t *testing.T) string {
	t.Helper()
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	var values struct {
		Image struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
		} `json:"image"`
	}
	for path, into := range map[string]any{filepath.Join(chartDir, "Chart.yaml"): &chart, filepath.Join(chartDir, "values.yaml"): &values} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, into); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	if values.Image.Tag != "" {
		t.Fatalf("values.yaml: image.tag %q, want empty (the chart's appVersion)", values.Image.Tag)
	}
	return values.Image.Repository + ":" + chart.AppVersion
}

// TestDockerfileFitsChart: the image of the repository's Dockerfile is
// what the chart expects of it. A static binary on distroless/static (or
// scratch) as a non-root user, the uid and gid the chart's pods run as;
// the entry point the chart's containers run with their args; every port
// they declare exposed.
func TestDockerfileFitsChart(t *testing.T) {
	df := parseDockerfile(t, filepath.Join(repoRoot, "Dockerfile"))
	final := df.stages[len(df.stages)-1]

	if !regexp.MustCompile(`^(gcr\.io/distroless/static(-debian\d+)?:nonroot|scratch)$`).MatchString(final.image) {
		t.Errorf("final stage FROM %s, want gcr.io/distroless/static-debian12:nonroot or scratch", final.image)
	}

	// The builder's Go is at least the go line of go.mod.
	gomod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`).FindSubmatch(gomod)
	var builder string
	for _, st := range df.stages[:len(df.stages)-1] {
		if strings.HasPrefix(st.image, "golang:") {
			builder = st.image
		}
	}
	have := regexp.MustCompile(`^golang:(\d+)\.(\d+)`).FindStringSubmatch(builder)
	if want == nil || have == nil {
		t.Errorf("no golang:X.Y builder stage (%q) or no go line in go.mod", builder)
	} else {
		wantMajor, _ := strconv.Atoi(string(want[1]))
		wantMinor, _ := strconv.Atoi(string(want[2]))
		haveMajor, _ := strconv.Atoi(have[1])
		haveMinor, _ := strconv.Atoi(have[2])
		if haveMajor < wantMajor || haveMajor == wantMajor && haveMinor < wantMinor {
			t.Errorf("builder %s is older than go.mod's go %s.%s", builder, want[1], want[2])
		}
	}

	// Static: no cgo.
	gb := findGoBuild(t, df, map[string]string{"VERSION": "test-version"})
	if outputArg(gb.args) < 0 {
		t.Fatalf("go %s: no -o OUTPUT", strings.Join(gb.args, " "))
	}
	if v, _ := getenv(gb.env, "CGO_ENABLED"); v != "0" {
		t.Errorf("go build runs with CGO_ENABLED=%q, want 0 (a static binary for %s)", v, final.image)
	}

	// The entry point, which the chart's containers keep (no command):
	// the binary go build made, copied from the build stage.
	ep := final.all("ENTRYPOINT")
	if len(ep) != 1 || ep[0].args != `["/shoal"]` {
		t.Errorf("ENTRYPOINT: %d of them, the last %+v; want one, [\"/shoal\"]", len(ep), ep)
	}
	out := gb.args[outputArg(gb.args)]
	copied := slices.ContainsFunc(final.all("COPY"), func(in dockerInstr) bool {
		return in.args == fmt.Sprintf("--from=%s %s /shoal", gb.stage.name, out)
	})
	if gb.stage.name == "" || !copied {
		t.Errorf("the final stage does not COPY --from=%s %s /shoal (go build's -o)", gb.stage.name, out)
	}

	// USER uid:gid, numeric (a pod's runAsNonRoot can check only a
	// number) and not root.
	users := final.all("USER")
	if len(users) == 0 {
		t.Fatal("the final stage sets no USER: the image would run as root")
	}
	uidS, gidS, _ := strings.Cut(users[len(users)-1].args, ":")
	uid, uerr := strconv.ParseInt(uidS, 10, 64)
	gid, gerr := strconv.ParseInt(gidS, 10, 64)
	if uerr != nil || gerr != nil || uid == 0 || gid == 0 {
		t.Fatalf("USER %s, want a numeric non-root uid:gid", users[len(users)-1].args)
	}

	var exposed []int32
	for _, in := range final.all("EXPOSE") {
		for _, p := range strings.Fields(in.args) {
			n, err := strconv.ParseInt(strings.TrimSuffix(p, "/tcp"), 10, 32)
			if err != nil {
				t.Fatalf("EXPOSE %s: %v", in.args, err)
			}
			exposed = append(exposed, int32(n))
		}
	}

	image := chartImage(t)
	for _, c := range combinations(t) {
		t.Run(c.name, func(t *testing.T) {
			ctrs := shoalContainers(t, render(t, c.values), image)
			roles := map[string]bool{}
			for _, sc := range ctrs {
				if len(sc.ctr.Args) > 0 {
					roles[sc.ctr.Args[0]] = true
				}
				if len(sc.ctr.Command) > 0 {
					t.Errorf("%s: container %s sets command %q, which replaces the image's ENTRYPOINT", sc.obj, sc.ctr.Name, sc.ctr.Command)
				}
				for _, p := range sc.ctr.Ports {
					if !slices.Contains(exposed, p.ContainerPort) {
						t.Errorf("%s: container %s declares port %s %d, which the Dockerfile does not EXPOSE (%v)", sc.obj, sc.ctr.Name, p.Name, p.ContainerPort, exposed)
					}
				}
				if c.name != "default" {
					continue
				}
				runAs := func(pod, ctr *int64) (int64, bool) {
					if ctr != nil {
						return *ctr, true
					}
					if pod != nil {
						return *pod, true
					}
					return 0, false
				}
				var podUser, podGroup, ctrUser, ctrGroup *int64
				if sc.pod != nil {
					podUser, podGroup = sc.pod.RunAsUser, sc.pod.RunAsGroup
				}
				if s := sc.ctr.SecurityContext; s != nil {
					ctrUser, ctrGroup = s.RunAsUser, s.RunAsGroup
				}
				if u, ok := runAs(podUser, ctrUser); !ok || u != uid {
					t.Errorf("%s: runs as user %d (set: %v), the image's USER is %d", sc.obj, u, ok, uid)
				}
				if g, ok := runAs(podGroup, ctrGroup); !ok || g != gid {
					t.Errorf("%s: runs as group %d (set: %v), the image's USER group is %d", sc.obj, g, ok, gid)
				}
			}
			// The gateways, routers and session services all run this image.
			for _, role := range []string{"gateway", "router", "session"} {
				if !roles[role] {
					t.Errorf("no container of image %s runs %q (roles: %v)", image, role, roles)
				}
			}
		})
	}
	// The TLS ports, whether or not a documented combination enables them.
	t.Run("tls.enabled by --set", func(t *testing.T) {
		ctrs := shoalContainers(t, render(t, nil, "tls.enabled=true", "tls.secretName=shoal-tls"), image)
		n := 0
		for _, sc := range ctrs {
			for _, p := range sc.ctr.Ports {
				n++
				if !slices.Contains(exposed, p.ContainerPort) {
					t.Errorf("%s: port %s %d is not EXPOSEd (%v)", sc.obj, p.Name, p.ContainerPort, exposed)
				}
			}
		}
		if n == 0 {
			t.Fatal("no Shoal container declares a port")
		}
	})
}

// dockerignored reports whether the build context leaves out rel (a
// slash-separated path under the context): one of patterns matches it or
// a directory above it. Patterns as Docker's: filepath.Match syntax, "**"
// any number of directories; "!" exceptions fail the test (not used).
func dockerignored(t *testing.T, patterns []*regexp.Regexp, rel string) bool {
	t.Helper()
	for p := rel; p != "."; p = filepath.ToSlash(filepath.Dir(p)) {
		for _, re := range patterns {
			if re.MatchString(p) {
				return true
			}
		}
	}
	return false
}

// dockerignorePatterns reads .dockerignore into regular expressions.
func dockerignorePatterns(t *testing.T) []*regexp.Regexp {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []*regexp.Regexp
	for line := range strings.Lines(string(b)) {
		p := strings.TrimSpace(line)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		if strings.HasPrefix(p, "!") {
			t.Fatalf(".dockerignore: exception %q: this test does not implement them", p)
		}
		p = strings.TrimPrefix(filepath.ToSlash(filepath.Clean(p)), "/")
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(p); i++ {
			switch {
			case strings.HasPrefix(p[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(p[i:], "**"):
				re.WriteString(".*")
				i++
			case p[i] == '*':
				re.WriteString("[^/]*")
			case p[i] == '?':
				re.WriteString("[^/]")
			case p[i] == '[' || p[i] == '\\':
				t.Fatalf(".dockerignore: %q: classes and escapes are not implemented here", p)
			default:
				re.WriteString(regexp.QuoteMeta(p[i : i+1]))
			}
		}
		re.WriteString("$")
		out = append(out, regexp.MustCompile(re.String()))
	}
	return out
}

// copyContext copies the build context (the repository less what
// .dockerignore leaves out) into dst, as `COPY . .` would see it.
func copyContext(t *testing.T, dst string) {
	t.Helper()
	patterns := dockerignorePatterns(t)
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if dockerignored(t, patterns, rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case d.Type().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(to, b, 0o644)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("copy the build context: %v", err)
	}
}

// TestDockerfileBuildsStatic runs the Dockerfile's go build, as the
// builder stage runs it (its environment, flags, VERSION=test-version), on
// the build context .dockerignore leaves, and checks the binary: static
// (no ELF interpreter, no shared library), stripped, and `shoal version`
// says test-version. Slow on a cold build cache (-trimpath and
// CGO_ENABLED=0 rebuild every dependency once): skipped with -short.
func TestDockerfileBuildsStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds Shoal from scratch on a cold build cache")
	}
	df := parseDockerfile(t, filepath.Join(repoRoot, "Dockerfile"))
	const version = "test-version"
	gb := findGoBuild(t, df, map[string]string{"VERSION": version})
	if outputArg(gb.args) < 0 {
		t.Fatalf("go %s: no -o OUTPUT", strings.Join(gb.args, " "))
	}
	// WORKDIR and COPY of the build stage: the context lands in WORKDIR.
	if !slices.ContainsFunc(gb.stage.all("COPY"), func(in dockerInstr) bool { return in.args == ". ." }) {
		t.Fatalf("the build stage has no COPY . . (this test builds the context as the stage's working directory)")
	}
	ctxDir := filepath.Join(t.TempDir(), "src")
	copyContext(t, ctxDir)
	bin := filepath.Join(t.TempDir(), "shoal")
	args := slices.Clone(gb.args)
	args[outputArg(args)] = bin

	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	began := time.Now()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = ctxDir
	cmd.Env = append(os.Environ(), gb.env...)
	// The image's build has no VCS metadata (.git is not in the context);
	// neither has this copy.
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s go %s: %v\n%s", strings.Join(gb.env, " "), strings.Join(args, " "), err, out)
	}
	t.Logf("%s go %s: %s", strings.Join(gb.env, " "), strings.Join(args, " "), time.Since(began).Round(time.Millisecond))

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has an ELF interpreter (PT_INTERP): it is dynamically linked, and distroless/static has no loader")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("the binary needs shared libraries (DT_NEEDED) %v (%v)", libs, err)
	}
	if _, err := f.Symbols(); !errors.Is(err, elf.ErrNoSymbols) {
		t.Errorf("the binary has a symbol table (err %v): want it stripped (-s)", err)
	}

	vctx, vcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer vcancel()
	out, err := exec.CommandContext(vctx, bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	if got, want := strings.TrimSpace(string(out)), "shoal "+version; got != want {
		t.Errorf("%s version says %q, want %q (the -X of the Dockerfile's ldflags sets no variable?)", bin, got, want)
	}
}
