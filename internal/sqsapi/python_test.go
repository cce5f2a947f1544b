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

// boto3Script drives the endpoint as boto3 code does; it prints OK or raises.
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

// boto3FIFOScript exercises FIFO queues and message move tasks (phase 2).
const boto3FIFOScript = `
import sys, time, json, boto3, botocore
endpoint = sys.argv[1]
c = boto3.client("sqs", endpoint_url=endpoint)
url = c.create_queue(QueueName="py.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
a = c.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
assert a["FifoQueue"] == "true" and a["ContentBasedDeduplication"] == "true", a
sent = [c.send_message(QueueUrl=url, MessageBody="m%d" % i, MessageGroupId=g) for i, g in enumerate(["A", "B", "A"])]
seqs = [int(s["SequenceNumber"]) for s in sent]
assert seqs == sorted(seqs), seqs
dup = c.send_message(QueueUrl=url, MessageBody="m0", MessageGroupId="B")
assert dup["MessageId"] == sent[0]["MessageId"] and dup["SequenceNumber"] == sent[0]["SequenceNumber"], dup
got = c.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"])["Messages"]
assert [m["Body"] for m in got] == ["m0", "m2", "m1"], got
assert got[0]["Attributes"]["MessageGroupId"] == "A" and got[0]["Attributes"]["SequenceNumber"] == sent[0]["SequenceNumber"], got[0]
def code(call, **kw):
    try:
        call(**kw)
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"]
    raise SystemExit("%s %s succeeded" % (call.__name__, kw))
assert code(c.send_message, QueueUrl=url, MessageBody="x") == "MissingParameter"
assert code(c.send_message, QueueUrl=url, MessageBody="x", MessageGroupId="g", DelaySeconds=3) == "InvalidParameterValue"
assert code(c.create_queue, QueueName="bad.fifo") == "InvalidParameterValue"
dlq = c.create_queue(QueueName="py-dlq")["QueueUrl"]
arn = c.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
src = c.create_queue(QueueName="py-src", Attributes={"RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 1})})["QueueUrl"]
c.send_message(QueueUrl=src, MessageBody="dead")
m = c.receive_message(QueueUrl=src)["Messages"][0]
c.change_message_visibility(QueueUrl=src, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
task = c.start_message_move_task(SourceArn=arn)["TaskHandle"]
for _ in range(600):
    r = c.list_message_move_tasks(SourceArn=arn)["Results"][0]
    if r["Status"] != "RUNNING":
        break
    time.sleep(0.05)
assert r["Status"] == "COMPLETED" and r["ApproximateNumberOfMessagesMoved"] == 1, r
assert c.receive_message(QueueUrl=src)["Messages"][0]["Body"] == "dead"
assert code(c.cancel_message_move_task, TaskHandle=task) == "InvalidParameterValue"
try:
    c.list_message_move_tasks(SourceArn=arn.replace("py-dlq", "nope"))
    raise SystemExit("listing the tasks of a missing queue succeeded")
except c.exceptions.ResourceNotFoundException:
    pass
print("OK")
`

func runPython(t *testing.T, env []string, args ...string) {
	t.Helper()
	runScript(t, boto3Script, env, args...)
}

func runScript(t *testing.T, source string, env []string, args ...string) {
	t.Helper()
	python := needTool(t, "python3", "-c", "import boto3")
	script := filepath.Join(t.TempDir(), "sqs.py")
	if err := os.WriteFile(script, []byte(source), 0o600); err != nil {
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

// boto3 on FIFO queues and message move tasks.
func TestBoto3FIFOAndMoveTasks(t *testing.T) {
	n := newNode(t)
	runScript(t, boto3FIFOScript, awsEnv("x", "x"), n.URL)
}

// boto3's own signer (independent of Go's) verified with auth on.
func TestBoto3Signed(t *testing.T) {
	n, _, keys := authNode(t)
	akid, secret, _ := credentials(t, keys, "acme", "admin")
	runPython(t, awsEnv(akid, secret), n.URL)
}

// The AWS CLI, output parsed and checked.
func TestAWSCLI(t *testing.T) {
	aws := needTool(t, "aws", "--version")
	n, _, keys := authNode(t)
	akid, secret, _ := credentials(t, keys, "acme", "admin")
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

	// FIFO: group, deduplication id, sequence number.
	decodeJSON(t, run(0, "create-queue", "--queue-name", "cli.fifo", "--attributes", "FifoQueue=true"), &created)
	var fifoSent struct{ MessageId, SequenceNumber string }
	decodeJSON(t, run(0, "send-message", "--queue-url", created.QueueUrl, "--message-body", "f",
		"--message-group-id", "g", "--message-deduplication-id", "d"), &fifoSent)
	decodeJSON(t, run(0, "receive-message", "--queue-url", created.QueueUrl, "--attribute-names", "All"), &got)
	if len(got.Messages) != 1 || got.Messages[0].Attributes["MessageGroupId"] != "g" ||
		got.Messages[0].Attributes["MessageDeduplicationId"] != "d" || got.Messages[0].Attributes["SequenceNumber"] != fifoSent.SequenceNumber {
		t.Fatalf("FIFO receive-message: %+v (sent %+v)", got, fifoSent)
	}
	if out := run(254, "send-message", "--queue-url", created.QueueUrl, "--message-body", "f"); !strings.Contains(out, "MissingParameter") {
		t.Fatalf("send without a group printed %s", out)
	}
	if out := run(254, "start-message-move-task", "--source-arn", "arn:aws:sqs:us-east-1:1:cli-q"); !strings.Contains(out, "InvalidParameterValue") {
		t.Fatalf("move task from a queue that is no DLQ printed %s", out)
	}
}
