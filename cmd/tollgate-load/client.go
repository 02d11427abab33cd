package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// call is one chat request as a load client sends it.
type call struct {
	model    string
	priority string // X-Gateway-Priority; "" sends none
	stream   bool
	tag      string // put at the start of the prompt, where the tap reads it
	hold     bool   // ask the tap to park the request until release
	payload  []byte // the body, when built once for many sends; nil builds it from the fields
	key      string // the client key it presents (Authorization: Bearer); "" none
}

// outcome is what one client saw.
type outcome struct {
	call      call
	status    int           // 0 when no response arrived
	code      string        // SPEC §4 code of an error answer; "" for success
	queueMs   int64         // X-Gateway-Queue-Ms; -1 when absent
	ttfb      time.Duration // until the first body byte; 0 when none arrived
	total     time.Duration // until the body ended (or the client gave up)
	cancelled bool          // the client hung up on purpose
	gotHeader bool          // response headers arrived before the hang-up
	breach    string        // why the answer is malformed; "" when it is well-formed
	// What an SDK reads to decide on its own retry: x-should-retry, and the advised wait.
	shouldRetry string
	retryAfter  time.Duration
	model       string // X-Gateway-Model: the model that served or refused it
}

// label is how the outcome is counted in the report.
func (o outcome) label() string {
	switch {
	case o.cancelled && o.gotHeader:
		return "cancelled-after-headers"
	case o.cancelled:
		return "cancelled-before-headers"
	case o.breach != "" && o.status == 0:
		return "transport-error"
	case o.code != "":
		return strconv.Itoa(o.status) + " " + o.code
	}
	return strconv.Itoa(o.status)
}

func (c call) body() []byte {
	if c.payload != nil {
		return c.payload
	}
	prompt := "tag:" + c.tag + " say something short"
	if c.hold {
		prompt += " " + holdTag
	}
	b, _ := json.Marshal(map[string]any{
		"model":    c.model,
		"messages": []map[string]string{{"role": "user", "content": prompt}},
		"stream":   c.stream,
	})
	return b
}

// send makes one call and checks the answer. A ctx that ends is the client hanging up: the
// outcome is marked cancelled, not breached.
func send(ctx context.Context, hc *http.Client, base string, c call) outcome {
	o := outcome{call: c, queueMs: -1}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(c.body()))
	if err != nil {
		o.breach = "build request: " + err.Error()
		return o
	}
	req.Header.Set("Content-Type", "application/json")
	if c.priority != "" {
		req.Header.Set("X-Gateway-Priority", c.priority)
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		o.total = time.Since(start)
		if ctx.Err() != nil {
			o.cancelled = true
		} else {
			o.breach = "transport: " + err.Error()
		}
		return o
	}
	defer resp.Body.Close()
	o.gotHeader, o.status = true, resp.StatusCode
	o.shouldRetry, o.model = resp.Header.Get("x-should-retry"), resp.Header.Get("X-Gateway-Model")
	if ms, err := strconv.ParseInt(resp.Header.Get("retry-after-ms"), 10, 64); err == nil && ms > 0 {
		o.retryAfter = time.Duration(ms) * time.Millisecond
	} else if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		o.retryAfter = time.Duration(s) * time.Second
	}
	fb := &firstByte{r: resp.Body}
	body, err := io.ReadAll(fb)
	o.total = time.Since(start)
	if !fb.at.IsZero() {
		o.ttfb = fb.at.Sub(start)
	}
	if err != nil {
		if ctx.Err() != nil {
			o.cancelled = true
		} else {
			o.breach = "read body: " + err.Error()
		}
		return o
	}
	o.queueMs, o.code, err = checkAnswer(resp.StatusCode, resp.Header, body, c.stream)
	if err != nil {
		o.breach = err.Error()
	}
	return o
}

// firstByte notes when the first body byte arrived.
type firstByte struct {
	r  io.Reader
	at time.Time
}

func (f *firstByte) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if n > 0 && f.at.IsZero() {
		f.at = time.Now()
	}
	return n, err
}

// busyCodes are the SPEC §4 codes of a 429: the only non-success answers a load test of
// admission expects.
var busyCodes = map[string]bool{
	"provider_queue_full": true, "provider_queue_timeout": true, "gateway_overloaded": true,
	"batch_capacity_unavailable": true, "upstream_rate_limited": true,
}

// checkAnswer checks one complete answer: the headers every chat response carries, then a
// success (whole or streamed) or a well-formed 429. It returns the queue wait and, for an
// error answer, its code.
func checkAnswer(status int, h http.Header, body []byte, stream bool) (queueMs int64, code string, err error) {
	queueMs = -1
	q := h.Get("X-Gateway-Queue-Ms")
	if q == "" {
		return queueMs, "", errors.New("no X-Gateway-Queue-Ms header")
	}
	if queueMs, err = strconv.ParseInt(q, 10, 64); err != nil || queueMs < 0 {
		return -1, "", fmt.Errorf("X-Gateway-Queue-Ms %q is not a non-negative integer", q)
	}
	if h.Get("X-Request-Id") == "" {
		return queueMs, "", errors.New("no X-Request-Id header")
	}
	switch status {
	case http.StatusOK:
		if stream {
			return queueMs, "", checkStream(body)
		}
		return queueMs, "", checkCompletion(body)
	case http.StatusTooManyRequests:
		code, err = checkBusy(h, body)
		return queueMs, code, err
	}
	code, _ = errorCode(body)
	return queueMs, code, fmt.Errorf("status %d (%s): only 200 and 429 are expected", status, code)
}

// errorBody is SPEC §4's error shape, with the fields a busy answer must carry as pointers
// so a missing one is told from a zero.
type errorBody struct {
	Error *struct {
		Message      string `json:"message"`
		Type         string `json:"type"`
		Code         string `json:"code"`
		RetryAfterMs *int64 `json:"retry_after_ms"`
	} `json:"error"`
}

func errorCode(body []byte) (string, *errorBody) {
	var e errorBody
	if json.Unmarshal(body, &e) != nil || e.Error == nil {
		return "", nil
	}
	return e.Error.Code, &e
}

// checkBusy checks a 429: a known code, Retry-After in whole seconds within 1–60,
// retry-after-ms, and retry_after_ms in the body agreeing with the header.
func checkBusy(h http.Header, body []byte) (string, error) {
	code, e := errorCode(body)
	if e == nil {
		return "", fmt.Errorf("429 body is not an OpenAI error object: %.80q", body)
	}
	if !busyCodes[code] {
		return code, fmt.Errorf("429 with unknown code %q", code)
	}
	if e.Error.Type != "rate_limit_error" || e.Error.Message == "" {
		return code, fmt.Errorf("429 %s: type %q, message %q", code, e.Error.Type, e.Error.Message)
	}
	ra, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 60 {
		return code, fmt.Errorf("429 %s: Retry-After %q is not whole seconds in 1..60", code, h.Get("Retry-After"))
	}
	ms, err := strconv.ParseInt(h.Get("retry-after-ms"), 10, 64)
	if err != nil || ms <= 0 {
		return code, fmt.Errorf("429 %s: retry-after-ms %q is not a positive integer", code, h.Get("retry-after-ms"))
	}
	if e.Error.RetryAfterMs == nil || *e.Error.RetryAfterMs != ms {
		return code, fmt.Errorf("429 %s: body retry_after_ms %v differs from header %d", code, e.Error.RetryAfterMs, ms)
	}
	return code, nil
}

// checkCompletion checks a non-streamed success: a chat.completion with a choice.
func checkCompletion(body []byte) error {
	var c struct {
		Object  string            `json:"object"`
		Choices []json.RawMessage `json:"choices"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return fmt.Errorf("200 body is not JSON: %v", err)
	}
	if c.Object != "chat.completion" || len(c.Choices) == 0 {
		return fmt.Errorf("200 body is not a chat.completion with choices: %.80q", body)
	}
	return nil
}

// streamError is a stream that ended with an error event.
type streamError struct{ code, event string }

func (e *streamError) Error() string {
	return fmt.Sprintf("stream ended with an error event (%s): %.120s", e.code, e.event)
}

// checkStream checks a streamed success: every data event is a chat.completion.chunk, none
// is an error, and the stream ends with data: [DONE] and nothing after it.
func checkStream(body []byte) error {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	chunks, done := 0, false
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue // blank separators, comments, event: lines
		}
		data = strings.TrimSpace(data)
		if done {
			return fmt.Errorf("stream has data after [DONE]: %.80q", data)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var ch struct {
			Object string          `json:"object"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return fmt.Errorf("stream event %d is not JSON: %.80q", chunks, data)
		}
		if ch.Error != nil {
			var e struct {
				Code string `json:"code"`
			}
			_ = json.Unmarshal(ch.Error, &e)
			return &streamError{code: e.Code, event: string(ch.Error)}
		}
		if ch.Object != "chat.completion.chunk" {
			return fmt.Errorf("stream event %d has object %q", chunks, ch.Object)
		}
		chunks++
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("scan stream: %w", err)
	}
	if !done || chunks == 0 {
		return fmt.Errorf("stream of %d chunks did not end with data: [DONE]", chunks)
	}
	return nil
}
