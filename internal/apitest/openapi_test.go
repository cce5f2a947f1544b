package apitest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/internal/handlers"
	"github.com/skipq/skipq/internal/metrics"
	"github.com/skipq/skipq/internal/service"
)

// openAPIFile is the document the handlers serve (embedded) and are held to.
const openAPIFile = "../handlers/openapi.json"

var openAPI struct {
	once   sync.Once
	doc    *openapi3.T
	router routers.Router
	err    error
}

// loadOpenAPI loads and validates the document once per test binary.
func loadOpenAPI() (*openapi3.T, routers.Router, error) {
	openAPI.once.Do(func() {
		raw, err := os.ReadFile(openAPIFile)
		if err != nil {
			openAPI.err = err
			return
		}
		doc, err := openapi3.NewLoader().LoadFromData(raw)
		if err == nil {
			err = doc.Validate(context.Background())
		}
		if err == nil {
			openAPI.router, err = gorillamux.NewRouter(doc)
		}
		openAPI.doc, openAPI.err = doc, err
	})
	return openAPI.doc, openAPI.router, openAPI.err
}

func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	doc, _, err := loadOpenAPI()
	if err != nil {
		t.Fatalf("%s: %v", openAPIFile, err)
	}
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	svc := service.New(nil, service.Options{Limits: service.DefaultLimits()})
	engine := handlers.New(svc, handlers.Config{Metrics: metrics.New(nil, nil)}).(*gin.Engine)
	param := regexp.MustCompile(`:([A-Za-z]+)`)
	var served []string
	for _, r := range engine.Routes() {
		served = append(served, r.Method+" "+param.ReplaceAllString(r.Path, "{$1}"))
	}
	if missing, extra := without(served, documented), without(documented, served); len(missing)+len(extra) > 0 {
		t.Fatalf("served but not documented: %q; documented but not served: %q", missing, extra)
	}
}

// without returns the elements of a that are not in b.
func without(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func TestOpenAPIServed(t *testing.T) {
	want, err := os.ReadFile(openAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	r := newNode(t).do(t, "GET", "/v1/openapi.json", nil)
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "application/json" || !bytes.Equal(r.Raw, want) {
		t.Fatalf("GET /v1/openapi.json: %d %q, not the document in %s", r.Status, r.Header.Get("Content-Type"), openAPIFile)
	}
}

// validateExchange holds one request and its response to the document. A
// request the server accepted (status < 400) must be one the document
// allows; tests send invalid ones on purpose to provoke errors. Every
// response, errors included, must match the document. Unknown routes (404)
// and wrong methods (405) are not in the document. It may run on any
// goroutine, so it reports with Errorf.
func validateExchange(t testing.TB, req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) {
	t.Helper()
	_, router, err := loadOpenAPI()
	if err != nil {
		t.Errorf("%s: %v", openAPIFile, err)
		return
	}
	ctx := context.Background()
	r := req.Clone(ctx)
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, pathParams, err := router.FindRoute(r)
	if err != nil {
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s %s answered %d but is not in the document: %v", req.Method, req.URL.Path, resp.StatusCode, err)
		}
		return
	}
	in := &openapi3filter.RequestValidationInput{
		Request: r, PathParams: pathParams, Route: route,
		Options: &openapi3filter.Options{
			AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
			IncludeResponseStatus: true, // an undocumented status is an error
			MultiError:            true,
		},
	}
	if resp.StatusCode < 400 {
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			t.Errorf("%s %s %s: accepted with %d, but the document does not allow the request: %v",
				req.Method, req.URL.RequestURI(), reqBody, resp.StatusCode, err)
		}
	}
	err = openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(respBody)), Options: in.Options,
	})
	if err != nil {
		t.Errorf("%s %s %s: the %d response does not match the document: %v\n%s",
			req.Method, req.URL.RequestURI(), reqBody, resp.StatusCode, err, respBody)
	}
}
