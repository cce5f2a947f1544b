package sqs_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// sqsCall posts one unsigned SQS request to h and returns its status and
// query error code.
func sqsCall(t *testing.T, h http.Handler, op string, in any, headers ...string) (int, string) {
	t.Helper()
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("POST", "http://skipq/", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS."+op)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	code, _, _ := strings.Cut(rec.Header().Get("X-Amzn-Query-Error"), ";")
	return rec.Code, code
}

// Number attributes carry what SQS's numbers carry: a decimal of up to 38
// significant digits with an optional sign and exponent, from 10^-128 to
// 10^126. NaN, Infinity, hexadecimal and digit separators are refused.
func TestNumberAttributes(t *testing.T) {
	h, _ := endpoint(t, true, 1<<20, nil)
	if status, code := sqsCall(t, h, "CreateQueue", map[string]any{"QueueName": "n"}); status != 200 {
		t.Fatalf("create: %d %s", status, code)
	}
	send := func(v string) (int, string) {
		return sqsCall(t, h, "SendMessage", map[string]any{"QueueUrl": "n", "MessageBody": "x",
			"MessageAttributes": map[string]any{"v": map[string]any{"DataType": "Number", "StringValue": v}}})
	}
	for _, v := range []string{"1", "-1", "+1.5", ".5", "5.", "0", "000.000", "1e10", "-2.5E-7", "1e126", "9.9e126",
		"1e-128", "0.0001e-124", "12345678901234567890123456789012345678", "1234567890123456789012345678901234567800000",
		"0.000012345678901234567890123456789012345678"} {
		if status, code := send(v); status != 200 {
			t.Errorf("%q: %d %s", v, status, code)
		}
	}
	for _, v := range []string{"NaN", "nan", "Infinity", "-Inf", "1_000", "0x10", "0x1p4", " 1", "1 ", "1e", "e5", ".", "+",
		"1.2.3", "1e+", "123456789012345678901234567890123456789", "1e127", "10e126", "1e-129", "0.1e-128", "1e99999"} {
		if status, code := send(v); status != 400 || code != "InvalidParameterValue" {
			t.Errorf("%q: %d %s, want 400 InvalidParameterValue", v, status, code)
		}
	}
}

// AWSTraceHeader does not count towards a message's size (as in SQS), so it
// has a bound of its own, whether given as the system attribute or taken
// from X-Amzn-Trace-Id.
func TestTraceHeaderIsBounded(t *testing.T) {
	h, _ := endpoint(t, true, 4<<20, nil)
	if status, code := sqsCall(t, h, "CreateQueue", map[string]any{"QueueName": "t"}); status != 200 {
		t.Fatalf("create: %d %s", status, code)
	}
	send := func(trace string, headers ...string) (int, string) {
		in := map[string]any{"QueueUrl": "t", "MessageBody": "x"}
		if trace != "" {
			in["MessageSystemAttributes"] = map[string]any{"AWSTraceHeader": map[string]any{"DataType": "String", "StringValue": trace}}
		}
		return sqsCall(t, h, "SendMessage", in, headers...)
	}
	root := "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	if status, code := send(root); status != 200 {
		t.Fatalf("an X-Ray header: %d %s", status, code)
	}
	if status, code := send(root + ";Pad=" + strings.Repeat("a", 1024-len(root)-5)); status != 200 {
		t.Fatalf("1024 bytes: %d %s", status, code)
	}
	for name, long := range map[string]string{"1025 bytes": root + ";Pad=" + strings.Repeat("a", 1025-len(root)-5), "2,000,000 bytes": strings.Repeat("a", 2_000_000)} {
		if status, code := send(long); status != 400 || code != "InvalidParameterValue" {
			t.Errorf("%s: %d %s", name, status, code)
		}
	}
	if status, code := send("", "X-Amzn-Trace-Id", strings.Repeat("a", 1025)); status != 400 || code != "InvalidParameterValue" {
		t.Errorf("a long X-Amzn-Trace-Id: %d %s", status, code)
	}
}
