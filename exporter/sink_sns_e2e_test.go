//go:build e2e

package exporter

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/fanout-go/fanout/exporter/internal/awstest"
)

// These tests publish to fauxqs (internal/awstest) and read what the topic
// delivered from an SQS queue subscribed to it with raw message delivery.

// subscribedTopic creates the topic name and a queue subscribed to it, and
// returns the topic's ARN and the queue's URL.
func subscribedTopic(t *testing.T, url, name string) (arn, queue string) {
	t.Helper()
	c := sns.New(sns.Options{Region: awstest.Region, BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider(awstest.AccessKeyID, awstest.SecretAccessKey, "")})
	topic, err := c.CreateTopic(t.Context(), &sns.CreateTopicInput{Name: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	q := sqsClient(url)
	queue = createQueue(t, q, name+"-sub", nil)
	attrs, err := q.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queue),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Subscribe(t.Context(), &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"),
		Endpoint: aws.String(attrs.Attributes["QueueArn"]), Attributes: map[string]string{"RawMessageDelivery": "true"}}); err != nil {
		t.Fatal(err)
	}
	return aws.ToString(topic.TopicArn), queue
}

func TestSNSTopicDeliversEachRecordAsAMessage(t *testing.T) {
	emu := awstest.StartFauxqs(t)
	arn, queue := subscribedTopic(t, emu.URL, "kube-events")
	awstest.SetEnv(t)
	s := built(NewSNSSink(SNSConfig{TopicARN: arn, AWSConfig: AWSConfig{Endpoint: emu.URL}}))(t)
	if got := s.client.Options().Region; got != awstest.Region {
		t.Errorf("region %s, want the topic's, %s", got, awstest.Region)
	}
	var batch []*Occurrence
	for i := range 25 {
		batch = append(batch, occ(fmt.Sprintf("e%d", i), 1, "ns"))
	}
	wantDelivered(t, s, sqsClient(emu.URL), queue, batch)
}

func TestSNSTopicThatDoesNotExistIsRetried(t *testing.T) {
	emu := awstest.StartFauxqs(t)
	awstest.SetEnv(t)
	s := built(NewSNSSink(SNSConfig{TopicARN: "arn:aws:sns:" + awstest.Region + ":000000000000:missing",
		AWSConfig: AWSConfig{Endpoint: emu.URL}}))(t)
	n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")})
	wantFailure(t, "missing topic", n, err, false)
}
