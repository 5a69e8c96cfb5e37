//go:build e2e

package exporter

import (
	"fmt"
	"slices"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/fanout-go/fanout/exporter/internal/awstest"
)

// A configuration of theirs with every AWS receiver, only their keys,
// runs unchanged: no warning, and each service receives the events (SQS,
// SNS and Kinesis emulated by fauxqs and kinesalite; Firehose,
// EventBridge and OpsCenter by awstest.Fake). The endpoints come from the
// AWS SDK's environment variables, as a user would point it at a VPC
// endpoint, so that the configuration has nothing of this exporter's.
func TestTheirConfigWithEveryAWSReceiverRunsUnchangedAndExportsToEach(t *testing.T) {
	fq, ks := awstest.StartFauxqs(t), awstest.StartKinesalite(t)
	fh, eb, ops := newFakeFirehose(t), newFakeEventBridge(t), newFakeOpsCenter(t)
	arn, delivered := subscribedTopic(t, fq.URL, "kube-events")
	queue := createQueue(t, sqsClient(fq.URL), "kube-events", nil)
	stream := kinesisStream(t, ks.URL, "kube-events")
	awstest.SetEnv(t)
	for service, url := range map[string]string{"SQS": fq.URL, "SNS": fq.URL, "KINESIS": ks.URL, "FIREHOSE": fh.URL,
		"EVENTBRIDGE": eb.URL, "SSM": ops.URL} {
		t.Setenv("AWS_ENDPOINT_URL_"+service, url)
	}
	c := parseOK(t, fmt.Sprintf(`route:
  routes:
    - match:
        - receiver: "sqs"
        - receiver: "sns"
        - receiver: "kinesis"
        - receiver: "firehose"
        - receiver: "eventbridge"
    - match:
        - type: "Warning"
          receiver: "opscenter"
receivers:
  - name: "sqs"
    sqs:
      queueName: "kube-events"
      region: %[1]s
  - name: "sns"
    sns:
      topicARN: "%[2]s"
      region: %[1]s
  - name: "kinesis"
    kinesis:
      streamName: "kube-events"
      region: %[1]s
      layout:
        message: "{{ .Message }}"
  - name: "firehose"
    firehose:
      deliveryStreamName: "kube-events"
      region: %[1]s
      deDot: true
  - name: "eventbridge"
    eventbridge:
      detailType: "kube-event"
      source: "k8s"
      eventBusName: "default"
      region: %[1]s
      details:
        reason: "{{ .Reason }}"
  - name: "opscenter"
    opscenter:
      title: "{{ .Reason }} {{ .Name }}"
      description: "{{ .Message }}"
      source: "kubernetes"
      region: %[1]s
`, awstest.Region, arn))
	if len(c.Warnings) > 0 {
		t.Errorf("warnings: %q", c.Warnings)
	}
	runExporter(t, Options{Config: c, Client: fake.NewClientset(coreEvent("a", 1), coreEvent("b", 2))})

	if got := receiveAll(t, sqsClient(fq.URL), queue, 2); len(got) != 2 {
		t.Errorf("sqs: %d messages, want 2", len(got))
	}
	if got := receiveAll(t, sqsClient(fq.URL), delivered, 2); len(got) != 2 {
		t.Errorf("sns: %d messages delivered, want 2", len(got))
	}
	eventually(t, "kinesis", func() bool { return len(streamRecords(t, stream, "kube-events", 2)) == 2 })
	if got := string(streamRecords(t, stream, "kube-events", 2)[0].Data); got != `{"message":"back-off"}` {
		t.Errorf("kinesis record %s, want the layout's", got)
	}
	eventually(t, "firehose", func() bool { fh.mu.Lock(); defer fh.mu.Unlock(); return len(fh.records) == 2 })
	eventually(t, "eventbridge", func() bool { eb.mu.Lock(); defer eb.mu.Unlock(); return len(eb.entries) == 2 })
	eventually(t, "opscenter", func() bool { ops.mu.Lock(); defer ops.mu.Unlock(); return len(ops.items) == 2 })
	titles := []string{ops.items[0].Title, ops.items[1].Title}
	slices.Sort(titles)
	if !slices.Equal(titles, []string{"BackOff a", "BackOff b"}) {
		t.Errorf("OpsItem titles %v", titles)
	}
}
