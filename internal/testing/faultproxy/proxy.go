package faultproxy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// maxRequestBuf bounds the bytes a connection keeps for matching. A request
// longer than this is matched on its first maxRequestBuf bytes, where Redis
// puts the command and its first arguments and PostgreSQL the query text
// of a Parse or Query message.
const maxRequestBuf = 1 << 20

// noScript begins Redis's answer to EVALSHA of a script it does not have.
const noScript = "-NOSCRIPT"

// dialTimeout bounds the proxy's connection to its target.
const dialTimeout = 5 * time.Second

// stopTimeout bounds how long the test's cleanup waits for the proxy's
// goroutines, which end once their connections are closed.
const stopTimeout = 10 * time.Second

// Proxy is a TCP proxy in front of one server, for tests: a client that
// connects to Addr reaches the target, and the test can cut, freeze, delay
// and retarget that path, and drop the server's reply to chosen requests
// after the server has executed them. Make one with StartProxy; it is
// stopped, with every connection closed and every goroutine ended, when
// the test ends.
//
// A request, as the proxy sees it, is every byte a client sent on one
// connection since the server's last reply began. Clients that wait for
// each reply before sending the next command (go-redis without pipelines,
// pgx outside batches) send one command per request; a pipeline or pgx
// batch is one request for all its commands.
//
// Every method may be called from any goroutine.
type Proxy struct {
	t  testing.TB
	ln net.Listener
	wg sync.WaitGroup

	mu      sync.Mutex
	target  string
	closed  bool
	cut     bool
	thawed  chan struct{} // closed while not frozen; a fresh one while frozen
	delay   time.Duration
	conns   map[*proxyConn]struct{}
	drop    dropRule
	stats   Stats
	dropped chan struct{} // signalled at every dropped reply, for AwaitDrops
}

// dropRule is what DropReplies and SetDropRate armed.
type dropRule struct {
	match func([]byte) bool // DropReplies: requests to drop
	n     int               // DropReplies: how many more

	rate      float64 // SetDropRate: chance per request
	rng       *rand.Rand
	rateMatch func([]byte) bool // SetDropRate: requests it applies to; nil for all
}

// Stats counts what a Proxy did since it started.
type Stats struct {
	// connections is the number of client connections forwarded to a
	// server.
	connections int
	// refused is the number of client connections closed at once because
	// the proxy was cut or its target did not answer.
	refused int
	// requests is the number of requests clients began to send.
	requests int
	// armed is the number of requests whose reply was marked to be
	// dropped. A marked request whose connection closes before the
	// server answers does not count as dropped.
	armed int
	// RepliesDropped is the number of replies swallowed after the server
	// began to answer.
	RepliesDropped int
	// cuts is the number of calls to Cut.
	cuts int
	// held is the number of chunks of data the proxy holds now, in
	// either direction, for a Freeze or a delay: the proof that a frozen
	// or slowed path has something in it.
	held int
}

// proxyConn is one client connection and its connection to the server.
type proxyConn struct {
	client, server net.Conn
	done           chan struct{} // closed by close
	closeOnce      sync.Once

	// Guarded by Proxy.mu.
	req   []byte // request bytes since the server's last reply began
	armed bool   // the reply to req is to be dropped
	// counted is true when DropReplies's count, not SetDropRate, armed
	// the request.
	counted bool
	// decided is true once the random rule drew for req, so that a
	// request split over several reads is drawn for once.
	decided bool
}

func (c *proxyConn) close() {
	c.closeOnce.Do(func() {
		close(c.done)
		_ = c.client.Close()
		if c.server != nil {
			_ = c.server.Close()
		}
	})
}

// StartProxy starts a proxy on a free loopback port that forwards every
// connection to target (host:port).
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("faultproxy: proxy listen: %v", err)
	}
	thawed := make(chan struct{})
	close(thawed)
	p := &Proxy{
		t: t, ln: ln, target: target, thawed: thawed,
		conns:   map[*proxyConn]struct{}{},
		dropped: make(chan struct{}, 1),
	}
	t.Cleanup(p.stop)
	p.wg.Add(1)
	go p.serve()
	return p
}

// Addr returns the address clients connect to, "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Retarget forwards connections made from now on to addr. Open
// connections keep their server; Cut closes them if the test wants every
// client to move.
func (p *Proxy) Retarget(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = addr
}

// Cut closes every connection, both to the clients and to the server, and
// refuses new ones (accepts and closes them at once) until Restore: the
// server is gone from the view of this proxy's clients, and they learn it
// at once (a reset, not a timeout).
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	p.stats.cuts++
	conns := p.takeConns()
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// Restore lets new connections through again after Cut.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Freeze stops moving bytes in both directions while keeping every
// connection open, and accepts new connections without moving their
// bytes either: a network partition without resets, which clients only
// notice by their own timeouts. Thaw resumes every connection where it
// stopped, delivering what was held back. The server's own timeouts still
// run: PostgreSQL closes a connection made while frozen once its
// authentication_timeout (1 minute) passes without a startup message, and
// a Redis replica drops its link after repl-timeout (60 s).
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
		p.thawed = make(chan struct{})
	default: // already frozen
	}
}

// Thaw lets bytes move again after Freeze.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
	default:
		close(p.thawed)
	}
}

// SetDelay delays every chunk of bytes, in each direction, by d before
// passing it on; 0 turns the delay off. Chunks of one direction stay in
// order, so delays add up when a reply comes in several chunks.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// DropReplies arms the proxy so that the next n requests for which match
// returns true lose their reply: each such request is delivered to the
// server; when the first byte of the server's answer arrives, which proves
// the server read the request and, for Redis and PostgreSQL, executed it,
// the proxy swallows the answer and closes both sides of the connection.
// The client sees a broken connection after its request ran.
//
// match sees the bytes of the request so far and is asked again as more
// bytes of a request arrive, so a request split across reads is matched
// once it is whole. It is called with the proxy's lock held: it must be
// quick and must not call the Proxy. A later call replaces the earlier
// rule; n = 0 disarms it (requests already marked stay marked).
func (p *Proxy) DropReplies(match func(request []byte) bool, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop.match, p.drop.n = match, n
}

// SetDropRate drops the reply of each request with probability prob, drawn
// from rng, as DropReplies does. match limits the requests it applies to
// (nil: every request); the draw is made when a request first matches.
// The draws are made in the order requests arrive, one per request, so a
// given rng yields the same sequence of decisions; which request gets
// which decision depends on how the clients' requests interleave. rng is
// used under the proxy's lock and must not be used elsewhere meanwhile.
// prob <= 0 turns random drops off.
func (p *Proxy) SetDropRate(prob float64, rng *rand.Rand, match func(request []byte) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if prob > 0 && rng == nil {
		p.t.Errorf("faultproxy: SetDropRate(%v) without a *rand.Rand", prob)
		prob = 0
	}
	p.drop.rate, p.drop.rng, p.drop.rateMatch = prob, rng, match
}

// Stats returns what the proxy did so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// errTimeout is returned by waits that ran out of time.
var errTimeout = errors.New("faultproxy: timed out")

// AwaitDrops waits until the proxy has dropped at least n replies in all,
// or returns an error wrapping errTimeout after timeout.
func (p *Proxy) AwaitDrops(n int, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	// p.dropped wakes one waiter; the tick covers any other.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		p.mu.Lock()
		got := p.stats.RepliesDropped
		p.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-p.dropped:
		case <-tick.C:
		case <-deadline.C:
			return errorf(errTimeout, "%d of %d replies dropped after %v", got, n, timeout)
		}
	}
}

// takeConns empties the connection set and returns what it held. p.mu is
// held.
func (p *Proxy) takeConns() []*proxyConn {
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	clear(p.conns)
	return conns
}

// stop closes the listener and every connection and waits for the
// goroutines.
func (p *Proxy) stop() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	conns := p.takeConns()
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(stopTimeout):
		p.t.Errorf("faultproxy: proxy %s: goroutines still running %v after stop", p.Addr(), stopTimeout)
	}
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed by stop
		}
		p.mu.Lock()
		if p.cut || p.closed {
			p.stats.refused++
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		pc := &proxyConn{client: c, done: make(chan struct{})}
		p.conns[pc] = struct{}{}
		target := p.target
		p.wg.Add(1)
		p.mu.Unlock()
		go p.connect(pc, target)
	}
}

// connect dials the server for pc and runs both directions.
func (p *Proxy) connect(pc *proxyConn, target string) {
	defer p.wg.Done()
	s, err := net.DialTimeout("tcp", target, dialTimeout)
	p.mu.Lock()
	_, open := p.conns[pc] // Cut or stop may have closed it meanwhile
	if err != nil || !open {
		delete(p.conns, pc)
		p.stats.refused++
		p.mu.Unlock()
		if s != nil {
			_ = s.Close()
		}
		pc.close()
		return
	}
	pc.server = s
	p.stats.connections++
	p.wg.Add(2)
	p.mu.Unlock()
	go p.pump(pc, true)
	go p.pump(pc, false)
}

// pump copies one direction of pc until either side closes, then closes
// both.
func (p *Proxy) pump(pc *proxyConn, toServer bool) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, pc)
		p.mu.Unlock()
		pc.close()
	}()
	src, dst := pc.server, pc.client
	if toServer {
		src, dst = pc.client, pc.server
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate(pc) {
				return
			}
			var pass bool
			if toServer {
				pass = p.request(pc, buf[:n])
			} else {
				pass = p.reply(pc, buf[:n])
			}
			if !pass {
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// gate holds a chunk while the proxy is frozen and for the delay,
// counted in Stats.held meanwhile. It returns false if pc was closed
// meanwhile.
func (p *Proxy) gate(pc *proxyConn) bool {
	held := false
	defer func() {
		if held {
			p.mu.Lock()
			p.stats.held--
			p.mu.Unlock()
		}
	}()
	for {
		p.mu.Lock()
		thawed, delay := p.thawed, p.delay
		frozen := false
		select {
		case <-thawed:
		default:
			frozen = true
		}
		if (frozen || delay > 0) && !held {
			held = true
			p.stats.held++
		}
		p.mu.Unlock()
		select {
		case <-thawed:
		case <-pc.done:
			return false
		}
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-pc.done:
				t.Stop()
				return false
			}
		}
		// A Freeze during the delay holds the chunk too.
		p.mu.Lock()
		thawed = p.thawed
		p.mu.Unlock()
		select {
		case <-thawed:
			return true
		default:
		}
	}
}

// request records chunk as part of pc's current request and decides
// whether its reply is to be dropped. It returns whether to pass the chunk
// on; the decision is made before the chunk reaches the server, so the
// reply cannot overtake it.
func (p *Proxy) request(pc *proxyConn, chunk []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(pc.req) == 0 {
		p.stats.requests++
	}
	if room := maxRequestBuf - len(pc.req); room > 0 {
		pc.req = append(pc.req, chunk[:min(room, len(chunk))]...)
	}
	if pc.armed {
		return true
	}
	d := &p.drop
	if d.n > 0 && d.match != nil && d.match(pc.req) {
		d.n--
		pc.armed, pc.counted = true, true
	} else if d.rate > 0 && !pc.decided && (d.rateMatch == nil || d.rateMatch(pc.req)) {
		pc.decided = true
		pc.armed = d.rng.Float64() < d.rate
	}
	if pc.armed {
		p.stats.armed++
	}
	return true
}

// reply is called when a chunk of the server's answer arrives. It drops
// the answer and returns false if pc's request was marked; otherwise the
// request is over and the next bytes from the client begin a new one.
//
// One answer is not taken as proof that the request ran: Redis's NOSCRIPT
// error to an EVALSHA of a script it does not have.
func (p *Proxy) reply(pc *proxyConn, chunk []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pc.armed && strings.HasPrefix(string(chunk[:min(len(chunk), len(noScript))]), noScript) {
		// The script did not run, so this answer proves nothing: let it
		// through and give the arming back, for the EVAL that go-redis
		// sends next, maybe on another connection.
		p.stats.armed--
		if pc.counted {
			p.drop.n++
		}
		pc.armed, pc.counted = false, false
	}
	if pc.armed {
		p.stats.RepliesDropped++
		select {
		case p.dropped <- struct{}{}:
		default:
		}
		return false // pump's deferred close ends both sides
	}
	pc.req, pc.decided = pc.req[:0], false
	return true
}

// errorf wraps sentinel with a message.
func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
}
