package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/httpapi"
)

// groupColumns maps GET /admin/usage's group_by names to ledger columns.
var groupColumns = map[string]string{"key": "client", "model": "served_model", "provider": "provider", "day": "day"}

// Usage aggregates the ledger entries in [q.From, q.To) by q.GroupBy (names checked by the
// HTTP layer), ordered by the grouped columns.
func (s *Store) Usage(ctx context.Context, q httpapi.UsageQuery) (httpapi.UsageReport, error) {
	cols := make([]string, 0, len(q.GroupBy))
	for _, g := range q.GroupBy {
		c, ok := groupColumns[g]
		if !ok {
			return httpapi.UsageReport{}, &httpapi.KeyError{Field: "group_by", Msg: fmt.Sprintf("%q: want key, model, provider or day", g)}
		}
		cols = append(cols, c)
	}
	sel := strings.Join(append(append([]string(nil), cols...), counters), ", ")
	query := "SELECT " + sel + " FROM ledger WHERE at >= $1 AND at < $2"
	if len(cols) > 0 {
		query += " GROUP BY " + strings.Join(cols, ", ") + " ORDER BY " + strings.Join(cols, ", ")
	}
	rows, err := s.db.QueryContext(ctx, s.q(query), ms(q.From), ms(q.To))
	if err != nil {
		return httpapi.UsageReport{}, fmt.Errorf("store: usage: %w", err)
	}
	defer rows.Close()
	rep := httpapi.UsageReport{From: q.From.UTC(), To: q.To.UTC(), GroupBy: q.GroupBy, Rows: []httpapi.UsageRow{}}
	for rows.Next() {
		row, err := scanUsage(rows, q.GroupBy)
		if err != nil {
			return httpapi.UsageReport{}, fmt.Errorf("store: usage: %w", err)
		}
		if row.Requests == 0 {
			continue // the ungrouped row of an empty range
		}
		rep.Rows = append(rep.Rows, row)
		add(&rep.Total, &row.UsageCounters)
	}
	return rep, rows.Err()
}

// counters are the aggregate columns, portable between SQLite and PostgreSQL (whose SUM of
// a BIGINT is a NUMERIC, cast back).
const counters = `COUNT(*), CAST(COALESCE(SUM(CASE WHEN status >= 400 THEN 1 ELSE 0 END), 0) AS BIGINT),
	CAST(COALESCE(SUM(tokens_in), 0) AS BIGINT), CAST(COALESCE(SUM(cached_in), 0) AS BIGINT),
	CAST(COALESCE(SUM(tokens_out), 0) AS BIGINT), CAST(COALESCE(SUM(reasoning), 0) AS BIGINT),
	COALESCE(SUM(cost_usd), 0)`

func scanUsage(rows *sql.Rows, groupBy []string) (httpapi.UsageRow, error) {
	var row httpapi.UsageRow
	dest := make([]any, 0, len(groupBy)+7)
	for _, g := range groupBy {
		v := new(string)
		switch g {
		case "key":
			row.Key = v
		case "model":
			row.Model = v
		case "provider":
			row.Provider = v
		case "day":
			row.Day = v
		}
		dest = append(dest, v)
	}
	c := &row.UsageCounters
	dest = append(dest, &c.Requests, &c.Errors, &c.TokensIn, &c.CachedIn, &c.TokensOut, &c.Reasoning, &c.CostUSD)
	return row, rows.Scan(dest...)
}

func add(t, c *httpapi.UsageCounters) {
	t.Requests += c.Requests
	t.Errors += c.Errors
	t.TokensIn += c.TokensIn
	t.CachedIn += c.CachedIn
	t.TokensOut += c.TokensOut
	t.Reasoning += c.Reasoning
	t.CostUSD += c.CostUSD
}
