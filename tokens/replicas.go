package tokens

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// errTooFewReplicas is the cause in an ErrUnavailable when WAIT got fewer
// acknowledgements than Options.WaitReplicas.
var errTooFewReplicas = errors.New("too few replicas acknowledged the write")

// exec runs a script that revokes sessions. Without Options.WaitReplicas
// that is all. With it, exec sends Redis's WAIT right after the script,
// in one pipeline on one connection: WAIT counts the replicas that have
// the writes made on its own connection, and scripts may not call it. It
// returns the script's reply and how many replicas acknowledged (-1
// without WaitReplicas, or when the script failed).
func (m *Manager) exec(ctx context.Context, s *redis.Script, keys []string, args ...any) (*redis.Cmd, int64) {
	if m.opts.WaitReplicas == 0 {
		return s.Run(ctx, m.rdb, keys, args...), -1
	}
	cc, isCluster := m.rdb.(*redis.ClusterClient)
	if !isCluster {
		// New let only a *redis.Client through otherwise.
		return m.pipeWait(ctx, m.rdb.(*redis.Client), false, s, keys, args)
	}
	// In a Cluster the pipeline goes to the master of the keys' slot
	// directly, so go-redis does not follow redirections for it: exec does
	// (MOVED: the slot has moved; ASK: the keys are on the node the slot
	// is migrating to; TRYAGAIN: they are on both), a few times.
	var (
		node   *redis.Client
		asking bool
		cmd    *redis.Cmd
		acked  int64
	)
	for attempt := range 5 {
		if node == nil {
			var err error
			if node, err = cc.MasterForKey(ctx, keys[0]); err != nil {
				return errCmd(ctx, err), -1
			}
		}
		cmd, acked = m.pipeWait(ctx, node, asking, s, keys, args)
		err := cmd.Err()
		if err == nil || errors.Is(err, redis.Nil) {
			return cmd, acked
		}
		kind, addr, _ := strings.Cut(err.Error(), " ")
		_, addr, _ = strings.Cut(addr, " ")
		asking = false
		switch kind {
		case "MOVED", "ASK":
			cc.ReloadState(ctx)
			node = nodeAt(ctx, cc, addr)
			asking = kind == "ASK" && node != nil
		case "TRYAGAIN":
		default:
			return cmd, acked
		}
		select {
		case <-ctx.Done():
			return errCmd(ctx, ctx.Err()), -1
		case <-time.After(time.Duration(attempt+1) * 10 * time.Millisecond):
		}
	}
	return cmd, acked
}

// pipeWait runs the script and WAIT in one pipeline on node, after ASKING
// if asking, and again with EVAL if the node did not have the script.
func (m *Manager) pipeWait(ctx context.Context, node *redis.Client, asking bool, s *redis.Script, keys []string, args []any) (*redis.Cmd, int64) {
	loaded := true
	for {
		pipe := node.Pipeline()
		if asking {
			_ = pipe.Process(ctx, redis.NewStatusCmd(ctx, "asking"))
		}
		var cmd *redis.Cmd
		if loaded {
			cmd = s.EvalSha(ctx, pipe, keys, args...)
		} else {
			cmd = s.Eval(ctx, pipe, keys, args...)
		}
		wait := redis.NewIntCmd(ctx, "wait", m.opts.WaitReplicas, m.opts.WaitTimeout.Milliseconds())
		_ = pipe.Process(ctx, wait)
		_, _ = pipe.Exec(ctx)
		err := cmd.Err()
		switch {
		case loaded && err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT"):
			loaded = false
		case err != nil && !errors.Is(err, redis.Nil):
			return cmd, -1
		case wait.Err() != nil:
			// The write may have applied; without WAIT's answer nothing
			// says a replica has it.
			return cmd, 0
		default:
			return cmd, wait.Val()
		}
	}
}

// acknowledged turns a WAIT count short of Options.WaitReplicas into an
// ErrUnavailable; acked is -1 when there was no WAIT.
func (m *Manager) acknowledged(op string, acked int64) error {
	if acked < 0 || acked >= int64(m.opts.WaitReplicas) {
		return nil
	}
	return unavailable(op, fmt.Errorf("%w: %d of %d within %v; the write applied on the primary, "+
		"and a failover to a replica without it would undo it: retry", errTooFewReplicas,
		acked, m.opts.WaitReplicas, m.opts.WaitTimeout))
}

// nodeAt returns the client of the master at addr, or nil if the cluster
// client knows no such master.
func nodeAt(ctx context.Context, cc *redis.ClusterClient, addr string) *redis.Client {
	found := make(chan *redis.Client, 1)
	_ = cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		if c.Options().Addr == addr {
			select {
			case found <- c:
			default:
			}
		}
		return nil
	})
	select {
	case c := <-found:
		return c
	default:
		return nil
	}
}

// errCmd returns a Cmd that failed with err.
func errCmd(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}
