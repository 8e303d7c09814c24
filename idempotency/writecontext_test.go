package idempotency

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

type testKey struct{}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestWriteContext(t *testing.T) {
	t.Run("values, not cancellation", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), testKey{}, "v"))
			cancelParent()
			ctx := newWriteContext(parent, time.Now().Add(time.Second))
			defer ctx.cancel()
			if got := ctx.Value(testKey{}); got != "v" {
				t.Errorf("Value = %v, want the parent's", got)
			}
			if err := ctx.Err(); err != nil {
				t.Errorf("Err = %v after the parent's cancellation, want nil", err)
			}
			if deadline, ok := ctx.Deadline(); !ok || !deadline.Equal(time.Now().Add(time.Second)) {
				t.Errorf("Deadline = %v, %v, want a second from now", deadline, ok)
			}
		})
	})
	t.Run("Done closes at the deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			ctx := newWriteContext(context.Background(), time.Now().Add(time.Second))
			defer ctx.cancel()
			done := ctx.Done()
			time.Sleep(999 * time.Millisecond)
			if isClosed(done) || ctx.Err() != nil {
				t.Fatal("ended before its deadline")
			}
			<-done
			if elapsed := time.Since(start); elapsed != time.Second {
				t.Errorf("Done closed after %v, want a second", elapsed)
			}
			if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Err = %v, want DeadlineExceeded", err)
			}
		})
	})
	t.Run("Err at the deadline without Done, then Done", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx := newWriteContext(context.Background(), time.Now().Add(time.Second))
			defer ctx.cancel()
			time.Sleep(time.Second)
			if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Err = %v, want DeadlineExceeded", err)
			}
			if !isClosed(ctx.Done()) {
				t.Error("Done is open after the deadline")
			}
		})
	})
	t.Run("Err after the deadline closes a Done whose timer has not fired", func(t *testing.T) {
		ctx := newWriteContext(context.Background(), time.Now().Add(time.Hour))
		defer ctx.cancel()
		done := ctx.Done()
		ctx.deadline = time.Now().Add(-time.Millisecond) // as if the timer were late
		if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Err = %v, want DeadlineExceeded", err)
		}
		if !isClosed(done) {
			t.Error("Err is not nil but Done is open")
		}
	})
	t.Run("cancel", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx := newWriteContext(context.Background(), time.Now().Add(time.Second))
			done := ctx.Done()
			child, cancelChild := context.WithCancel(ctx)
			defer cancelChild()
			ctx.cancel()
			ctx.cancel() // a second call does nothing
			if !isClosed(done) || !errors.Is(ctx.Err(), context.Canceled) {
				t.Errorf("after cancel: Done closed %v, Err %v; want closed, Canceled", isClosed(done), ctx.Err())
			}
			synctest.Wait()
			if !errors.Is(child.Err(), context.Canceled) {
				t.Errorf("child's Err = %v, want Canceled", child.Err())
			}
			time.Sleep(2 * time.Second) // the stopped timer must not fire
			if !errors.Is(ctx.Err(), context.Canceled) {
				t.Errorf("Err = %v after the deadline, want still Canceled", ctx.Err())
			}
		})
	})
	t.Run("children end at the deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx := newWriteContext(context.Background(), time.Now().Add(time.Second))
			defer ctx.cancel()
			child, cancelChild := context.WithCancel(ctx)
			defer cancelChild()
			<-child.Done()
			if !errors.Is(child.Err(), context.DeadlineExceeded) {
				t.Errorf("child's Err = %v, want DeadlineExceeded", child.Err())
			}
		})
	})
}
