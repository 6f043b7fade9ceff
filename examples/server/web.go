package main

import (
	"embed"
	"net/http"
)

// webFiles is the web page: plain HTML, CSS and JavaScript, served as
// they are, with no build step.
//
//go:embed web
var webFiles embed.FS

// webHandler serves the page. The Content-Security-Policy allows only the
// page's own files and requests to this server, so an injected script
// could neither run nor send a token elsewhere. (X-Content-Type-Options
// comes with every answer of the server: see nosniff.)
func webHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		name := "web" + r.URL.Path // one of the mux's fixed patterns
		if r.URL.Path == "/" {
			name = "web/index.html"
		}
		http.ServeFileFS(w, r, webFiles, name)
	})
}
