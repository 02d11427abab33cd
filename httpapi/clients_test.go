package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/providers/llm"
)

// What real clients need beyond the formats themselves: Anthropic's request-id header, its
// model list, count_tokens that knows the models, and wrong base URLs answered so the
// client's SDK shows why.

// cardGateway is stubGateway with model cards, resolving only their ids.
type cardGateway struct {
	stubGateway
	cards []llm.ModelCard
}

func (g cardGateway) Models() []llm.ModelCard { return g.cards }

func (g cardGateway) Resolve(model string, _ *llm.Request) error {
	for _, c := range g.cards {
		if c.ID == model {
			return nil
		}
	}
	return &llm.Error{Kind: llm.KindModelNotFound, Param: "model", Message: "model \"" + model + "\" does not exist; GET /v1/models lists them"}
}

var _ ModelResolver = cardGateway{}

func testCards() []llm.ModelCard {
	var cards []llm.ModelCard
	for _, id := range []string{"p/a", "p/b", "p/c"} {
		cards = append(cards, llm.ModelCard{ID: id, Object: "model", Created: 1767225600, OwnedBy: "p", Spec: llm.Spec{Provider: "p"}})
	}
	return cards
}

func serveOnce(s *Server, method, path, body string, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	return w
}

// TestMessagesRequestID: every answer of a Messages route carries Anthropic's request-id
// beside X-Request-Id, with the same value: success, refusal and error alike.
func TestMessagesRequestID(t *testing.T) {
	keyed := New(Options{Gateway: cardGateway{stubGateway{&script{}}, testCards()}, Logger: zerolog.Nop(), APIKeys: []string{"k1"}})
	msg := `{"model":"p/a","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	ant := map[string]string{"anthropic-version": "2023-06-01", "x-api-key": "k1"}
	for _, tc := range []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
	}{
		{"message", "POST", "/v1/messages", msg, ant, 200},
		{"invalid", "POST", "/v1/messages", `{"model":"p/a","messages":[]}`, ant, 400},
		{"unknown model", "POST", "/v1/messages/count_tokens", strings.Replace(msg, "p/a", "p/z", 1), ant, 404},
		{"wrong key", "POST", "/v1/messages", msg, map[string]string{"x-api-key": "nope"}, 401},
		{"count_tokens", "POST", "/v1/messages/count_tokens", msg, ant, 200},
		{"models", "GET", "/v1/models", "", ant, 200},
		{"model", "GET", "/v1/models/p/a", "", ant, 200},
		{"unknown route", "POST", "/messages", msg, ant, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := serveOnce(keyed, tc.method, tc.path, tc.body, tc.header)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			id, rid := w.Header().Get("X-Request-Id"), w.Header().Get("request-id")
			if id == "" || rid != id {
				t.Errorf("request-id %q, X-Request-Id %q: want both, equal", rid, id)
			}
		})
	}
}

// TestCountTokensResolvesModel: count_tokens answers a model /v1/messages would not find
// with the same 404, in Anthropic's shape, and counts for one it would.
func TestCountTokensResolvesModel(t *testing.T) {
	s := New(Options{Gateway: cardGateway{stubGateway{&script{}}, testCards()}, Logger: zerolog.Nop()})
	ant := map[string]string{"anthropic-version": "2023-06-01"}
	for _, tc := range []struct {
		model  string
		status int
		want   string
	}{
		{"p/a", 200, `"input_tokens":`},
		{"p/z", 404, `{"type":"error","error":{"type":"not_found_error","message":"model \"p/z\" does not exist; GET /v1/models lists them","code":"model_not_found","param":"model"}}`},
	} {
		w := serveOnce(s, "POST", "/v1/messages/count_tokens", `{"model":"`+tc.model+`","messages":[{"role":"user","content":"hi"}]}`, ant)
		if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("%s: %d %s, want %d with %s", tc.model, w.Code, w.Body, tc.status, tc.want)
		}
	}
}

// anthropicPage is Anthropic's model list as its SDKs read it.
type anthropicPage struct {
	Data []struct {
		Type        string    `json:"type"`
		ID          string    `json:"id"`
		DisplayName string    `json:"display_name"`
		CreatedAt   string    `json:"created_at"`
		Spec        *llm.Spec `json:"spec"`
	}
	HasMore bool    `json:"has_more"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
}

// TestModelsAnthropicShape: GET /v1/models with anthropic-version is Anthropic's list, paged
// by limit, after_id and before_id; without it, OpenAI's.
func TestModelsAnthropicShape(t *testing.T) {
	s := New(Options{Gateway: cardGateway{stubGateway{&script{}}, testCards()}, Logger: zerolog.Nop()})
	ant := map[string]string{"anthropic-version": "2023-06-01"}
	for _, tc := range []struct {
		query       string
		ids         string
		more        bool
		first, last string
	}{
		{"", "p/a p/b p/c", false, "p/a", "p/c"},
		{"?limit=2", "p/a p/b", true, "p/a", "p/b"},
		{"?limit=2&after_id=p/b", "p/c", false, "p/c", "p/c"},
		{"?limit=1&before_id=p/c", "p/b", true, "p/b", "p/b"},
		{"?after_id=p/c", "", false, "", ""},
	} {
		w := serveOnce(s, "GET", "/v1/models"+tc.query, "", ant)
		var page anthropicPage
		if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil || w.Code != 200 {
			t.Fatalf("%s: %d %s (%v)", tc.query, w.Code, w.Body, err)
		}
		var ids []string
		for _, m := range page.Data {
			ids = append(ids, m.ID)
			if _, err := time.Parse(time.RFC3339, m.CreatedAt); err != nil || m.Type != "model" || m.DisplayName == "" || m.Spec == nil {
				t.Errorf("%s: entry %+v is not Anthropic's model info with a spec", tc.query, m)
			}
		}
		first, last := "", ""
		if page.FirstID != nil && page.LastID != nil {
			first, last = *page.FirstID, *page.LastID
		}
		if strings.Join(ids, " ") != tc.ids || page.HasMore != tc.more || first != tc.first || last != tc.last {
			t.Errorf("%s: ids %v has_more %v first %q last %q, want %q %v %q %q: %s", tc.query, ids, page.HasMore, first, last,
				tc.ids, tc.more, tc.first, tc.last, w.Body)
		}
	}
	if w := serveOnce(s, "GET", "/v1/models?limit=0", "", ant); w.Code != 400 || !strings.Contains(w.Body.String(), `"type":"invalid_request_error"`) {
		t.Errorf("limit=0: %d %s", w.Code, w.Body)
	}
	if w := serveOnce(s, "GET", "/v1/models/p/b", "", ant); !strings.Contains(w.Body.String(), `"type":"model","id":"p/b","display_name":"p/b","created_at":"2026-01-01T00:00:00Z"`) {
		t.Errorf("one model: %s", w.Body)
	}
	if w := serveOnce(s, "GET", "/v1/models", "", nil); !strings.HasPrefix(w.Body.String(), `{"object":"list","data":[{"id":"p/a","object":"model"`) {
		t.Errorf("OpenAI's list: %s", w.Body)
	}
}

// TestUnknownRoutes: a path no route serves is answered in the client's error shape, naming
// the route it most likely meant; each is logged at info once, then at debug. Claude Code's
// connection check is answered.
func TestUnknownRoutes(t *testing.T) {
	var logs bytes.Buffer
	s := New(Options{Gateway: stubGateway{&script{}}, Logger: zerolog.New(&logs).Level(zerolog.DebugLevel)})
	ant := map[string]string{"anthropic-version": "2023-06-01", "x-api-key": "k"}
	oai := map[string]string{"Authorization": "Bearer k"}
	for _, tc := range []struct {
		method, path string
		header       map[string]string
		status       int
		want         string
	}{
		{"POST", "/messages", ant, 404, `{"type":"error","error":{"type":"not_found_error","message":"no route for POST /messages; did you mean /v1/messages?`},
		{"POST", "/v1/v1/messages", map[string]string{"x-api-key": "k"}, 404, `"type":"not_found_error","message":"no route for POST /v1/v1/messages; did you mean /v1/messages?`},
		{"POST", "/messages/count_tokens", ant, 404, `did you mean /v1/messages/count_tokens?`},
		{"POST", "/chat/completions", oai, 404, `{"error":{"message":"no route for POST /chat/completions; did you mean /v1/chat/completions?`},
		{"POST", "/api/v1/responses", oai, 404, `did you mean /v1/responses?`},
		{"POST", "/embeddings", oai, 404, `did you mean /v1/embeddings?`},
		{"POST", "/completions", oai, 404, `did you mean /v1/completions?`},
		{"POST", "/v1/images/generations", oai, 404, `{"error":{"message":"no route for POST /v1/images/generations; the gateway serves /v1/chat/completions, /v1/responses, /v1/messages, /v1/embeddings, /v1/completions and /v1/models","type":"invalid_request_error","code":"not_found","param":null}}`},
		{"GET", "/v1/messages", ant, 405, `{"type":"error","error":{"type":"invalid_request_error","message":"GET is not allowed on /v1/messages"`},
		{"HEAD", "/api/hello", nil, 200, ``},
	} {
		for range 2 {
			w := serveOnce(s, tc.method, tc.path, "{}", tc.header)
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.want) || tc.want == "" && w.Body.Len() > 0 {
				t.Errorf("%s %s: %d %s, want %d with %s", tc.method, tc.path, w.Code, w.Body, tc.status, tc.want)
			}
		}
	}
	info := map[string]int{}
	for line := range strings.Lines(logs.String()) {
		var l struct{ Level, Method, Path, Route string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Level == "info" {
			info[l.Method+" "+l.Path+l.Route]++
		}
	}
	for _, k := range []string{"POST /messages", "POST /chat/completions", "POST /v1/images/generations", "GET /v1/messages"} {
		if info[k] != 1 {
			t.Errorf("%s logged %d times at info, want once: %v", k, info[k], info)
		}
	}
	if info["HEAD /api/hello"] != 0 {
		t.Errorf("HEAD /api/hello logged at info: %v", info)
	}
}
