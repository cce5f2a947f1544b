package bench

import (
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/skipq/skipq/wire"
)

// structReceiveResponse is receiveResponse without its decoding method:
// what the struct decoder makes of an answer.
type structReceiveResponse struct {
	Messages []receivedMessage `json:"messages"`
	Acked    *struct {
		Succeeded int `json:"succeeded"`
	} `json:"acked"`
}

// nodeReceiveAnswer is a node's answer to a receive of n messages, encoded
// as the node encodes it, with the given bodies in turn.
func nodeReceiveAnswer(n int, bodies []string, acked string) []byte {
	now := time.Date(2026, 12, 2, 10, 0, 0, 123e6, time.UTC)
	b := []byte(`{"messages":[`)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		handle := "AAAAAAAAAAEAAAAAAAAAZAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" + strconv.Itoa(1000+i)
		reason := "a \"reason\"\n"
		m := wire.Message{MessageID: "0194c5a2-7c1e-7c3a-9b7e-2f0c1d9e8a" + strconv.Itoa(10+i%90), ReceiptHandle: &handle,
			Queue: "lifecycle-b100-p4", Sequence: int64(1000 + i), Body: bodies[i%len(bodies)],
			BodyEncoding: wire.EncodingText, Tags: map[string]string{"k": "v", "ü": "\u2028"}, SentAt: wire.At(now),
			FirstReceivedAt: wire.AtPtr(&now), ReceiveCount: 2, VisibleUntil: wire.AtPtr(&now), ExpiresAt: wire.AtPtr(&now),
			LastFailure: &wire.Failure{Cause: "nack", Reason: &reason, At: wire.At(now), ReceiveCount: 1}}
		b = m.AppendJSON(b)
	}
	b = append(b, ']')
	if acked != "" {
		b = append(b, `,"acked":`...)
		b = append(b, acked...)
	}
	return append(b, '}')
}

// The receive answer's token decoder agrees with the struct decoder: the
// same values from the same answers, an error where it errs.
func TestReceiveResponseDecodes(t *testing.T) {
	bodies := []string{payload, "", `"quoted" \ back\slash`, "tab\tnew\nline\u0000nul", "ünïcødé ✓ 𝄞 \u2028\u2029",
		"<html>&amp;</html>", "\x7f\x01", "eyJiYXNlNjQiOiB0cnVlfQ=="}
	answers := map[string]string{
		"empty":         `{"messages":[]}`,
		"no members":    `{}`,
		"null messages": `{"messages":null}`,
		"null acked":    `{"messages":[],"acked":null}`,
		"acked only":    `{"acked":{"succeeded":3,"failed":[]}}`,
		"acked first":   `{"acked":{"succeeded":1},"messages":[{"body":"b","receiptHandle":"h"}]}`,
		"escaped names": `{"m\u0065ssages":[{"receipt\u0048andle":"h\u0031","b\u006fdy":"\ud834\udd1e"}]}`,
		"null fields":   `{"messages":[{"receiptHandle":null,"body":null}]}`,
		"null message":  `{"messages":[null,{"body":"b","receiptHandle":"h"},null]}`,
		// Escaped names after plain ones, in the answer and in a message.
		"escaped later":  `{"x":1,"m\u0065ssages":[{"queue":"q","sequence":1,"b\u006fdy":"v","receipt\u0048andle":"h","tags":{"t":"\u00fc"}}],"y":2}`,
		"nested unknown": `{"x":{"messages":[1]},"messages":[{"y":[{"body":"no"}],"body":"yes","receiptHandle":"h"}],"z":[null,true,1.5e3]}`,
		"white space":    " {\n\t\"messages\" : [ { \"body\" : \"b\" , \"receiptHandle\" : \"h\" } ] } \n",
		"folded name":    `{"messages":[{"Body":"b","RECEIPTHANDLE":"h"}]}`,
		"duplicate":      `{"messages":[{"body":"a","body":"b"}]}`,
		"dup top":        `{"messages":[],"messages":[]}`,
		"number body":    `{"messages":[{"body":1}]}`,
		"object handle":  `{"messages":[{"receiptHandle":{}}]}`,
		"messages obj":   `{"messages":{}}`,
		"acked string":   `{"acked":"3"}`,
		"bad utf8":       "{\"messages\":[{\"body\":\"\xff\"}]}",
		"bad escape":     `{"messages":[{"body":"\x"}]}`,
		"lone surrogate": `{"messages":[{"body":"\ud834"}]}`,
		"trailing":       `{"messages":[]} {}`,
		"truncated":      `{"messages":[{"body":"b"`,
		"array":          `[]`,
		"null":           `null`,
		"string":         `"messages"`,
		"nothing":        ``,
	}
	for n, acked := range map[int]string{1: "", 2: `{"succeeded":2}`, 100: `{"succeeded":100,"failed":[]}`} {
		answers["node "+strconv.Itoa(n)] = string(nodeReceiveAnswer(n, bodies, acked))
	}
	// The bench decodes with duplicate names allowed (client.do); the
	// decoder's default, refusing them, is held to the same agreement.
	for _, allowDup := range []bool{true, false} {
		opt := jsontext.AllowDuplicateNames(allowDup)
		for name, answer := range answers {
			t.Run(fmt.Sprintf("%s/duplicates %v", name, allowDup), func(t *testing.T) {
				var want structReceiveResponse
				wantErr := jsonv2.Unmarshal([]byte(answer), &want, opt)
				var got receiveResponse
				gotErr := jsonv2.Unmarshal([]byte(answer), &got, opt)
				if (gotErr != nil) != (wantErr != nil) {
					t.Fatalf("token decoder's error %v, struct decoder's %v", gotErr, wantErr)
				}
				if wantErr == nil && !reflect.DeepEqual(structReceiveResponse(got), want) {
					t.Fatalf("token decoder got %+v, struct decoder %+v", got, want)
				}
			})
		}
	}
	// The node's answers hold what was sent.
	var got receiveResponse
	if err := jsonv2.Unmarshal(nodeReceiveAnswer(len(bodies), bodies, ""), &got); err != nil {
		t.Fatal(err)
	}
	for i, m := range got.Messages {
		if m.Body != bodies[i] {
			t.Errorf("message %d: body %q, sent %q", i, m.Body, bodies[i])
		}
	}
}

// What the bench's consumer spends on the answer to a receive of 100,
// into the answer it reuses (receiver.ackWithNextReceive).
func BenchmarkReceiveResponseDecode(b *testing.B) {
	raw := nodeReceiveAnswer(100, []string{payload}, `{"succeeded":100}`)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	var out receiveResponse
	for b.Loop() {
		out.Messages, out.Acked = out.Messages[:0], nil
		if err := jsonv2.Unmarshal(raw, &out, jsontext.AllowDuplicateNames(true)); err != nil {
			b.Fatal(err)
		}
	}
}

// The same answer through the struct decoder into a fresh value, as the
// bench read it before.
func BenchmarkReceiveResponseDecodeStruct(b *testing.B) {
	raw := nodeReceiveAnswer(100, []string{payload}, `{"succeeded":100}`)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		var out structReceiveResponse
		if err := jsonv2.Unmarshal(raw, &out); err != nil {
			b.Fatal(err)
		}
	}
}
