package llm

// ModelCard is a model's entry in GET /v1/models (SPEC §6). Unknown values are nil and
// encode as null: a card never invents a number.
type ModelCard struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // "model"
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	Spec    Spec   `json:"spec"`
}

// Spec is the gateway's knowledge of a model.
type Spec struct {
	Provider string `json:"provider"`
	Kind     string `json:"kind"`
	// Type is what the model serves: TypeChat ("" before the gateway fills in the default)
	// or TypeEmbedding (SPEC §19).
	Type            string   `json:"type"`
	ContextWindow   *int     `json:"context_window"`
	MaxOutputTokens *int     `json:"max_output_tokens"`
	Reasoning       *bool    `json:"reasoning"`
	Tools           *bool    `json:"tools"`
	Vision          *bool    `json:"vision"`
	Lanes           int      `json:"lanes"`
	ModelLanes      int      `json:"model_lanes"`
	RunTimeoutMs    int64    `json:"run_timeout_ms"`
	PriorityDefault string   `json:"priority_default"`
	Fallbacks       []string `json:"fallbacks"`
	// Route marks a route (SPEC §12): a model id of its own that picks one of Candidates per
	// request. A route's own provider and kind are empty and its numbers null.
	Route      bool     `json:"route"`
	Candidates []string `json:"candidates,omitempty"`
}
