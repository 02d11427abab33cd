package openai

import (
	"bytes"
	"net"
	"net/http"
	"sync"
	"time"
)

// NewTransport returns a pooled keep-alive HTTP/1.1 transport for LLM backends. connect bounds
// dialing and TLS; header bounds the wait for response headers. There is deliberately no
// whole-call timeout: a stream may run for many minutes and is bounded by its context.
// Compression is off so a gzip layer never holds back stream events.
func NewTransport(connect, header time.Duration) *http.Transport {
	d := &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   connect,
		ResponseHeaderTimeout: header,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
}

// Clients are shared per timeout pair so every provider with the same settings draws on one
// connection pool.
var (
	sharedMu      sync.Mutex
	sharedClients = map[[2]time.Duration]*http.Client{}
)

func sharedClient(connect, header time.Duration) *http.Client {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	k := [2]time.Duration{connect, header}
	if c, ok := sharedClients[k]; ok {
		return c
	}
	c := &http.Client{Transport: NewTransport(connect, header)}
	sharedClients[k] = c
	return c
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
