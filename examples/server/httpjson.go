package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// maxBody bounds a request body; more is a 413.
const maxBody = 64 << 10

// apiError is an answer other than success: the status and a message for
// the client, sent as {"error": "…"}.
type apiError struct {
	status int
	msg    string
	// retryAfter, when positive, is sent as Retry-After, in seconds: how
	// long a 429 or 503 client should wait before it tries again.
	retryAfter int
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *apiError {
	return &apiError{status: http.StatusNotFound, msg: fmt.Sprintf(format, args...)}
}

// writeJSON sends v as JSON with the status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeError sends {"error": msg} with the status.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, struct {
		Error string `json:"error"`
	}{msg})
}

// decodeJSON reads the request body, one JSON object with no fields
// beyond dst's, into dst. A body that does not say it is JSON is refused
// with 415 before it is read: a page on another origin can send a
// text/plain or form body without a CORS preflight, which this server
// never grants, but not an application/json one.
func (a *App) decodeJSON(w http.ResponseWriter, r *http.Request, dst any) *apiError {
	if e := checkJSONType(r.Header.Get("Content-Type")); e != nil {
		return e
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return &apiError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("request body is larger than %d bytes", maxBody)}
		}
		return badRequest("cannot read the request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("request body is empty; want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		typeErr, isType := errors.AsType[*json.UnmarshalTypeError](err)
		switch {
		case isType && typeErr.Field != "":
			return badRequest("field %q: want a JSON %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()))
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return badRequest("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
		default:
			return badRequest("request body is not a JSON object: %v", err)
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("request body holds more than one JSON value")
	}
	return nil
}

// checkJSONType refuses a Content-Type other than application/json (with,
// at most, charset=utf-8).
func checkJSONType(ct string) *apiError {
	mt, params, err := mime.ParseMediaType(ct)
	if err == nil && mt == "application/json" {
		if cs, ok := params["charset"]; !ok || strings.EqualFold(cs, "utf-8") {
			return nil
		}
	}
	msg := "the request has no Content-Type: send the body as application/json"
	if ct != "" {
		msg = fmt.Sprintf("Content-Type %q is not JSON: send the body as application/json", ct)
	}
	return &apiError{status: http.StatusUnsupportedMediaType, msg: msg}
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "struct", "map":
		return "object"
	case "slice", "array":
		return "array"
	case "bool":
		return "boolean"
	default:
		return "number"
	}
}
