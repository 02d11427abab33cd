package sse

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/sse")

// TestGoldenTranscripts reads each testdata/sse/*.sse transcript (whole and one byte at a
// time) and compares the events with <name>.golden.jsonl.
func TestGoldenTranscripts(t *testing.T) {
	files, err := filepath.Glob("../../testdata/sse/*.sse")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			in, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			events, err := readAll(NewReader(bytes.NewReader(in)))
			if err != nil {
				t.Fatal(err)
			}
			if slow, err := readAll(NewReader(iotest.OneByteReader(bytes.NewReader(in)))); err != nil || !sameEvents(slow, events) {
				t.Fatalf("one byte at a time differs: %q, %v", slow, err)
			}
			var got bytes.Buffer
			enc := json.NewEncoder(&got)
			enc.SetEscapeHTML(false)
			for _, e := range events {
				line := struct {
					Type string `json:"type,omitempty"`
					Data string `json:"data"`
					ID   string `json:"id,omitempty"`
				}{e.Type, string(e.Data), e.ID}
				if err := enc.Encode(line); err != nil {
					t.Fatal(err)
				}
			}
			golden := strings.TrimSuffix(path, ".sse") + ".golden.jsonl"
			if *update {
				if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("missing golden (run with -update): %v", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("events differ from %s\n--- got\n%s--- want\n%s", golden, got.Bytes(), want)
			}
		})
	}
}
