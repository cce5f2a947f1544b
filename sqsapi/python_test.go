package sqsapi_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// needTool returns the path of a client tool; missing, the test skips,
// or fails under CI=true (the CI image has it).
func needTool(t *testing.T, name string, check ...string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil && len(check) > 0 {
		err = exec.Command(path, check...).Run()
	}
	if err != nil {
		msg := name + " " + strings.Join(check, " ") + " is not usable here (" + err.Error() + "); the SQS client tests need it"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

// awsEnv is the environment a boto3 or AWS CLI process gets: credentials
// and region only, no config files, no instance metadata.
func awsEnv(akid, secret string, extra ...string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir(),
		"AWS_ACCESS_KEY_ID=" + akid, "AWS_SECRET_ACCESS_KEY=" + secret, "AWS_DEFAULT_REGION=us-east-1",
		"AWS_CONFIG_FILE=" + os.DevNull, "AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull, "AWS_EC2_METADATA_DISABLED=true"}
	return append(env, extra...)
}

// boto3Script exercises SPEC §11.17 17-19; it prints OK or raises.
const boto3Script = `
import sys, boto3, botocore
endpoint = sys.argv[1]
c = boto3.client("sqs", endpoint_url=endpoint)
resp = c.list_queues()
assert "QueueUrls" not in resp, resp
url = c.create_queue(QueueName="py-q")["QueueUrl"]
assert url == endpoint.rstrip("/") + "/" + url.split("/")[-2] + "/py-q", url
assert c.get_queue_url(QueueName="py-q")["QueueUrl"] == url
assert c.list_queues(QueueNamePrefix="py-")["QueueUrls"] == [url]
resp = c.receive_message(QueueUrl=url, WaitTimeSeconds=0)
assert "Messages" not in resp, resp
sent = c.send_message(QueueUrl=url, MessageBody="msg", DelaySeconds=0,
    MessageAttributes={"Hello": {"DataType": "String", "StringValue": "There"}})
assert sent["MD5OfMessageBody"] == "6e2baaf3b97dbeef01c0043275f9a0e7", sent
assert sent["MD5OfMessageAttributes"] == "a311262e065454b75da111d535b8dacd", sent
got = c.receive_message(QueueUrl=url, MessageAttributeNames=["All"], AttributeNames=["All"], VisibilityTimeout=0)
m = got["Messages"][0]
assert m["Body"] == "msg" and m["MessageAttributes"]["Hello"]["StringValue"] == "There", m
assert m["Attributes"]["ApproximateReceiveCount"] == "1", m
again = c.receive_message(QueueUrl=url)["Messages"][0]
c.delete_message(QueueUrl=url, ReceiptHandle=again["ReceiptHandle"])
c.delete_queue(QueueUrl=url)
try:
    c.get_queue_url(QueueName="py-q")
    raise SystemExit("get_queue_url of a deleted queue succeeded")
except c.exceptions.QueueDoesNotExist as e:
    assert e.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue", e.response
try:
    c.send_message_batch(QueueUrl=url, Entries=[])
except botocore.exceptions.ClientError as e:
    assert e.response["Error"]["Code"] in ("AWS.SimpleQueueService.EmptyBatchRequest", "AWS.SimpleQueueService.NonExistentQueue"), e.response
print("OK")
`

func runPython(t *testing.T, env []string, args ...string) {
	t.Helper()
	python := needTool(t, "python3", "-c", "import boto3")
	script := filepath.Join(t.TempDir(), "sqs.py")
	if err := os.WriteFile(script, []byte(boto3Script), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, append([]string{script}, args...)...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "OK" {
		t.Fatalf("boto3: %v\n%s", err, out)
	}
}

// boto3 with auth off and an endpoint_url with a path.
func TestBoto3(t *testing.T) {
	n := newNode(t)
	runPython(t, awsEnv("x", "x"), n.URL+"/prefix")
}

// boto3's own signer (independent of Go's) verified with auth on.
func TestBoto3Signed(t *testing.T) {
	n, svc := authNode(t)
	akid, secret, _ := credentials(t, svc, "acme", "admin")
	runPython(t, awsEnv(akid, secret), n.URL)
}

// SPEC §11.17 20: the AWS CLI, output parsed and checked.
func TestAWSCLI(t *testing.T) {
	aws := needTool(t, "aws", "--version")
	n, svc := authNode(t)
	akid, secret, _ := credentials(t, svc, "acme", "admin")
	run := func(want int, args ...string) string {
		t.Helper()
		cmd := exec.Command(aws, append([]string{"--endpoint-url", n.URL, "--output", "json", "sqs"}, args...)...)
		cmd.Env = awsEnv(akid, secret)
		out, err := cmd.CombinedOutput()
		code := 0
		if err != nil {
			code = cmd.ProcessState.ExitCode()
		}
		if code != want && !(want == 254 && code == 255) {
			t.Fatalf("aws sqs %v: exit %d, want %d: %s", args, code, want, out)
		}
		return string(out)
	}
	var created struct{ QueueUrl string }
	decodeJSON(t, run(0, "create-queue", "--queue-name", "cli-q"), &created)
	var sent struct{ MD5OfMessageBody, MD5OfMessageAttributes string }
	decodeJSON(t, run(0, "send-message", "--queue-url", created.QueueUrl, "--message-body", "msg",
		"--message-attributes", `{"Hello":{"DataType":"String","StringValue":"There"}}`), &sent)
	if sent.MD5OfMessageBody != "6e2baaf3b97dbeef01c0043275f9a0e7" || sent.MD5OfMessageAttributes != "a311262e065454b75da111d535b8dacd" {
		t.Fatalf("send-message: %+v", sent)
	}
	var got struct {
		Messages []struct {
			Body, ReceiptHandle string
			Attributes          map[string]string
			MessageAttributes   map[string]struct{ StringValue string }
		}
	}
	decodeJSON(t, run(0, "receive-message", "--queue-url", created.QueueUrl, "--message-attribute-names", "All",
		"--attribute-names", "All"), &got)
	if len(got.Messages) != 1 || got.Messages[0].Body != "msg" || got.Messages[0].MessageAttributes["Hello"].StringValue != "There" ||
		got.Messages[0].Attributes["SenderId"] != akid {
		t.Fatalf("receive-message: %+v", got)
	}
	run(0, "delete-message", "--queue-url", created.QueueUrl, "--receipt-handle", got.Messages[0].ReceiptHandle)
	var attrs struct{ Attributes map[string]string }
	decodeJSON(t, run(0, "get-queue-attributes", "--queue-url", created.QueueUrl, "--attribute-names", "All"), &attrs)
	if attrs.Attributes["ApproximateNumberOfMessages"] != "0" || attrs.Attributes["VisibilityTimeout"] != "30" {
		t.Fatalf("get-queue-attributes: %v", attrs.Attributes)
	}
	if out := run(254, "get-queue-url", "--queue-name", "nope"); !strings.Contains(out, "AWS.SimpleQueueService.NonExistentQueue") {
		t.Fatalf("error case printed %s", out)
	}
}
