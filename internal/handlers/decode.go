package handlers

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	json "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/skipq/skipq/internal/service"
)

// decode reads the request body into v strictly: unknown fields, duplicate
// fields and wrong types are invalid_request issues at the field's path
// ("messages[2].delaySeconds"). An empty body (or only whitespace) means {}.
// It writes the error response itself and reports whether decoding
// succeeded.
//
// The body is decoded as it streams in, never read whole first: a batch
// send of SKIPQ_MAX_REQUEST_BYTES then costs the decoded strings and a
// buffer of about its largest string, not another copy of the request.
func decode(c *gin.Context, v any) bool {
	body, empty, err := skipSpace(c.Request.Body)
	if err != nil {
		readFailed(c, err)
		return false
	}
	if empty {
		return true // {}: every field absent
	}
	if !isJSON(c.GetHeader("Content-Type")) {
		abortWith(c, http.StatusUnsupportedMediaType, "unsupported_media_type",
			"a request body must be sent with Content-Type: application/json", nil)
		return false
	}
	if err := json.UnmarshalRead(body, v, json.RejectUnknownMembers(true)); err != nil {
		if readErr := readError(err); readErr != nil {
			readFailed(c, readErr)
			return false
		}
		// The decoder stops at the first bad value. A body over the size
		// limit is still a 413 whatever it holds (as when it was read
		// whole first): read on, into nothing, to find out.
		if _, drainErr := io.Copy(io.Discard, body); drainErr != nil {
			readFailed(c, drainErr)
			return false
		}
		fail(c, service.Invalid(decodeIssue(err)))
		return false
	}
	return true
}

// skipSpace reads past leading JSON whitespace and returns the rest of the
// body (empty: that was all). It reads a byte at a time, without a buffer
// of its own: a waiting receive keeps its request alive for up to an hour,
// and JSON bodies rarely start with more than a byte or two of space.
func skipSpace(body io.Reader) (rest io.Reader, empty bool, err error) {
	var b [1]byte
	for {
		n, err := body.Read(b[:])
		switch {
		case n == 1 && b[0] != ' ' && b[0] != '\t' && b[0] != '\n' && b[0] != '\r':
			return io.MultiReader(bytes.NewReader(b[:]), body), false, nil
		case err == io.EOF:
			return nil, true, nil
		case err != nil:
			return nil, false, err
		}
	}
}

// readError is the I/O error under a decoding error when reading the body
// failed (it crossed SKIPQ_MAX_REQUEST_BYTES, or the connection broke)
// rather than parsing it; nil otherwise. The decoder passes read errors
// through unwrapped by its syntactic and semantic errors.
func readError(err error) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) || errors.Is(err, service.ErrBodyBudget) {
		return err
	}
	var syn *jsontext.SyntacticError
	var sem *json.SemanticError
	if errors.As(err, &syn) || errors.As(err, &sem) {
		return nil
	}
	return err
}

// readFailed answers a body that could not be read.
func readFailed(c *gin.Context, err error) {
	if errors.Is(err, service.ErrBodyBudget) {
		fail(c, err)
		return
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		abortWith(c, http.StatusRequestEntityTooLarge, "payload_too_large",
			"the request body exceeds "+strconv.FormatInt(tooLarge.Limit, 10)+" bytes", nil)
		return
	}
	abortWith(c, http.StatusBadRequest, "invalid_request", "the request body could not be read", nil)
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// decodeIssue turns a JSON error into one issue with a path.
func decodeIssue(err error) service.Issue {
	var sem *json.SemanticError
	if errors.As(err, &sem) {
		path := pointerPath(sem.JSONPointer)
		switch {
		case errors.Is(sem.Err, json.ErrUnknownName):
			return service.Issue{Path: path, Message: "unknown field"}
		case sem.GoType != nil:
			return service.Issue{Path: path, Message: "must be " + describe(sem.GoType.String())}
		}
		return service.Issue{Path: path, Message: "invalid value"}
	}
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) {
		return service.Issue{Path: pointerPath(syn.JSONPointer), Message: "malformed JSON: " + syntaxMessage(syn)}
	}
	return service.Issue{Path: "", Message: "malformed JSON"}
}

func syntaxMessage(e *jsontext.SyntacticError) string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return "syntax error"
}

// describe names the JSON type a Go type expects.
func describe(goType string) string {
	switch {
	case strings.Contains(goType, "int"):
		return "an integer"
	case strings.Contains(goType, "bool"):
		return "a boolean"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "*map["):
		return "an object of strings"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.Contains(goType, "string"):
		return "a string"
	}
	return "an object"
}

// pointerPath turns a JSON Pointer ("/messages/2/body") into an issue path
// ("messages[2].body"). Numeric tokens are array indexes in skipq's
// requests, except inside tags, whose keys are shown as written.
func pointerPath(p jsontext.Pointer) string {
	var b strings.Builder
	prev := ""
	for tok := range p.Tokens() {
		if _, err := strconv.Atoi(tok); err == nil && prev != "tags" {
			b.WriteString("[" + tok + "]")
		} else {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(tok)
		}
		prev = tok
	}
	return b.String()
}
