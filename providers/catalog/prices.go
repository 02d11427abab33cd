package catalog

// Price is a model's list price in USD per million tokens: prompt tokens, prompt tokens read
// from the provider's cache, and output tokens (reasoning included).
type Price struct {
	Input, CachedInput, Output float64
}

// prices are the makers' published list prices for their cloud APIs (standard tier, the
// shortest-context band where the price depends on the prompt's length), as listed on their
// pricing pages in November 2025; docs/tenants.md names the pages. Open-weight models have
// no list price: whoever hosts them sets it.
var prices = map[string]Price{
	"gpt-5":             {1.25, 0.125, 10},
	"gpt-5-mini":        {0.25, 0.025, 2},
	"gpt-5-nano":        {0.05, 0.005, 0.40},
	"gpt-4.1":           {2, 0.50, 8},
	"gpt-4.1-mini":      {0.40, 0.10, 1.60},
	"gpt-4.1-nano":      {0.10, 0.025, 0.40},
	"gpt-4o":            {2.50, 1.25, 10},
	"gpt-4o-mini":       {0.15, 0.075, 0.60},
	"o3":                {2, 0.50, 8},
	"o4-mini":           {1.10, 0.275, 4.40},
	"claude-opus-4-5":   {5, 0.50, 25},
	"claude-sonnet-4-5": {3, 0.30, 15},
	"claude-haiku-4-5":  {1, 0.10, 5},
	"claude-opus-4-1":   {15, 1.50, 75},
	"deepseek-chat":     {0.28, 0.028, 0.42},
	"deepseek-reasoner": {0.28, 0.028, 0.42},
}

// ListPrice returns the list price of a model the catalog knows by the matching rules of
// Lookup (a snapshot has its model's price), and whether it has one.
func ListPrice(model string) (Price, bool) {
	e, ok := Lookup(model)
	if !ok {
		return Price{}, false
	}
	p, ok := prices[e.Name]
	return p, ok
}
