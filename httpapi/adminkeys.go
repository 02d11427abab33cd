package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tollgate/tollgate/providers/llm"
)

// adminKeyRoutes registers the client-key admin API of SPEC §18 behind the admin keys.
func (s *Server) adminKeyRoutes(handle func(method, path string, kind routeKind, h httprouter.Handle), admin []string) {
	handle("GET", "/admin/keys", routeInfo, s.auth(admin, s.listKeys))
	handle("POST", "/admin/keys", routeInfo, s.auth(admin, s.createKey))
	handle("PATCH", "/admin/keys/:name", routeInfo, s.auth(admin, s.patchKey))
	handle("DELETE", "/admin/keys/:name", routeInfo, s.auth(admin, s.revokeKey))
	handle("POST", "/admin/keys/:name/rotate", routeInfo, s.auth(admin, s.rotateKey))
	handle("GET", "/admin/usage", routeInfo, s.auth(admin, s.usage))
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	keys, err := s.opts.Tenants.ListKeys(r.Context())
	if err != nil {
		s.adminFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": keys})
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	fields, aerr := s.keyBody(w, r)
	if aerr == nil {
		var name string
		if aerr = decodeField(fields, "name", &name); aerr == nil && name == "" {
			aerr = fieldError("name", "required")
		}
		delete(fields, "name")
		var p KeyPatch
		if aerr == nil {
			p, aerr = parseLimits(fields)
		}
		if aerr == nil {
			l := applyLimits(KeyLimits{Weight: 1}, p)
			info, secret, err := s.opts.Tenants.CreateKey(r.Context(), name, l)
			if err != nil {
				s.adminFail(w, r, err)
				return
			}
			writeJSON(w, http.StatusCreated, map[string]any{"key": info, "secret": secret})
			return
		}
	}
	aerr.write(w)
}

func (s *Server) patchKey(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	fields, aerr := s.keyBody(w, r)
	var p KeyPatch
	if aerr == nil {
		p, aerr = parseLimits(fields)
	}
	if aerr != nil {
		aerr.write(w)
		return
	}
	info, err := s.opts.Tenants.PatchKey(r.Context(), ps.ByName("name"), p)
	if err != nil {
		s.adminFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"key": info})
}

func (s *Server) rotateKey(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	fields, aerr := s.keyBody(w, r)
	var grace time.Duration
	if aerr == nil {
		var g string
		aerr = decodeField(fields, "grace", &g)
		delete(fields, "grace")
		var err error
		if aerr == nil && g != "" {
			if grace, err = time.ParseDuration(g); err != nil || grace < 0 {
				aerr = fieldError("grace", "want a duration such as 10m, got %q", g)
			}
		}
		if aerr == nil {
			aerr = unknownFields(fields)
		}
	}
	if aerr != nil {
		aerr.write(w)
		return
	}
	info, secret, err := s.opts.Tenants.RotateKey(r.Context(), ps.ByName("name"), grace)
	if err != nil {
		s.adminFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"key": info, "secret": secret})
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	name := ps.ByName("name")
	info, err := s.opts.Tenants.RevokeKey(r.Context(), name)
	if err != nil {
		s.adminFail(w, r, err)
		return
	}
	answered := 0
	if rv, ok := s.opts.Gateway.(ClientRevoker); ok {
		answered = rv.RevokeClient(name)
	}
	s.opts.Logger.Info().Str("client", name).Int("queued_answered", answered).Msg("client key revoked")
	writeJSON(w, http.StatusOK, map[string]any{"key": info})
}

// adminFail answers a Tenants error: 400 naming the field, 404 for a missing key, 500 for
// the store's own failures (logged).
func (s *Server) adminFail(w http.ResponseWriter, r *http.Request, err error) {
	var ke *KeyError
	switch {
	case errors.As(err, &ke):
		fieldError(ke.Field, "%s", ke.Msg).write(w)
	case errors.Is(err, ErrNoSuchKey):
		apiError{status: http.StatusNotFound, code: "key_not_found", typ: "invalid_request_error",
			message: "no run-time client key of that name (GET /admin/keys lists them)", param: "name"}.write(w)
	default:
		s.opts.Logger.Error().Err(err).Str("request_id", requestID(r.Context())).Msg("client key store")
		apiError{status: http.StatusInternalServerError, code: "store_error", typ: "api_error",
			message: "the key store failed; see the gateway's log"}.write(w)
	}
}

func fieldError(field, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "invalid_request", typ: "invalid_request_error",
		message: field + ": " + fmt.Sprintf(format, args...), param: field}
}

// keyBody reads a JSON object body (an empty body is an empty object) into its fields.
func (s *Server) keyBody(w http.ResponseWriter, r *http.Request) (map[string]json.RawMessage, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		return nil, &apiError{status: http.StatusRequestEntityTooLarge, code: "request_too_large", typ: "invalid_request_error",
			message: "body over 1 MiB"}
	}
	fields := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(body)) == 0 {
		return fields, nil
	}
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, &apiError{status: http.StatusBadRequest, code: "invalid_request", typ: "invalid_request_error",
			message: "body: want a JSON object"}
	}
	return fields, nil
}

// decodeField decodes fields[name] into v when present and not null.
func decodeField(fields map[string]json.RawMessage, name string, v any) *apiError {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fieldError(name, "want %s", wantKind(v))
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// wantKind names the JSON type a field decoded into v must have, for an error message.
func wantKind(v any) string {
	switch v.(type) {
	case *string:
		return "a string"
	case *int:
		return "a whole number"
	case *float64:
		return "a number"
	case *[]string:
		return "a list of strings"
	}
	return "an object"
}

func unknownFields(fields map[string]json.RawMessage) *apiError {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	e := fieldError(names[0], "unknown field (valid: name, weight, max_running, max_queued, rate_limit, models, max_priority, budget; rotate takes grace)")
	e.message = strconv.Quote(names[0]) + e.message[len(names[0]):] // quoted: a name may be empty or odd
	return e
}

// limitFields are a key's limit fields as the admin API names them.
var limitFields = []string{"weight", "max_running", "max_queued", "rate_limit", "models", "max_priority", "budget"}

// parseLimits reads and checks the limit fields of a body; the patch says which were set and
// which were null. Any other field is refused.
func parseLimits(fields map[string]json.RawMessage) (KeyPatch, *apiError) {
	p := KeyPatch{Set: map[string]bool{}, Clear: map[string]bool{}}
	l := &p.Limits
	for _, f := range limitFields {
		raw, ok := fields[f]
		delete(fields, f)
		switch {
		case !ok:
			continue
		case isNull(raw):
			p.Clear[f] = true
			continue
		}
		p.Set[f] = true
		if aerr := parseLimit(f, raw, l); aerr != nil {
			return p, aerr
		}
	}
	if aerr := unknownFields(fields); aerr != nil {
		return p, aerr
	}
	if p.Set["rate_limit"] {
		p.Set["rate_limit.rpm"], p.Set["rate_limit.tpm"] = true, true
	}
	if p.Clear["rate_limit"] {
		p.Clear["rate_limit.rpm"], p.Clear["rate_limit.tpm"] = true, true
	}
	return p, nil
}

// parseLimit decodes and checks one limit field into l.
func parseLimit(f string, raw json.RawMessage, l *KeyLimits) *apiError {
	one := map[string]json.RawMessage{f: raw}
	switch f {
	case "weight":
		if aerr := decodeField(one, f, &l.Weight); aerr != nil || l.Weight >= 1 {
			return aerr
		}
		return fieldError(f, "must be at least 1, got %d", l.Weight)
	case "max_running", "max_queued":
		v := &l.MaxRunning
		if f == "max_queued" {
			v = &l.MaxQueued
		}
		return nonNegative(one, f, v)
	case "rate_limit":
		return parseRate(raw, &l.RateLimit)
	case "models":
		return parseModels(one, l)
	case "max_priority":
		if aerr := decodeField(one, f, &l.MaxPriority); aerr != nil {
			return aerr
		}
		if _, err := llm.ParsePriority(l.MaxPriority); err != nil || l.MaxPriority == "" {
			return fieldError(f, "want interactive, normal or background, got %q", l.MaxPriority)
		}
	case "budget":
		return parseBudget(raw, l)
	}
	return nil
}

func nonNegative(one map[string]json.RawMessage, f string, v *int) *apiError {
	if aerr := decodeField(one, f, v); aerr != nil {
		return aerr
	}
	if *v < 0 {
		return fieldError(f, "must be 0 (no cap) or more, got %d", *v)
	}
	return nil
}

func parseRate(raw json.RawMessage, r *KeyRate) *apiError {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return fieldError("rate_limit", "want an object {rpm, tpm}")
	}
	for _, f := range []string{"rpm", "tpm"} {
		v := &r.RPM
		if f == "tpm" {
			v = &r.TPM
		}
		if aerr := nonNegative(fields, f, v); aerr != nil {
			aerr.param = "rate_limit." + f
			aerr.message = "rate_limit." + aerr.message
			return aerr
		}
		delete(fields, f)
	}
	for k := range fields {
		return fieldError("rate_limit."+k, "unknown field (valid: rpm, tpm)")
	}
	return nil
}

func parseModels(one map[string]json.RawMessage, l *KeyLimits) *apiError {
	if aerr := decodeField(one, "models", &l.Models); aerr != nil {
		return aerr
	}
	for i, m := range l.Models {
		if m == "" || strings.ContainsAny(m, " \t") || strings.Contains(strings.TrimSuffix(m, "*"), "*") {
			return fieldError(fmt.Sprintf("models[%d]", i), "%q: want a model id or a pattern ending in '*'", m)
		}
	}
	return nil
}

func parseBudget(raw json.RawMessage, l *KeyLimits) *apiError {
	var b struct {
		USD    *float64 `json:"usd"`
		Period string   `json:"period"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return fieldError("budget", "want an object {usd, period}")
	}
	switch {
	case b.USD == nil || *b.USD <= 0 || math.IsInf(*b.USD, 0):
		return fieldError("budget.usd", "must be more than 0")
	case b.Period == "":
		return fieldError("budget.period", "a budget needs a period: day, week or month")
	case !slices.Contains([]string{"day", "week", "month"}, b.Period):
		return fieldError("budget.period", "want day, week or month, got %q", b.Period)
	}
	l.Budget = &KeyBudget{USD: *b.USD, Period: b.Period}
	return nil
}

// applyLimits is l with the patch's set fields (the create path: nothing is cleared).
func applyLimits(l KeyLimits, p KeyPatch) KeyLimits {
	n := p.Limits
	if p.Set["weight"] {
		l.Weight = n.Weight
	}
	l.MaxRunning, l.MaxQueued, l.RateLimit, l.Models, l.MaxPriority, l.Budget =
		n.MaxRunning, n.MaxQueued, n.RateLimit, n.Models, n.MaxPriority, n.Budget
	return l
}
