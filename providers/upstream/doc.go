// Package upstream holds what every HTTP adapter needs to read a backend's failure the same
// way: the wait it advises (RetryHint), the error kind its status means (KindForStatus), a
// capped read of its error body and scrubbing of keys from anything that may reach a client.
// It depends on the standard library and providers/llm only.
package upstream
