// Package ui is the web console of SPEC §14: plain HTML, CSS and JavaScript modules embedded in
// the binary and served under /ui/, with no build step. The console is a client of the public
// API like any other (/v1/models, /v1/chat/completions, /admin/state, and the admin keys and
// usage of SPEC §18; same origin), so it has no endpoint of its own and shows nothing another
// client with the same key could not see.
//
// Every answer carries a Content-Security-Policy that allows scripts, styles and connections
// from this origin only, no inline script or style, no frames, and Trusted Types, under which
// the browser refuses any string assigned to an HTML sink (innerHTML and the like): model
// output can only ever become text. docs/console.md explains the choices.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// Prefix is where the console is served.
const Prefix = "/ui/"

// ContentSecurityPolicy is sent with every answer under Prefix.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; " +
	"require-trusted-types-for 'script'; trusted-types 'none'"

// securityHeaders are set on every answer under Prefix, found or not.
var securityHeaders = map[string]string{
	"Content-Security-Policy":      ContentSecurityPolicy,
	"X-Content-Type-Options":       "nosniff",
	"X-Frame-Options":              "DENY",
	"Referrer-Policy":              "no-referrer",
	"Cross-Origin-Opener-Policy":   "same-origin",
	"Cross-Origin-Resource-Policy": "same-origin",
	"Permissions-Policy":           "camera=(), microphone=(), geolocation=(), payment=(), usb=()",
}

// contentTypes are the types of the console's files, fixed here rather than taken from the
// machine's MIME database (which may call a script application/x-javascript).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
}

// asset is one embedded file, ready to serve.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

// Handler serves the console under Prefix: Prefix itself is index.html, anything else is the
// embedded file of that name or notFound's answer. Files are revalidated on every load
// (Cache-Control: no-cache, with an ETag of their content), so an upgraded gateway is never
// shown with yesterday's scripts.
func Handler(notFound http.Handler) http.Handler {
	assets, err := load()
	if err != nil {
		panic(err) // the embedded tree is fixed at build time; TestAssets covers it
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		for k, v := range securityHeaders {
			h.Set(k, v)
		}
		name, ok := strings.CutPrefix(r.URL.Path, Prefix)
		if name == "" {
			name = "index.html"
		}
		a, found := assets[name]
		if !ok || !found {
			notFound.ServeHTTP(w, r)
			return
		}
		h.Set("Content-Type", a.ctype)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
	})
}

// load reads every embedded file into memory with its type and ETag.
func load() (map[string]asset, error) {
	root, err := fs.Sub(static, "static")
	if err != nil {
		return nil, err
	}
	assets := map[string]asset{}
	err = fs.WalkDir(root, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(root, name)
		if err != nil {
			return err
		}
		ctype := contentTypes[path.Ext(name)]
		if ctype == "" {
			return fmt.Errorf("ui: %s: no content type for its extension", name)
		}
		sum := sha256.Sum256(body)
		assets[name] = asset{body: body, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	return assets, err
}
