package rsyslogtest

import (
	"context"
	"log/syslog"
	"testing"
	"time"
)

// Go's log/syslog, as kubernetes-event-exporter uses it, reaches each of
// the server's inputs, and the fields it sends are read back as rsyslogd
// parsed them.
func TestMessagesOfGoSyslogArriveOnEveryInput(t *testing.T) {
	s := Start(t)
	inputs := map[string][2]string{"imtcp": {"tcp", s.TCPAddr()}, "imudp": {"udp", s.UDPAddr()},
		"imptcp": {"unix", s.UnixPath()}, "imuxsock": {"unixgram", s.UnixgramPath()}}
	for _, in := range inputs {
		w, err := syslog.Dial(in[0], in[1], syslog.LOG_LOCAL0|syslog.LOG_INFO, "probe")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(`{"via":"` + in[0] + `"}`)); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ms, err := s.WaitMessages(ctx, len(inputs))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		in, ok := inputs[m.Input]
		if !ok || m.Priority != 16*8+6 || m.Text != `{"via":"`+in[0]+`"}` || len(m.Tag) < len("probe[1]:") || m.Tag[:6] != "probe[" {
			t.Errorf("message %+v", m)
		}
		delete(inputs, m.Input)
	}
	if len(inputs) != 0 {
		t.Errorf("nothing received on %v", inputs)
	}
}

// A restarted server listens on the same port and keeps what it stored.
func TestRestartKeepsThePortAndTheMessages(t *testing.T) {
	s := Start(t)
	send := func(text string) {
		w, err := syslog.Dial("tcp", s.TCPAddr(), syslog.LOG_LOCAL0, "probe")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if _, err := w.Write([]byte(text)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	send("before")
	if _, err := s.WaitMessages(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	send("after")
	ms, err := s.WaitMessages(ctx, 2)
	if err != nil || ms[0].Text != "before" || ms[1].Text != "after" {
		t.Fatalf("messages %+v, %v", ms, err)
	}
}
