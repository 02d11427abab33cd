package catalog

// flag is a capability in the table: unknown, yes or no.
type flag int8

const (
	unk flag = iota
	yes
	no
)

func (f flag) ptr() *bool {
	switch f {
	case yes:
		v := true
		return &v
	case no:
		v := false
		return &v
	}
	return nil
}

// row is one model of the table. names[0] is its canonical name; the others are the
// spellings other hosts use for the same weights (Hugging Face, LM Studio).
type row struct {
	names                    []string
	context, output          int
	reasoning, tools, vision flag
}

func (r *row) entry() Entry {
	return Entry{Name: r.names[0], ContextWindow: r.context, MaxOutputTokens: r.output,
		Reasoning: r.reasoning.ptr(), Tools: r.tools.ptr(), Vision: r.vision.ptr()}
}

func m(names ...string) row { return row{names: names} }

func (r row) limits(context, output int) row { r.context, r.output = context, output; return r }

func (r row) caps(reasoning, tools, vision flag) row {
	r.reasoning, r.tools, r.vision = reasoning, tools, vision
	return r
}

// table holds what the models' makers publish (their model pages and model cards, as of
// late 2025). A value is left out (0 or unk) when it is not published, changed between
// versions served under the same name, or depends on the host: DeepSeek's and Qwen's API
// aliases have moved between context sizes, and open-weight models run with whatever
// context their server was started with, so only the model card's full context is given.
var table = []row{
	// OpenAI.
	m("gpt-5").limits(400000, 128000).caps(yes, yes, yes),
	m("gpt-5-mini").limits(400000, 128000).caps(yes, yes, yes),
	m("gpt-5-nano").limits(400000, 128000).caps(yes, yes, yes),
	m("gpt-5-codex").limits(400000, 128000).caps(yes, yes, unk),
	m("gpt-4.1").limits(1047576, 32768).caps(no, yes, yes),
	m("gpt-4.1-mini").limits(1047576, 32768).caps(no, yes, yes),
	m("gpt-4.1-nano").limits(1047576, 32768).caps(no, yes, yes),
	m("gpt-4o").limits(128000, 16384).caps(no, yes, yes),
	m("gpt-4o-2024-05-13").limits(128000, 4096).caps(no, yes, yes), // the first snapshot had a smaller output
	m("gpt-4o-mini").limits(128000, 16384).caps(no, yes, yes),
	m("gpt-4-turbo").limits(128000, 4096).caps(no, yes, yes),
	m("gpt-3.5-turbo").limits(16385, 4096).caps(no, yes, no),
	m("o1").limits(200000, 100000).caps(yes, yes, yes),
	m("o1-preview").limits(128000, 32768).caps(yes, no, no),
	m("o1-mini").limits(128000, 65536).caps(yes, no, no),
	m("o3").limits(200000, 100000).caps(yes, yes, yes),
	m("o3-mini").limits(200000, 100000).caps(yes, yes, no),
	m("o4-mini").limits(200000, 100000).caps(yes, yes, yes),
	m("gpt-oss-120b").limits(131072, 0).caps(yes, yes, no),
	m("gpt-oss-20b").limits(131072, 0).caps(yes, yes, no),

	// Anthropic. Extended thinking counts as reasoning. The 1M-token context of some
	// models is a beta the client must ask for, so the standard 200K is given.
	m("claude-opus-4-5").limits(200000, 64000).caps(yes, yes, yes),
	m("claude-sonnet-4-5").limits(200000, 64000).caps(yes, yes, yes),
	m("claude-haiku-4-5").limits(200000, 64000).caps(yes, yes, yes),
	m("claude-opus-4-1").limits(200000, 32000).caps(yes, yes, yes),
	m("claude-opus-4", "claude-opus-4-0").limits(200000, 32000).caps(yes, yes, yes),
	m("claude-sonnet-4", "claude-sonnet-4-0").limits(200000, 64000).caps(yes, yes, yes),
	m("claude-3-7-sonnet").limits(200000, 64000).caps(yes, yes, yes),
	m("claude-3-5-sonnet").limits(200000, 8192).caps(no, yes, yes),
	m("claude-3-5-haiku").limits(200000, 8192).caps(no, yes, unk),
	m("claude-3-opus").limits(200000, 4096).caps(no, yes, yes),
	m("claude-3-haiku").limits(200000, 4096).caps(no, yes, yes),

	// Google Gemini. The context is the input token limit Google publishes.
	m("gemini-2.5-pro").limits(1048576, 65536).caps(yes, yes, yes),
	m("gemini-2.5-flash").limits(1048576, 65536).caps(yes, yes, yes),
	m("gemini-2.5-flash-lite").limits(1048576, 65536).caps(yes, yes, yes),
	m("gemini-2.0-flash").limits(1048576, 8192).caps(unk, yes, yes), // thinking: "experimental"
	m("gemini-2.0-flash-lite").limits(1048576, 8192).caps(no, yes, yes),
	m("gemini-1.5-pro").limits(2097152, 8192).caps(no, yes, yes),
	m("gemini-1.5-flash").limits(1048576, 8192).caps(no, yes, yes),

	// DeepSeek: the API aliases moved from 64K to 128K context and beyond; capabilities only.
	m("deepseek-chat").caps(no, yes, no),
	m("deepseek-reasoner").caps(yes, unk, no),
	m("deepseek-r1").caps(yes, unk, no),
	m("deepseek-v3").caps(no, unk, no),

	// Qwen (Alibaba). Open weights: the model cards' full context and generation length.
	m("qwen2.5-7b-instruct").limits(131072, 8192).caps(no, yes, no),
	m("qwen2.5-14b-instruct").limits(131072, 8192).caps(no, yes, no),
	m("qwen2.5-32b-instruct").limits(131072, 8192).caps(no, yes, no),
	m("qwen2.5-72b-instruct").limits(131072, 8192).caps(no, yes, no),
	m("qwen2.5-coder-7b-instruct").limits(131072, 0).caps(no, unk, no),
	m("qwen2.5-coder-14b-instruct").limits(131072, 0).caps(no, unk, no),
	m("qwen2.5-coder-32b-instruct").limits(131072, 0).caps(no, unk, no),
	m("qwq-32b").limits(131072, 0).caps(yes, unk, no),
	// Qwen3: 32K native, 128K only with YaRN scaling the server must enable.
	m("qwen3-8b").caps(yes, yes, no),
	m("qwen3-14b").caps(yes, yes, no),
	m("qwen3-32b").caps(yes, yes, no),
	m("qwen3-30b-a3b").caps(yes, yes, no),
	m("qwen3-235b-a22b").caps(yes, yes, no),
	// DashScope's hosted models: capabilities only, their limits moved between versions.
	m("qwen-max").caps(unk, yes, no),
	m("qwen-plus").caps(unk, yes, no),
	m("qwen-turbo").caps(unk, yes, no),
	m("qwen-vl-max").caps(no, unk, yes),
	m("qwen-vl-plus").caps(no, unk, yes),

	// Meta Llama (also as NVIDIA's "meta/..." ids). 128K context as Meta states it.
	m("llama-3.1-8b-instruct", "meta-llama-3.1-8b-instruct").limits(131072, 0).caps(no, yes, no),
	m("llama-3.1-70b-instruct", "meta-llama-3.1-70b-instruct").limits(131072, 0).caps(no, yes, no),
	m("llama-3.1-405b-instruct", "meta-llama-3.1-405b-instruct").limits(131072, 0).caps(no, yes, no),
	m("llama-3.3-70b-instruct").limits(131072, 0).caps(no, yes, no),
	m("llama-3.2-1b-instruct").limits(131072, 0).caps(no, yes, no),
	m("llama-3.2-3b-instruct").limits(131072, 0).caps(no, yes, no),
	m("llama-3.2-11b-vision-instruct").limits(131072, 0).caps(no, unk, yes),
	m("llama-3.2-90b-vision-instruct").limits(131072, 0).caps(no, unk, yes),
	m("llama-4-scout-17b-16e-instruct").caps(no, yes, yes),
	m("llama-4-maverick-17b-128e-instruct").caps(no, yes, yes),

	// NVIDIA's own models on build.nvidia.com ("nvidia/...").
	m("llama-3.1-nemotron-70b-instruct").limits(131072, 0).caps(no, unk, no),
	m("llama-3.3-nemotron-super-49b-v1").limits(131072, 0).caps(yes, unk, no),
}

// byName indexes the table by every name of every row.
var byName = func() map[string]*row {
	idx := make(map[string]*row, len(table)*2)
	for i := range table {
		for _, n := range table[i].names {
			if _, dup := idx[n]; dup {
				panic("catalog: duplicate model name " + n)
			}
			idx[n] = &table[i]
		}
	}
	return idx
}()
