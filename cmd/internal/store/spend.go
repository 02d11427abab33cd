package store

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/httpapi"
)

// spend is a key's spend in its current calendar period.
type spend struct {
	start, end time.Time // [start, end) in UTC; zero before the first roll
	usd        float64
}

// roll moves s to the period of length p that holds now, starting it at 0 when it is a new
// one.
func (s *spend) roll(now time.Time, p string) {
	if !s.start.IsZero() && !now.Before(s.start) && now.Before(s.end) {
		return
	}
	s.start, s.end = periodOf(now, p)
	s.usd = 0
}

// period is a budget's period; a key without a budget counts its spend by the month.
func period(b *httpapi.KeyBudget) string {
	if b == nil {
		return "month"
	}
	return b.Period
}

// periodOf returns the calendar period p (day, week from Monday, month; UTC) holding t.
func periodOf(t time.Time, p string) (start, end time.Time) {
	t = t.UTC()
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	switch p {
	case "day":
		return day, day.AddDate(0, 0, 1)
	case "week":
		start = day.AddDate(0, 0, -((int(day.Weekday()) + 6) % 7))
		return start, start.AddDate(0, 0, 7)
	}
	start = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 1, 0)
}

// Spend returns a key's spend in its current period, its budget (0: none) and when the
// period ends.
func (s *Store) Spend(name string, now time.Time) (spent, budget float64, resets time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys[name]
	if k == nil {
		return 0, 0, time.Time{}
	}
	k.spend.roll(now, period(k.limits.Budget))
	if k.limits.Budget != nil {
		budget = k.limits.Budget.USD
	}
	return k.spend.usd, budget, k.spend.end
}

// Record puts a finished call in its key's spend and the ledger's buffer, and returns its
// cost.
func (s *Store) Record(e httpapi.LedgerEntry) float64 {
	e.CostUSD = s.cost(e)
	if e.Key != "" {
		s.mu.Lock()
		if k := s.keys[e.Key]; k != nil {
			k.spend.roll(e.At, period(k.limits.Budget))
			if !e.At.Before(k.spend.start) {
				k.spend.usd += e.CostUSD
			}
		}
		s.mu.Unlock()
	}
	s.ledger.add(e)
	return e.CostUSD
}

// cost is the call's price: the served model's (the asked one's when none served).
func (s *Store) cost(e httpapi.LedgerEntry) float64 {
	if s.opts.Prices == nil {
		return 0
	}
	model := e.ServedModel
	if model == "" {
		model = e.Model
	}
	return Cost(s.opts.Prices(model), e.Usage.PromptTokens, e.Usage.CachedTokens, e.Usage.CompletionTokens)
}

// Cost is the price of a call's tokens: uncached prompt tokens at Input, cached ones at
// CachedInput, completion tokens (reasoning included) at Output, all per million.
func Cost(p Price, prompt, cached, completion int) float64 {
	cached = min(max(cached, 0), prompt)
	return (float64(prompt-cached)*p.Input + float64(cached)*p.CachedInput + float64(completion)*p.Output) / 1e6
}

// loadSpend sums each key's ledger entries in its current period.
func (s *Store) loadSpend(ctx context.Context, now time.Time) error {
	sums := map[string]map[string]float64{} // period → client → usd
	for _, p := range []string{"day", "week", "month"} {
		start, _ := periodOf(now, p)
		rows, err := s.db.QueryContext(ctx, s.q(`SELECT client, SUM(cost_usd) FROM ledger WHERE at >= $1 GROUP BY client`), ms(start))
		if err != nil {
			return fmt.Errorf("spend by %s: %w", p, err)
		}
		sums[p] = map[string]float64{}
		for rows.Next() {
			var name string
			var usd float64
			if err := rows.Scan(&name, &usd); err != nil {
				rows.Close()
				return err
			}
			sums[p][name] = usd
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	for _, k := range s.keys {
		p := period(k.limits.Budget)
		k.spend.roll(now, p)
		k.spend.usd = sums[p][k.name]
	}
	return nil
}

// Budgeted returns, for every key with a budget, its name and its current period [start,
// end) at now: the periods whose spend several replicas share (cmd/internal/app).
func (s *Store) Budgeted(now time.Time) []KeyPeriod {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []KeyPeriod
	for _, k := range s.keys {
		if b := k.limits.Budget; b != nil && !k.revoked {
			start, end := periodOf(now, b.Period)
			out = append(out, KeyPeriod{Name: k.name, Start: start, End: end})
		}
	}
	return out
}

// KeyPeriod is a key's current calendar period.
type KeyPeriod struct {
	Name       string
	Start, End time.Time
}

// Period is key name's current period at now; ok is false for a key the store does not
// hold.
func (s *Store) Period(name string, now time.Time) (p KeyPeriod, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys[name]
	if k == nil {
		return KeyPeriod{}, false
	}
	start, end := periodOf(now, period(k.limits.Budget))
	return KeyPeriod{Name: name, Start: start, End: end}, true
}
