// Package cli runs coding-agent CLIs (Codex CLI, Claude Code, Gemini CLI) as chat backends.
//
// Each request starts one CLI process in non-interactive JSON mode, with the conversation on
// stdin, in a fresh empty working directory (unless the provider names one), with the CLI's
// most restrictive sandbox and a controlled environment. Its event stream is decoded into
// llm.Chunks. The process leads its own process group; cancelling the request's context
// (client gone, run timeout, shutdown) sends SIGTERM to the group and SIGKILL after a grace
// period, and Stream.Close returns only once the process is reaped, so the gateway frees the
// lane only when the CLI is really gone.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// The provider kinds this package serves (SPEC §8).
const (
	KindCodex  = "codex-cli"
	KindClaude = "claude-cli"
	KindGemini = "gemini-cli"
)

// Config configures one CLI provider.
type Config struct {
	// Kind is KindCodex, KindClaude or KindGemini. Required.
	Kind string
	// Name is the provider's name, put into errors. Empty: the kind.
	Name string
	// Command is the executable: a path, or a name looked up on PATH at the first Open.
	// Empty: the CLI's usual name ("codex", "claude", "gemini").
	Command string
	// Args are appended to the arguments this package builds (SPEC §8 "args").
	Args []string
	// Env is added to the child's environment and wins over everything else. The child
	// inherits only basics (PATH, HOME, locale, temp dir, proxy) from the gateway, so keys
	// the CLI needs must be listed here. Values of secret-looking names are redacted from
	// messages and logs.
	Env map[string]string
	// Workdir is the directory every run uses. Empty: a fresh empty directory per request,
	// removed after the CLI is reaped.
	Workdir string
	// KillGrace is how long the CLI may take to exit after SIGTERM before SIGKILL, and how
	// long it may linger after its final event. Zero: DefaultKillGrace.
	KillGrace time.Duration
	// Models are the provider's models (SPEC §8 lists them explicitly); ListModels returns
	// them. Empty: ListModels returns none.
	Models []string
	// OnStderr, if set, receives each run's stderr (its last few KiB, redacted) after the
	// run ends, for logs. It is called from Stream.Close.
	OnStderr func(stderr string)

	// LookPath resolves Command. Nil: exec.LookPath. A test seam.
	LookPath func(file string) (string, error)
	// Getenv reads the gateway's environment for the variables passed through. Nil:
	// os.LookupEnv. A test seam.
	Getenv func(key string) (string, bool)
}

// dialect is what differs between CLIs: how to call them and how to read them.
type dialect struct {
	command string            // the usual executable name
	env     map[string]string // defaults for the child's environment
	// args returns the arguments before Config.Args; tail comes after them.
	args       func(model, effort string) []string
	tail       []string
	newDecoder func() decoder
	// aliases are other spellings the CLI accepts for flags that args builds, such as
	// codex's -m for --model; repeatable lists built flags the CLI takes more than once, so
	// passing them again in Config.Args is no conflict (codex's -c key=value).
	aliases    map[string]string
	repeatable []string
}

var dialects = map[string]dialect{
	KindCodex:  codexDialect,
	KindClaude: claudeDialect,
	KindGemini: geminiDialect,
}

// BuiltFlags returns the flags this package passes to a CLI of the given kind (with the
// CLI's other spellings of them), sorted: a Config.Args entry repeating one of them makes the
// CLI refuse to run (codex: "the argument '--skip-git-repo-check' cannot be used multiple
// times") or overrides a setting Tollgate relies on, so configuration rejects it. Flags the
// CLI accepts more than once are not listed. Nil for an unknown kind.
func BuiltFlags(kind string) []string {
	d, ok := dialects[kind]
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	for _, a := range append(d.args("model", "high"), d.tail...) {
		name, _, _ := strings.Cut(a, "=")
		if len(name) > 1 && name[0] == '-' && !slices.Contains(d.repeatable, name) {
			seen[name] = true
		}
	}
	for alias, flag := range d.aliases {
		if seen[flag] {
			seen[alias] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// Backend runs one configured CLI. It implements llm.Backend and llm.ModelLister, and is
// safe for concurrent use: each Open starts its own process.
type Backend struct {
	cfg     Config
	dialect dialect
	red     redactor

	pathMu sync.Mutex
	path   string // resolved Command, once found

	onStart func(pgid int) // test hook: a child started
}

var (
	_ llm.Backend     = (*Backend)(nil)
	_ llm.ModelLister = (*Backend)(nil)
)

// New validates cfg. The command is looked up at the first Open, so a gateway can start
// before a CLI is installed and report the problem per request.
func New(cfg Config) (*Backend, error) {
	d, ok := dialects[cfg.Kind]
	if !ok {
		return nil, fmt.Errorf("cli: kind %q: want %s, %s or %s", cfg.Kind, KindCodex, KindClaude, KindGemini)
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Kind
	}
	if cfg.Command == "" {
		cfg.Command = d.command
	}
	if cfg.KillGrace < 0 {
		return nil, fmt.Errorf("cli: %s: kill grace %v is negative", cfg.Name, cfg.KillGrace)
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	for k := range cfg.Env {
		if !validEnvName(k) {
			return nil, fmt.Errorf("cli: %s: env name %q is invalid", cfg.Name, k)
		}
	}
	if cfg.Workdir != "" {
		if st, err := os.Stat(cfg.Workdir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("cli: %s: workdir %q is not a directory", cfg.Name, cfg.Workdir)
		}
	}
	if cfg.LookPath == nil {
		cfg.LookPath = exec.LookPath
	}
	return &Backend{cfg: cfg, dialect: d, red: newRedactor(cfg.Env)}, nil
}

// Name returns the provider's name.
func (b *Backend) Name() string { return b.cfg.Name }

// ListModels returns the configured models; a CLI cannot be asked for its list.
func (b *Backend) ListModels(ctx context.Context) ([]llm.ModelInfo, error) {
	out := make([]llm.ModelInfo, 0, len(b.cfg.Models))
	for _, m := range b.cfg.Models {
		out = append(out, llm.ModelInfo{ID: m})
	}
	return out, nil
}

// command resolves the executable. A success is kept; a failure is retried next time, so
// installing the CLI does not need a gateway restart.
func (b *Backend) command() (string, error) {
	b.pathMu.Lock()
	defer b.pathMu.Unlock()
	if b.path != "" {
		return b.path, nil
	}
	p, err := b.cfg.LookPath(b.cfg.Command)
	if err != nil {
		return "", err
	}
	b.path = p
	return p, nil
}

// Open starts the CLI for req and returns once it has produced its first chunk, or failed.
// req.Model is the CLI's own model name (empty: the CLI's default). Failures before the
// first chunk come back as *llm.Error; a cancelled ctx as ctx.Err().
func (b *Backend) Open(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // nobody is waiting: do not start a process just to kill it
	}
	prompt, err := buildPrompt(req.Messages)
	if err != nil {
		return nil, &llm.Error{Kind: llm.KindInvalidRequest, Param: "messages", Provider: b.cfg.Name, Message: err.Error()}
	}
	if err := checkArg(req.Model); err != nil {
		return nil, &llm.Error{Kind: llm.KindInvalidRequest, Param: "model", Provider: b.cfg.Name, Message: "model " + err.Error()}
	}
	path, err := b.command()
	if err != nil {
		return nil, &llm.Error{Kind: llm.KindProviderUnavailable, Provider: b.cfg.Name,
			Message: fmt.Sprintf("CLI %q not found", b.cfg.Command), Err: err}
	}
	run, err := b.prepare(prompt)
	if err != nil {
		return nil, &llm.Error{Kind: llm.KindUpstream, Provider: b.cfg.Name, Message: "preparing the CLI run failed", Err: err}
	}
	effort := req.ReasoningEffort
	if checkArg(effort) != nil {
		effort = ""
	}
	args := append(b.dialect.args(req.Model, effort), b.cfg.Args...)
	args = append(args, b.dialect.tail...)
	proc, err := start(ctx, spec{
		path: path, args: args, dir: run.dir, stdin: run.stdin, grace: b.cfg.KillGrace,
		env: buildEnv(b.cfg.Getenv, b.dialect.env, b.cfg.Env),
	})
	run.stdin.Close() // the child has its own descriptor now
	if err != nil {
		run.cleanup()
		return nil, &llm.Error{Kind: llm.KindProviderUnavailable, Provider: b.cfg.Name, Message: "starting the CLI failed", Err: err}
	}
	if b.onStart != nil {
		b.onStart(proc.pgid)
	}
	s := &stream{
		ctx: ctx, provider: b.cfg.Name, command: filepath.Base(b.cfg.Command), proc: proc,
		lines: newLineReader(proc.stdout, 0), dec: b.dialect.newDecoder(), red: b.red,
		onStderr: b.cfg.OnStderr, cleanup: run.cleanup,
	}
	if err := s.prime(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// run holds the per-request files: the working directory and the prompt on stdin.
type run struct {
	dir     string
	stdin   *os.File
	cleanup func()
}

// prepare makes the working directory (unless configured) and an unlinked temp file holding
// the prompt, which becomes the child's stdin: no writer goroutine, nothing left on disk.
func (b *Backend) prepare(prompt string) (run, error) {
	r := run{dir: b.cfg.Workdir, cleanup: func() {}}
	if r.dir == "" {
		dir, err := os.MkdirTemp("", "tollgate-"+b.cfg.Kind+"-*")
		if err != nil {
			return r, fmt.Errorf("workdir: %w", err)
		}
		r.dir = dir
		r.cleanup = func() { os.RemoveAll(dir) }
	}
	f, err := os.CreateTemp("", "tollgate-prompt-*")
	if err != nil {
		r.cleanup()
		return r, fmt.Errorf("prompt file: %w", err)
	}
	os.Remove(f.Name())
	if _, err := io.WriteString(f, prompt); err != nil {
		f.Close()
		r.cleanup()
		return r, fmt.Errorf("prompt file: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		r.cleanup()
		return r, fmt.Errorf("prompt file: %w", err)
	}
	r.stdin = f
	return r, nil
}

// checkArg rejects values that would be read as flags or could not be an argument.
func checkArg(v string) error {
	switch {
	case strings.HasPrefix(v, "-"):
		return errors.New("must not start with '-'")
	case strings.ContainsAny(v, "\x00\n\r"):
		return errors.New("must not contain control characters")
	}
	return nil
}
