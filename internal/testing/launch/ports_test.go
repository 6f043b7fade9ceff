package launch

import (
	"errors"
	"net"
	"strconv"
	"testing"
)

func TestFreeClusterPort(t *testing.T) {
	p, err := freeClusterPort()
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range []int{p, p + 10000} {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("port %d not free: %v", port, err)
		}
		l.Close()
	}
}

func TestIsBindError(t *testing.T) {
	if !isBindError(errors.New("Warning: Could not create server TCP listening socket 127.0.0.1:1: bind: Address already in use")) {
		t.Error("bind failure not recognised")
	}
	if isBindError(errors.New("exited")) {
		t.Error("other error taken for a bind failure")
	}
}
