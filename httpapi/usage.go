package httpapi

import (
	"encoding/csv"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
)

// usageGroups are the columns GET /admin/usage may group by, in the order rows show them.
var usageGroups = []string{"key", "model", "provider", "day"}

// usage serves GET /admin/usage?from=&to=&group_by=&format=json|csv (SPEC §18).
func (s *Server) usage(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q, format, aerr := s.usageQuery(r)
	if aerr != nil {
		aerr.write(w)
		return
	}
	rep, err := s.opts.Tenants.Usage(r.Context(), q)
	if err != nil {
		s.adminFail(w, r, err)
		return
	}
	if format == "json" {
		writeJSON(w, http.StatusOK, rep)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	cw := csv.NewWriter(w)
	_ = cw.Write(append(slices.Clone(rep.GroupBy), "requests", "errors", "tokens_in", "cached_in", "tokens_out", "reasoning", "cost_usd"))
	for _, row := range rep.Rows {
		_ = cw.Write(csvRow(&row, rep.GroupBy))
	}
	cw.Flush()
}

func csvRow(row *UsageRow, groupBy []string) []string {
	out := make([]string, 0, len(groupBy)+7)
	for _, g := range groupBy {
		v := map[string]*string{"key": row.Key, "model": row.Model, "provider": row.Provider, "day": row.Day}[g]
		out = append(out, *v)
	}
	c := &row.UsageCounters
	for _, n := range []int64{c.Requests, c.Errors, c.TokensIn, c.CachedIn, c.TokensOut, c.Reasoning} {
		out = append(out, strconv.FormatInt(n, 10))
	}
	return append(out, strconv.FormatFloat(c.CostUSD, 'f', -1, 64))
}

// usageQuery reads the query string: from and to as a date (2026-12-01, midnight UTC) or RFC
// 3339, by default the last 30 days; group_by a comma list of usageGroups; format json or csv.
func (s *Server) usageQuery(r *http.Request) (UsageQuery, string, *apiError) {
	v := r.URL.Query()
	now := s.opts.Now().UTC()
	q := UsageQuery{From: now.AddDate(0, 0, -30), To: now, GroupBy: []string{}}
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{{"from", &q.From}, {"to", &q.To}} {
		if raw := v.Get(f.name); raw != "" {
			t, err := parseWhen(raw)
			if err != nil {
				return q, "", fieldError(f.name, "want a date such as 2026-12-01 or an RFC 3339 time, got %q", raw)
			}
			*f.dst = t
		}
	}
	if !q.To.After(q.From) {
		return q, "", fieldError("to", "must be after from")
	}
	if g := v.Get("group_by"); g != "" {
		for _, name := range strings.Split(g, ",") {
			name = strings.TrimSpace(name)
			if !slices.Contains(usageGroups, name) {
				return q, "", fieldError("group_by", "%q: want key, model, provider or day", name)
			}
			if !slices.Contains(q.GroupBy, name) {
				q.GroupBy = append(q.GroupBy, name)
			}
		}
	}
	format := v.Get("format")
	switch format {
	case "":
		format = "json"
	case "json", "csv":
	default:
		return q, "", fieldError("format", "want json or csv, got %q", format)
	}
	return q, format, nil
}

func parseWhen(s string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339, s)
}
