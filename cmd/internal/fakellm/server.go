// Package fakellm is a fake LLM backend server speaking the real wire formats (OpenAI Chat
// Completions and Responses, Anthropic Messages, Gemini) with scripted quirks and faults. Tests,
// the load harness, the benchmarks and real CLIs run against it; cmd/fakellm serves it.
//
// It answers every request with the same scripted text, split into a fixed number of chunks,
// and counts what it sees (Stats) so a harness can assert on concurrency and cancellations.
package fakellm

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Options configure a Server. The zero value is a fast server with no limits.
type Options struct {
	// Latency is waited before the response headers; zero means none.
	Latency time.Duration
	// Hold is how long every generation answer takes after Latency, as an LLM call does: a
	// whole answer is sent once it has passed, a stream spreads its chunks evenly over it
	// (Hold/n before each of its n chunks), in place of ChunkInterval. Zero means none.
	Hold time.Duration
	// ChunkInterval is waited between two streamed chunks; zero lets TokensPerSecond decide.
	ChunkInterval time.Duration
	// TokensPerSecond sets the chunk interval to 1s/TokensPerSecond when ChunkInterval is
	// zero; zero or negative means no pause.
	TokensPerSecond float64
	// Chunks is the number of content chunks of an answer; zero or negative means 20.
	Chunks int
	// Reply is the answer text, split into at most Chunks pieces at word boundaries. Empty
	// means a built-in sentence cycled to exactly Chunks words (CJK and emoji in split-utf8).
	Reply string
	// MaxConcurrent caps the generation requests in flight (a hidden concurrency limit, which
	// POST /_fakellm/limit changes at run time); one more is refused the way BusyStyle says.
	// Zero or negative means no cap.
	MaxConcurrent int
	// BusyStyle is how a request beyond MaxConcurrent is refused, as each kind's real server
	// does (see BusyStyles); "" is "stated".
	BusyStyle string
	// Script is per-key and per-model behaviour (rate-limited and invalid keys, models that
	// are down); POST /_fakellm/script replaces it at run time.
	Script Script
	// Modes are applied to every request, on top of those the request selects.
	Modes Modes
	// Models are what the model-listing endpoints return; empty means DefaultModels.
	Models []string
	// Now stamps answers ("created"); nil means time.Now. Tests fix it for golden bytes.
	Now func() time.Time
}

// DefaultModels are listed when Options.Models is empty. Any model name is accepted.
var DefaultModels = []string{"fake-model", "fake-reasoner"}

// DefaultChunks is the number of content chunks when Options.Chunks is zero.
const DefaultChunks = 20

// Stats are the server's counters since New or the last ResetStats.
type Stats struct {
	Concurrent    int64 `json:"concurrent"`     // generation requests being answered now
	MaxConcurrent int64 `json:"max_concurrent"` // highest Concurrent seen
	Requests      int64 `json:"requests"`       // generation requests received, rejected ones included
	Rejected      int64 `json:"rejected"`       // answered 429 because of MaxConcurrent
	Completed     int64 `json:"completed"`      // answered to the end as scripted (quirk errors included)
	ClientGone    int64 `json:"client_gone"`    // the client went away before the answer was over
	// Connections counts the connections accepted, when the server counts them
	// (ConnState set as the http.Server's hook, as cmd/fakellm does); ResetStats keeps it.
	Connections int64 `json:"connections"`
	// ByKey counts, per API key sent (test keys: fakellm is not meant to see real ones), the
	// generation requests made with it and those answered normally.
	ByKey map[string]KeyCounts `json:"by_key,omitempty"`
}

// KeyCounts are one key's counters.
type KeyCounts struct {
	Requests int64 `json:"requests"`
	Served   int64 `json:"served"`
}

// Server is the fake backend. It is an http.Handler; create it with New.
type Server struct {
	opts     Options
	mux      *http.ServeMux
	interval time.Duration
	pieces   []string // content pieces of every answer
	cjk      []string // content pieces in split-utf8 mode
	thoughts []string // reasoning pieces, when an answer has reasoning
	seq      atomic.Int64
	limit    atomic.Int64 // MaxConcurrent, changed by POST /_fakellm/limit
	busy     atomic.Pointer[string]
	script   scripted

	concurrent, maxConcurrent, requests, rejected, completed, clientGone atomic.Int64
	connections                                                          atomic.Int64
}

// ConnState is an http.Server ConnState hook that counts the connections accepted, so a
// benchmark can see whether a relay dials its backend per call or reuses its connections.
func (s *Server) ConnState(_ net.Conn, st http.ConnState) {
	if st == http.StateNew {
		s.connections.Add(1)
	}
}

// New returns a Server following opts.
func New(opts Options) *Server {
	if opts.Chunks <= 0 {
		opts.Chunks = DefaultChunks
	}
	if len(opts.Models) == 0 {
		opts.Models = DefaultModels
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), interval: opts.ChunkInterval}
	s.limit.Store(int64(opts.MaxConcurrent))
	style := opts.BusyStyle
	if err := CheckBusyStyle(style); err != nil {
		panic("fakellm: " + err.Error()) // a test's own option; cmd/fakellm checks its flag first
	}
	s.busy.Store(&style)
	if err := s.script.set(opts.Script, opts.Now()); err != nil {
		panic("fakellm: " + err.Error()) // a test's own script; cmd/fakellm checks its flag first
	}
	if s.interval <= 0 && opts.TokensPerSecond > 0 {
		s.interval = time.Duration(float64(time.Second) / opts.TokensPerSecond)
	}
	if opts.Reply != "" {
		s.pieces = group(tokenize(opts.Reply), opts.Chunks)
		s.cjk = s.pieces
	} else {
		s.pieces = cycle(tokenize(defaultReply), opts.Chunks)
		s.cjk = cycle(cjkReply, opts.Chunks)
	}
	s.thoughts = tokenize(defaultThoughts)
	s.routes()
	return s
}

// defaultReply has 20 words, so the default answer reads as one sentence.
const defaultReply = "Hello from fakellm, the fake backend: this answer arrives in small chunks so relays and their clients can be tested."

const defaultThoughts = "The user wants a short, friendly answer."

// cjkReply pieces each hold multi-byte characters: 3-byte CJK and 4-byte emoji.
var cjkReply = []string{"你好", "，世界", "！🎉", "这是", "假的", "后端", "😀", "每一块", "都有", "多字节", "字符", "🚀。"}

func (s *Server) routes() {
	chat := s.generate(apiChat, parseChat)
	responses := s.generate(apiResponses, parseResponses)
	s.mux.Handle("POST /v1/chat/completions", chat)
	s.mux.Handle("POST /chat/completions", chat) // base URLs without /v1 (DeepSeek style)
	s.mux.Handle("POST /v1/responses", responses)
	s.mux.Handle("POST /responses", responses)
	embeddings := s.generate(apiChat, parseEmbeddings)
	completions := s.generate(apiChat, parseCompletions)
	s.mux.Handle("POST /v1/embeddings", embeddings)
	s.mux.Handle("POST /api/embed", s.generate(apiChat, parseOllamaEmbed)) // Ollama's native API
	s.mux.Handle("POST /embeddings", embeddings)
	s.mux.Handle("POST /v1/completions", completions)
	s.mux.Handle("POST /completions", completions)
	s.mux.Handle("POST /beta/completions", completions) // DeepSeek's fill-in-the-middle
	s.mux.Handle("POST /v1/messages", s.generate(apiAnthropic, parseAnthropic))
	s.mux.HandleFunc("POST /v1/messages/count_tokens", s.countTokens)
	s.mux.Handle("POST /v1beta/models/{target}", s.generate(apiGemini, parseGemini))
	s.mux.HandleFunc("GET /v1/models", s.listModels)
	s.mux.HandleFunc("GET /models", s.listModels)
	s.mux.HandleFunc("GET /v1beta/models", s.listGeminiModels)
	s.mux.HandleFunc("GET /_fakellm/stats", s.serveStats)
	s.mux.HandleFunc("POST /_fakellm/reset", s.serveReset)
	s.mux.HandleFunc("POST /_fakellm/script", s.serveScript)
	s.mux.HandleFunc("POST /_fakellm/limit", s.serveLimit)
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Stats returns the counters.
func (s *Server) Stats() Stats {
	st := Stats{
		Concurrent:    s.concurrent.Load(),
		MaxConcurrent: s.maxConcurrent.Load(),
		Requests:      s.requests.Load(),
		Rejected:      s.rejected.Load(),
		Completed:     s.completed.Load(),
		ClientGone:    s.clientGone.Load(),
		Connections:   s.connections.Load(),
	}
	for k, v := range s.script.keyCounts() {
		if st.ByKey == nil {
			st.ByKey = map[string]KeyCounts{}
		}
		st.ByKey[k] = KeyCounts{Requests: v.Requests, Served: v.Served}
	}
	return st
}

// ResetStats zeroes the counters, except Concurrent (requests still running will end) from
// which MaxConcurrent restarts, and Connections (a count of what the listener accepted).
func (s *Server) ResetStats() {
	s.requests.Store(0)
	s.rejected.Store(0)
	s.completed.Store(0)
	s.clientGone.Store(0)
	s.maxConcurrent.Store(s.concurrent.Load())
	s.script.mu.Lock()
	s.script.byKey = nil
	s.script.mu.Unlock()
}

func (s *Server) serveStats(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Stats())
}

func (s *Server) serveReset(w http.ResponseWriter, r *http.Request) {
	s.ResetStats()
	writeJSON(w, http.StatusOK, s.Stats())
}

// acquire admits one generation request unless MaxConcurrent are running. The compare-and-
// swap keeps Concurrent from ever reading above the limit, which a harness may assert on.
func (s *Server) acquire() bool {
	limit := s.limit.Load()
	var n int64
	for {
		cur := s.concurrent.Load()
		if limit > 0 && cur >= limit {
			return false
		}
		if s.concurrent.CompareAndSwap(cur, cur+1) {
			n = cur + 1
			break
		}
	}
	for {
		m := s.maxConcurrent.Load()
		if n <= m || s.maxConcurrent.CompareAndSwap(m, n) {
			return true
		}
	}
}

func (s *Server) release() { s.concurrent.Add(-1) }

// generate returns the handler of one generation endpoint: admission, decoding, modes, then
// the answer, counting how it ended.
func (s *Server) generate(a api, parse func(http.ResponseWriter, *http.Request, *call) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if !s.acquire() {
			s.rejected.Add(1)
			s.writeBusy(w, a)
			return
		}
		defer s.release()
		c := &call{api: a}
		if a == apiGemini && !geminiTarget(r, c) {
			writeError(w, a, apiError{http.StatusNotFound, "NOT_FOUND", "", "unknown method " + r.PathValue("target")})
			return
		}
		if err := parse(w, r, c); err != nil {
			writeError(w, a, invalidRequest(a, err.Error()))
			return
		}
		if err := s.prepare(r, c); err != nil {
			writeError(w, a, invalidRequest(a, err.Error()))
			return
		}
		key := keyFor(r)
		if f, ok := s.script.verdict(c, key, s.opts.Now()); ok {
			f.write(w)
			return
		}
		err := s.answer(w, r, c)
		switch {
		case err == nil:
			s.completed.Add(1)
			s.script.served(key)
		case errors.Is(err, errDropped):
		default: // the context ended or a write failed: the client went away
			s.clientGone.Add(1)
		}
	})
}

// prepare resolves the request's modes and picks the pieces of its answer.
func (s *Server) prepare(r *http.Request, c *call) error {
	c.modes = s.opts.Modes
	if h := r.Header.Get("X-Fakellm-Mode"); h != "" {
		m, err := ParseModes(h)
		if err != nil {
			return err
		}
		c.modes |= m
	}
	m, err := modesFromModel(c.model)
	if err != nil {
		return err
	}
	c.modes |= m
	if c.model == "" {
		c.model = s.opts.Models[0]
	}
	c.id = strconv.FormatInt(s.seq.Add(1), 10)
	c.created = s.opts.Now().Unix()
	c.pieces = s.pieces
	if c.modes.Has(ModeSplitUTF8) {
		c.pieces = s.cjk
	}
	if c.thinking || c.modes&(ModeReasoning|ModeOllamaReasoning) != 0 {
		c.reasoning = s.thoughts
	}
	if c.modes.Has(ModeToolCall) && c.api != apiGemini && c.embed == nil && c.completion == nil {
		s.planTool(c)
	}
	if c.maxTokens > 0 && c.completionTokens() > c.maxTokens {
		c.truncated = true
		c.reasoning = c.reasoning[:min(len(c.reasoning), c.maxTokens)]
		c.pieces = c.pieces[:c.maxTokens-len(c.reasoning)]
	}
	return nil
}

// geminiTarget reads "{model}:{method}" from the path into c.
func geminiTarget(r *http.Request, c *call) bool {
	model, method, ok := strings.Cut(r.PathValue("target"), ":")
	if !ok || model == "" {
		return false
	}
	c.model = model
	switch method {
	case "generateContent":
	case "streamGenerateContent":
		c.stream = true
		c.geminiSSE = r.URL.Query().Get("alt") == "sse"
	case "embedContent", "batchEmbedContents":
		c.embed = &embedCall{batch: method == "batchEmbedContents"}
	default:
		return false
	}
	return true
}

// answer writes the whole answer. It returns nil when the answer went out as scripted,
// errDropped after a deliberate drop, and the context or write error when the client left.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, c *call) error {
	ctx := r.Context()
	if err := waitCtx(ctx, s.opts.Latency); err != nil {
		return err
	}
	if !c.stream && s.opts.Hold > 0 {
		if err := waitCtx(ctx, s.opts.Hold); err != nil {
			return err
		}
	}
	if c.modes.Has(ModeHang) {
		<-ctx.Done()
		return ctx.Err()
	}
	if f, ok := quirkFailure(c); ok {
		return f.write(w)
	}
	if s.limit.Load() > 0 {
		s.rateHeaders(w.Header())
	}
	if !c.stream || c.embed != nil {
		return s.whole(w, r, c)
	}
	return s.stream(w, r, c)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil { // only our own types are written; this is a bug
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}
