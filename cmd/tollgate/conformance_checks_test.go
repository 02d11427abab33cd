package main

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// The checks of each client, as its script names them, with what the client's documentation
// (and its code, at the pinned version) says it does on each answer:
//
//   - @anthropic-ai/sdk, openai and @openai/agents (which calls through openai with its
//     retries): 2 retries of 408, 409, 429 and 5xx unless x-should-retry says otherwise;
//     the wait is retry-after-ms, else Retry-After, else 0.5 s doubling, less 0–25 % jitter.
//     Errors are classes by status (AuthenticationError, RateLimitError, InternalServerError,
//     NotFoundError) carrying the body and the request id (`request-id` for Anthropic,
//     `x-request-id` for OpenAI).
//   - ai: 2 retries of the same statuses; the wait is retry-after-ms or Retry-After when
//     under 60 s, else 2 s doubling. After retries it throws RetryError (maxRetriesExceeded,
//     the attempts' errors); an error it does not retry is the APICallError itself.
//   - @langchain/anthropic: the SDK under it does not retry; LangChain's AsyncCaller retries
//     (6 by default) all but 400–409 and 413, waiting 1 s doubling times 1–2 at random, and
//     at least a 429's Retry-After.

// The gateway's busy answers advise 1 s (limits.retry_after); its 502 advises nothing.
var (
	once200   = &tries{statuses: []int{200}}
	twice200  = &tries{statuses: []int{200, 200}}
	once401   = &tries{statuses: []int{401}}
	once404   = &tries{statuses: []int{404}}
	noRequest = &tries{}

	stainless429 = &tries{statuses: []int{429, 429, 429}, gaps: []window{waits(time.Second, time.Second), waits(time.Second, time.Second)}}
	stainless5xx = &tries{statuses: []int{502, 502, 502}, gaps: []window{waits(375*time.Millisecond, 500*time.Millisecond), waits(750*time.Millisecond, time.Second)}}
	aisdk429     = &tries{statuses: []int{429, 429, 429}, gaps: []window{waits(time.Second, time.Second), waits(time.Second, time.Second)}}
	aisdk5xx     = &tries{statuses: []int{502, 502, 502}, gaps: []window{waits(2*time.Second, 2*time.Second), waits(4*time.Second, 4*time.Second)}}
	// LangChain with maxRetries 1: one retry, after max(1–2 s, Retry-After).
	langchain429 = &tries{statuses: []int{429, 429}, gaps: []window{waits(time.Second, 2*time.Second)}}
	langchain5xx = &tries{statuses: []int{502, 502}, gaps: []window{waits(time.Second, 2*time.Second)}}
)

var conformanceClients = []conformanceClient{
	{name: "anthropic", script: "anthropic.mjs", checks: anthropicChecks()},
	{name: "openai", script: "openai.mjs", checks: openaiChecks()},
	{name: "agents", script: "agents.mjs", checks: agentsChecks()},
	{name: "aisdk", script: "aisdk.mjs", checks: aisdkChecks()},
	{name: "langchain", script: "langchain.mjs", checks: langchainChecks()},
}

// The two backends every success check runs against: the client's own format relayed, and
// a Chat Completions backend the gateway translates to.
var routes = []string{"native", "translated"}

func says(text string) expect {
	return expect{"text", equals(text), "the answer, as the backend gave it"}
}

var (
	toolAnswer = says(fakellm.ToolDoneReply)
	plainReply = says(conformanceReply)
)

// refusal is what a user sees of a Stainless SDK's error (Anthropic's and OpenAI's): the
// class, the status, the gateway's code (at codePath in the observation) and a message that
// says what is wrong (holding phrase).
func refusal(class string, status int, codePath, code, phrase string) []expect {
	return []expect{
		{"error.class", equals(class), "the SDK's error class for the status"},
		{"error.status", equals(status), "the status the gateway answered"},
		{codePath, equals(code), "Tollgate's code, in the client's error shape"},
		{"error.message", holds(phrase), "the message says what is wrong"},
	}
}

// anthropicRefusal is refusal with the request id the Anthropic SDKs read.
func anthropicRefusal(class string, status int, typ, code, phrase string) []expect {
	return append(refusal(class, status, "error.body.error.code", code, phrase),
		expect{"error.type", equals(typ), "Anthropic's error type"},
		expect{"error.requestID", nonEmpty, "APIError.requestID is the request-id header"})
}

// openaiRefusal is refusal with the request id openai reads.
func openaiRefusal(class string, status int, code, phrase string) []expect {
	return append(refusal(class, status, "error.code", code, phrase),
		expect{"error.requestID", nonEmpty, "APIError.requestID is the x-request-id header"})
}

// What the gateway's messages say, in words a rewording keeps: the 401 names the key, the
// 429 the provider (named "busy"), the 502 relays the backend's "server" error, the 404
// points at /v1/models.
const (
	badKey    = "API key"
	busyLane  = "busy"
	serverErr = "server"
	listIDs   = "/v1/models"
)

// noRetry is the header that tells every SDK (and Claude Code) not to retry the gateway's 401.
var noRetry = expect{"error.shouldRetry", equals("false"), "SPEC §4: invalid_api_key carries x-should-retry: false"}

func anthropicChecks() []conformanceCheck {
	var cs []conformanceCheck
	for _, r := range routes {
		cs = append(cs,
			conformanceCheck{name: "anthropic/messages.create/" + r, wants: []expect{plainReply,
				{"type", equals("message"), "a Message"}, {"role", equals("assistant"), "the assistant's turn"},
				{"stop_reason", equals("end_turn"), "the backend's stop"},
				{"request_id", nonEmpty, "Message._request_id is the request-id header"}}},
			conformanceCheck{name: "anthropic/messages.stream/" + r, wants: []expect{plainReply,
				{"streamed", equals(conformanceReply), "the text events add up to the message"},
				{"deltas", atLeast(2), "the text arrives in pieces"},
				{"stop_reason", equals("end_turn"), "the backend's stop"},
				{"request_id", nonEmpty, "MessageStream.request_id is the request-id header"}}},
			conformanceCheck{name: "anthropic/tools/" + r, tries: twice200, wants: []expect{toolAnswer,
				{"stop_reason", equals("tool_use"), "the first turn asks for the tool"},
				{"tool_use.name", equals("exec_command"), "the tool asked for"},
				{"tool_use.input.cmd", equals(fakellm.ToolCommand), "the tool's input, parsed"}}},
			conformanceCheck{name: "anthropic/stream.tools/" + r, wants: []expect{
				{"stop_reason", equals("tool_use"), "the turn asks for the tool"},
				{"tool_use.input.cmd", equals(fakellm.ToolCommand), "finalMessage() holds the parsed input"},
				{"input_json", nonEmpty, "the inputJson events carry the input as it streams"}}},
		)
	}
	return append(cs,
		conformanceCheck{name: "anthropic/count_tokens", wants: []expect{
			{"input_tokens", atLeast(1), "a count"},
			{"header_request_id", nonEmpty, "count_tokens answers carry request-id too"}}},
		conformanceCheck{name: "anthropic/count_tokens/unknown-model", tries: once404,
			wants: anthropicRefusal("NotFoundError", 404, "not_found_error", "model_not_found", listIDs)},
		conformanceCheck{name: "anthropic/models.list", wants: []expect{
			{"first.type", equals("model"), "models.list() with anthropic-version gets Anthropic's list shape"},
			{"first.id", nonEmpty, "an id to ask for"},
			{"first.display_name", nonEmpty, "Anthropic's ModelInfo has display_name"},
			{"first.created_at", nonEmpty, "Anthropic's ModelInfo has created_at (RFC 3339)"},
			{"first_id", nonEmpty, "Anthropic's page has first_id"},
			{"last_id", nonEmpty, "Anthropic's page has last_id"},
			{"has_more", equals(false), "one page"}}},
		conformanceCheck{name: "anthropic/unknown-model", tries: once404,
			wants: anthropicRefusal("NotFoundError", 404, "not_found_error", "model_not_found", listIDs)},
		conformanceCheck{name: "anthropic/401", tries: once401,
			wants: append(anthropicRefusal("AuthenticationError", 401, "authentication_error", "invalid_api_key", badKey), noRetry)},
		conformanceCheck{name: "anthropic/429", tries: stainless429,
			wants: anthropicRefusal("RateLimitError", 429, "rate_limit_error", "provider_queue_full", busyLane)},
		conformanceCheck{name: "anthropic/5xx", tries: stainless5xx,
			wants: anthropicRefusal("InternalServerError", 502, "api_error", "upstream_error", serverErr)},
	)
}

// streamFailure is what a Responses stream that fails after some text must show: the
// stream ends with the failed response (not an exception), with the id response.created
// gave, the text streamed so far and the gateway's code.
func streamFailure(name, code string) conformanceCheck {
	return conformanceCheck{name: name, wants: []expect{
		{"thrown", equals(nil), "responses.stream() ends with the failed response instead of throwing"},
		{"status", equals("failed"), "the final response is failed"},
		{"error.code", equals(code), "the gateway's code in response.error"},
		{"streamed", nonEmpty, "some text came before the failure"},
	}, extra: func(t *testing.T, obs map[string]any, _ *conformanceEnv) {
		if obs["id"] != obs["created_id"] {
			t.Errorf("%s: response.failed has id %v, response.created had %v: the stream's identity must not change", name, obs["id"], obs["created_id"])
		}
		if obs["output_text"] != obs["streamed"] {
			t.Errorf("%s: the failed response's output_text is %v, the stream's text was %v: keep what was streamed", name, obs["output_text"], obs["streamed"])
		}
	}}
}

// disablesParallel asserts that every request the backend got for model told it to make
// one tool call at a time, as parallel_tool_calls false asked.
func disablesParallel(model string) func(*testing.T, map[string]any, *conformanceEnv) {
	return func(t *testing.T, _ map[string]any, env *conformanceEnv) {
		bodies := env.backend.sent(model)
		if len(bodies) == 0 {
			t.Fatalf("the Anthropic backend got no request for %s", model)
		}
		for i, b := range bodies {
			if v, _ := lookup(b, "tool_choice.disable_parallel_tool_use"); v != true {
				tc, _ := lookup(b, "tool_choice")
				t.Errorf("request %d for %s: tool_choice %v, want disable_parallel_tool_use true (parallel_tool_calls false)", i+1, model, tc)
			}
		}
	}
}

func openaiChecks() []conformanceCheck {
	var cs []conformanceCheck
	for _, r := range routes {
		cs = append(cs,
			conformanceCheck{name: "openai/chat/" + r, wants: []expect{plainReply,
				{"finish_reason", equals("stop"), "the backend's stop"},
				{"request_id", nonEmpty, "_request_id is the x-request-id header"}}},
			conformanceCheck{name: "openai/chat.stream/" + r, wants: []expect{plainReply,
				{"deltas", atLeast(2), "content events as the text arrives"},
				{"finish_reason", equals("stop"), "the backend's stop"},
				{"usage.total_tokens", atLeast(1), "include_usage's chunk"}}},
			conformanceCheck{name: "openai/responses/" + r, wants: []expect{plainReply,
				{"status", equals("completed"), "a completed response"},
				{"message.content.0.type", equals("output_text"), "an output_text part"},
				{"message.content.0.annotations", equals([]any{}), "output_text parts always carry annotations (the AI SDK's schema requires it)"},
				{"request_id", nonEmpty, "_request_id is the x-request-id header"}}},
			conformanceCheck{name: "openai/responses.stream/" + r, wants: []expect{plainReply,
				{"streamed", equals(conformanceReply), "the delta events add up to the text"},
				{"deltas", atLeast(2), "the text arrives in pieces"},
				{"status", equals("completed"), "finalResponse() is completed"}}},
			streamFailure("openai/responses.stream.failure/"+r, "upstream_error"),
		)
	}
	cs = append(cs, streamFailure("openai/responses.stream.cut/native", "upstream_truncated"),
		conformanceCheck{name: "openai/chat.stream.failure", wants: []expect{
			{"streamed", nonEmpty, "the text before the failure"},
			{"thrown.class", equals("APIError"), "the stream's error event becomes an APIError"},
			{"thrown.code", equals("upstream_error"), "with the gateway's code"}}})
	for _, r := range []string{"native", "translated", "anthropic"} {
		chat := conformanceCheck{name: "openai/chat.tools/" + r, tries: twice200, wants: []expect{toolAnswer,
			{"finish_reason", equals("tool_calls"), "the first turn asks for the tool"},
			{"call.name", equals("exec_command"), "the tool asked for"},
			{"call.arguments.cmd", equals(fakellm.ToolCommand), "the tool's arguments"}}}
		responses := conformanceCheck{name: "openai/responses.tools/" + r, tries: twice200, wants: []expect{toolAnswer,
			{"call.name", equals("exec_command"), "a function_call item"},
			{"call.arguments.cmd", equals(fakellm.ToolCommand), "the call's arguments"}}}
		if r == "anthropic" {
			chat.extra, responses.extra = disablesParallel("parallel-chat"), disablesParallel("parallel-responses")
		}
		cs = append(cs, chat, responses)
	}
	return append(cs,
		conformanceCheck{name: "openai/models.list", wants: []expect{
			{"first.object", equals("model"), "OpenAI's Model object"},
			{"first.id", nonEmpty, "an id to ask for"},
			{"first.owned_by", nonEmpty, "OpenAI's Model has owned_by"}}},
		conformanceCheck{name: "openai/unknown-model", tries: once404, wants: openaiRefusal("NotFoundError", 404, "model_not_found", listIDs)},
		conformanceCheck{name: "openai/wrong-base-url", tries: once404, wants: []expect{
			{"error.class", equals("NotFoundError"), "a 404"},
			{"error.message", holds("/v1/chat/completions"), "the answer names the route the client meant"}}},
		conformanceCheck{name: "openai/401", tries: once401, wants: append(openaiRefusal("AuthenticationError", 401, "invalid_api_key", badKey), noRetry)},
		conformanceCheck{name: "openai/429", tries: stainless429, wants: openaiRefusal("RateLimitError", 429, "provider_queue_full", busyLane)},
		conformanceCheck{name: "openai/5xx", tries: stainless5xx, wants: openaiRefusal("InternalServerError", 502, "upstream_error", serverErr)},
	)
}

func agentsChecks() []conformanceCheck {
	var cs []conformanceCheck
	ran := []expect{{"final", equals(fakellm.ToolDoneReply), "the run's final output, from the tool's result"},
		{"tool_calls", equals([]string{fakellm.ToolCommand}), "the tool ran once, with the backend's arguments"}}
	for _, api := range []string{"chat", "responses"} {
		for _, r := range routes {
			cs = append(cs, conformanceCheck{name: "agents/" + api + "/tool/" + r, tries: twice200, wants: ran})
		}
		cs = append(cs,
			conformanceCheck{name: "agents/" + api + "/tool.stream", tries: twice200, wants: ran},
			conformanceCheck{name: "agents/" + api + "/401", tries: once401, wants: append(openaiRefusal("AuthenticationError", 401, "invalid_api_key", badKey), noRetry)},
			conformanceCheck{name: "agents/" + api + "/429", tries: stainless429, wants: openaiRefusal("RateLimitError", 429, "provider_queue_full", busyLane)},
			conformanceCheck{name: "agents/" + api + "/5xx", tries: stainless5xx, wants: openaiRefusal("InternalServerError", 502, "upstream_error", serverErr)},
		)
	}
	return cs
}

// retried is what the AI SDK throws once its retries are spent: a RetryError whose last
// error is the gateway's answer.
func retried(status int, code, phrase string) []expect {
	return []expect{
		{"error.lastError.message", holds(phrase), "the last error's message says what is wrong"},
		{"error.class", equals("RetryError"), "retries spent"},
		{"error.reason", equals("maxRetriesExceeded"), "the reason"},
		{"error.attempts", equals(3), "one error per attempt"},
		{"error.lastError.status", equals(status), "the last answer's status"},
		{"error.lastError.responseBody", holds(code), "Tollgate's code in the body"},
	}
}

func aisdkChecks() []conformanceCheck {
	var cs []conformanceCheck
	for _, p := range []string{"openai", "anthropic"} {
		for _, r := range routes {
			cs = append(cs,
				conformanceCheck{name: "aisdk/" + p + "/generateText/" + r, wants: []expect{plainReply,
					{"finish_reason", equals("stop"), "the backend's stop"}}},
				conformanceCheck{name: "aisdk/" + p + "/generateText.tool/" + r, tries: twice200, wants: []expect{toolAnswer,
					{"tool_calls", equals([]string{fakellm.ToolCommand}), "the tool ran once"},
					{"steps", equals(2), "a tool step, then the answer"}}},
				conformanceCheck{name: "aisdk/" + p + "/streamText.tool/" + r, tries: twice200, wants: []expect{toolAnswer,
					{"tool_calls", equals([]string{fakellm.ToolCommand}), "the tool ran once"},
					{"steps", equals(2), "a tool step, then the answer"},
					{"errors", equals([]string{}), "no stream error"}}},
			)
		}
	}
	return append(cs,
		conformanceCheck{name: "aisdk/openai/wrong-base-url", tries: once404, wants: []expect{
			{"error.status", equals(404), "a 404"},
			{"error.message", holds("/v1/responses"), "the answer, in OpenAI's shape, names the route the client meant"}}},
		conformanceCheck{name: "aisdk/anthropic/wrong-base-url", tries: once404, wants: []expect{
			{"error.status", equals(404), "a 404"},
			{"error.message", holds("/v1/messages"), "the answer, in Anthropic's shape, names the route the client meant"}}},
		conformanceCheck{name: "aisdk/openai/401", tries: once401, wants: []expect{
			{"error.class", equals("APICallError"), "not retried: the call's error itself"},
			{"error.status", equals(401), "the status"}, {"error.responseBody", holds("invalid_api_key"), "Tollgate's code"},
			{"error.message", holds(badKey), "the message says what is wrong"}, noRetry}},
		conformanceCheck{name: "aisdk/anthropic/401", tries: once401, wants: []expect{
			{"error.class", equals("APICallError"), "not retried: the call's error itself"},
			{"error.status", equals(401), "the status"}, {"error.responseBody", holds("invalid_api_key"), "Tollgate's code"},
			{"error.message", holds(badKey), "the message says what is wrong"}, noRetry}},
		conformanceCheck{name: "aisdk/openai/429", tries: aisdk429, wants: retried(429, "provider_queue_full", busyLane)},
		conformanceCheck{name: "aisdk/anthropic/429", tries: aisdk429, wants: retried(429, "provider_queue_full", busyLane)},
		conformanceCheck{name: "aisdk/openai/5xx", tries: aisdk5xx, wants: retried(502, "upstream_error", serverErr)},
		conformanceCheck{name: "aisdk/anthropic/5xx", tries: aisdk5xx, wants: retried(502, "upstream_error", serverErr)},
	)
}

func langchainChecks() []conformanceCheck {
	var cs []conformanceCheck
	for _, r := range routes {
		cs = append(cs,
			conformanceCheck{name: "langchain/invoke/" + r, wants: []expect{plainReply,
				{"stop_reason", equals("end_turn"), "the backend's stop, in response_metadata"}}},
			conformanceCheck{name: "langchain/stream/" + r, wants: []expect{plainReply,
				{"chunks", atLeast(2), "the text arrives in chunks"}}},
			conformanceCheck{name: "langchain/tools/" + r, tries: twice200, wants: []expect{toolAnswer,
				{"call.name", equals("exec_command"), "the bound tool's call"},
				{"call.args.cmd", equals(fakellm.ToolCommand), "its arguments, parsed"}}},
		)
	}
	return append(cs,
		conformanceCheck{name: "langchain/defaults", tries: noRequest, wants: []expect{
			{"max_retries", equals(6), "AsyncCaller's default retries"}}},
		conformanceCheck{name: "langchain/401", tries: once401, wants: append(refusal("AuthenticationError", 401, "error.body.error.code", "invalid_api_key", badKey), noRetry)},
		conformanceCheck{name: "langchain/429", tries: langchain429, wants: refusal("RateLimitError", 429, "error.body.error.code", "provider_queue_full", busyLane)},
		conformanceCheck{name: "langchain/5xx", tries: langchain5xx, wants: refusal("InternalServerError", 502, "error.body.error.code", "upstream_error", serverErr)},
	)
}
