package mcpproxy

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestFrontOrigins(t *testing.T) {
	if _, err := NewFront(http.NotFoundHandler(), []string{"https://app.example/path"}, nil); err == nil {
		t.Error("an --allowed-origin with a path was accepted")
	}
	f, err := NewFront(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }), []string{"https://App.Example:443", "http://[::2]:8080"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for origin, want := range map[string]int{
		"":                              http.StatusTeapot,
		"http://localhost":              http.StatusTeapot,
		"http://LOCALHOST:1":            http.StatusTeapot,
		"https://127.255.0.1:443":       http.StatusTeapot,
		"http://[::1]:3000":             http.StatusTeapot,
		"https://app.example":           http.StatusTeapot,
		"http://[::2]:8080":             http.StatusTeapot,
		"http://app.example":            http.StatusForbidden,
		"http://[::2]:8081":             http.StatusForbidden,
		"http://localhost.":             http.StatusForbidden,
		"http://evil.example":           http.StatusForbidden,
		"http://127.0.0.1@evil.example": http.StatusForbidden,
		"ws://localhost":                http.StatusForbidden,
		"null":                          http.StatusForbidden,
	} {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		w := httptest.NewRecorder()
		f.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Origin %q: %d, want %d", origin, w.Code, want)
		}
	}
}
