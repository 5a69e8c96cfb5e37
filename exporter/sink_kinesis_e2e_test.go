//go:build e2e

package exporter

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/fanout-go/fanout/exporter/internal/awstest"
)

// These tests put records into kinesalite, a Kinesis emulator speaking
// the service's protocol (run by internal/awstest), and read them back
// with the SDK.

// kinesisStream creates a stream of one shard on the emulator at url and
// returns a client of it.
func kinesisStream(t *testing.T, url, name string) *kinesis.Client {
	t.Helper()
	c := kinesis.New(kinesis.Options{Region: awstest.Region, BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider(awstest.AccessKeyID, awstest.SecretAccessKey, "")})
	if _, err := c.CreateStream(t.Context(), &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := c.DescribeStream(t.Context(), &kinesis.DescribeStreamInput{StreamName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		if out.StreamDescription.StreamStatus == kinesistypes.StreamStatusActive {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s still %s", name, out.StreamDescription.StreamStatus)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// streamRecords reads the stream's records from its first shard's start
// until it has want of them.
func streamRecords(t *testing.T, c *kinesis.Client, name string, want int) []kinesistypes.Record {
	t.Helper()
	it, err := c.GetShardIterator(t.Context(), &kinesis.GetShardIteratorInput{StreamName: aws.String(name),
		ShardId: aws.String("shardId-000000000000"), ShardIteratorType: kinesistypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	var got []kinesistypes.Record
	for iter := it.ShardIterator; iter != nil && len(got) < want; {
		out, err := c.GetRecords(t.Context(), &kinesis.GetRecordsInput{ShardIterator: iter})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Records) == 0 {
			break
		}
		got, iter = append(got, out.Records...), out.NextShardIterator
	}
	return got
}

func TestKinesisStreamHoldsEachRecordKeyedByTheEventUID(t *testing.T) {
	emu := awstest.StartKinesalite(t)
	c := kinesisStream(t, emu.URL, "kube-events")
	awstest.SetEnv(t)
	s := built(NewKinesisSink(KinesisConfig{StreamName: "kube-events", AWSConfig: AWSConfig{Region: awstest.Region, Endpoint: emu.URL}}))(t)
	var batch []*Occurrence
	for i := range 620 {
		batch = append(batch, occ(fmt.Sprintf("e%d", i), int32(1+i%3), "ns"))
	}
	if n, err := s.Write(t.Context(), batch); n != len(batch) || err != nil {
		t.Fatal(n, err)
	}
	got := streamRecords(t, c, "kube-events", len(batch))
	if len(got) != len(batch) {
		t.Fatalf("%d records in the stream, want %d", len(got), len(batch))
	}
	for i, r := range got {
		o := batch[i]
		if string(r.Data) != string(o.EventJSON("")) || aws.ToString(r.PartitionKey) != o.UID {
			t.Fatalf("record %d: key %s, data %s; want key %s and the record %s", i, aws.ToString(r.PartitionKey), r.Data, o.UID, o.EventJSON(""))
		}
	}
}

func TestKinesisStreamThatDoesNotExistIsRetried(t *testing.T) {
	emu := awstest.StartKinesalite(t)
	awstest.SetEnv(t)
	s := built(NewKinesisSink(KinesisConfig{StreamName: "missing", AWSConfig: AWSConfig{Region: awstest.Region, Endpoint: emu.URL}}))(t)
	n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")})
	wantFailure(t, "missing stream", n, err, false)
}
