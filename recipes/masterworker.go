package recipes

import (
	"context"
	"errors"
	"slices"

	"coord/vocab"
)

// MasterWorker is the master–worker task assignment of the ZooKeeper book
// (Junqueira and Reed, chapter 4) under root:
//
//	root/master   the election of the master (Election)
//	root/workers  one ephemeral node per live worker
//	root/tasks    tasks not yet assigned (persistent-sequential task-<n>)
//	root/assign   root/assign/<worker>/<task>: tasks assigned to a worker
//	root/status   root/status/<task>: a finished task's result
//
// The master moves a task to a worker with one multi (create the
// assignment, delete the task), so a task is never both waiting and
// assigned, nor assigned twice; a worker finishes a task with one multi
// (create its status, delete the assignment). When a worker's session ends
// its node vanishes and the master moves its unfinished assignments back to
// root/tasks (again one multi each), so no task is lost; a task may then
// run twice if the worker had started it. (A worker makes its assignment
// directory before it registers, so the master keeps the directories of
// workers it does not know and makes one itself if it is missing: a worker
// joining while the master recovers is never starved.) Only the master watches the
// workers and tasks, each worker its own assignments, each client its own
// task's status: no herd.
//
// A master whose session is suspended stops assigning until it knows it
// still leads; a master whose session expires stops (RunMaster returns an
// error matching ErrSessionLost) and another candidate takes over where it
// left off.
type MasterWorker struct {
	c    Conn
	root string
	opts options
}

// NewMasterWorker returns the master–worker system under root.
func NewMasterWorker(c Conn, root string, opts ...Option) *MasterWorker {
	return &MasterWorker{c: c, root: root, opts: buildOptions(opts)}
}

func (m *MasterWorker) dir(name string) string { return join(m.root, name) }

func (m *MasterWorker) ensure(ctx context.Context) error {
	for _, d := range []string{"master", "workers", "tasks", "assign", "status"} {
		if err := ensurePath(ctx, m.c, m.dir(d), m.opts.acl); err != nil {
			return err
		}
	}
	return nil
}

// Submit adds a task and returns its name.
func (m *MasterWorker) Submit(ctx context.Context, data []byte) (string, error) {
	if err := m.ensure(ctx); err != nil {
		return "", err
	}
	path, _, err := createProtected(ctx, m.c, m.dir("tasks"), "task-", data, vocab.ModePersistentSequential, m.opts.acl)
	if err != nil {
		return "", err
	}
	return baseName(path), nil
}

// Result waits for the task's result.
func (m *MasterWorker) Result(ctx context.Context, task string) ([]byte, error) {
	path := join(m.dir("status"), task)
	for {
		var ok bool
		var w <-chan Event
		if err := retry(ctx, m.c, func() (err error) {
			ok, _, w, err = m.c.ExistsW(ctx, path)
			return err
		}); err != nil {
			return nil, err
		}
		if ok {
			var data []byte
			err := retry(ctx, m.c, func() (err error) {
				data, _, err = m.c.Get(ctx, path)
				return err
			})
			return data, err
		}
		if err := waitWatch(ctx, m.c, w); err != nil {
			return nil, err
		}
	}
}

// RunMaster campaigns for mastership and, while it leads, assigns tasks to
// workers and takes tasks back from dead workers, until ctx ends (nil) or
// the session does.
func (m *MasterWorker) RunMaster(ctx context.Context) error {
	if err := m.ensure(ctx); err != nil {
		return err
	}
	e := NewElection(m.c, m.dir("master"), WithData(m.opts.data), WithACL(m.opts.acl))
	if err := e.Start(ctx); err != nil {
		return err
	}
	defer func() {
		cctx, cancel := cleanupCtx()
		defer cancel()
		_ = e.Resign(cctx)
	}()
	next := 0
	for {
		if err := e.Await(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		err := m.master(ctx, e, &next)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && sessionEnded(err) {
			return err
		}
	}
}

// master does one master's work while e leads.
func (m *MasterWorker) master(ctx context.Context, e *Election, next *int) error {
	for {
		leader, lch := e.Leadership()
		if !leader {
			return nil
		}
		var workers, tasks []string
		var ww, tw <-chan Event
		if err := retry(ctx, m.c, func() (err error) {
			workers, _, ww, err = m.c.ChildrenW(ctx, m.dir("workers"))
			return err
		}); err != nil {
			return err
		}
		if err := retry(ctx, m.c, func() (err error) {
			tasks, _, tw, err = m.c.ChildrenW(ctx, m.dir("tasks"))
			return err
		}); err != nil {
			return err
		}
		if err := m.recover(ctx, workers); err != nil {
			return err
		}
		slices.Sort(workers)
		for _, t := range sortSeq(tasks, "task-") {
			if len(workers) == 0 {
				break
			}
			w := workers[*next%len(workers)]
			*next++
			if err := m.move(ctx, join(m.dir("tasks"), t.name), join(join(m.dir("assign"), w), t.name)); err != nil {
				return err
			}
		}
		wctx, cancel := context.WithCancel(ctx)
		err := waitAnyEvent(ctx, m.c, []<-chan Event{ww, tw, chanOf(wctx, lch)})
		cancel()
		if err != nil {
			return err
		}
	}
}

// chanOf turns a change channel into an event channel for waitAnyEvent.
func chanOf(ctx context.Context, ch <-chan struct{}) <-chan Event {
	out := make(chan Event, 1)
	go func() {
		select {
		case <-ch:
			out <- Event{}
		case <-ctx.Done():
		}
	}()
	return out
}

// recover moves the assignments of workers that are gone back to tasks.
func (m *MasterWorker) recover(ctx context.Context, live []string) error {
	dirs, err := children(ctx, m.c, m.dir("assign"))
	if err != nil {
		return err
	}
	for _, w := range dirs {
		if slices.Contains(live, w) {
			continue
		}
		wdir := join(m.dir("assign"), w)
		tasks, err := children(ctx, m.c, wdir)
		if errors.Is(err, vocab.NoNode) {
			continue
		}
		if err != nil {
			return err
		}
		for _, t := range tasks {
			if err := m.move(ctx, join(wdir, t), join(m.dir("tasks"), t)); err != nil {
				return err
			}
		}
		// The directory stays: the worker may be joining right now (it
		// makes its directory before it registers).
	}
	return nil
}

// move moves a task node from one place to another with one multi. A task
// gone from under it (moved by a previous master, or finished) is no error.
func (m *MasterWorker) move(ctx context.Context, from, to string) error {
	var data []byte
	err := retry(ctx, m.c, func() (err error) {
		data, _, err = m.c.Get(ctx, from)
		return err
	})
	if errors.Is(err, vocab.NoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	multi := func() error {
		return retry(ctx, m.c, func() error {
			_, err := m.c.Multi(ctx, CreateOp{Path: to, Data: data, Mode: vocab.ModePersistent, ACL: m.opts.acl},
				DeleteOp{Path: from, Version: AnyVersion})
			return err
		})
	}
	err = multi()
	var fe *vocab.Error
	if errors.As(err, &fe) && fe.Code == vocab.NoNode && fe.Path == to {
		// The worker's directory is not there (yet): make it and go on.
		if err := ensurePath(ctx, m.c, parentOf(to), m.opts.acl); err != nil {
			return err
		}
		err = multi()
	}
	switch {
	case errors.Is(err, vocab.NodeExists):
		// A retried multi that had gone through, or a task already there.
		return deleteNode(ctx, m.c, from)
	case errors.Is(err, vocab.NoNode):
		return nil // the task moved meanwhile (finished, or moved by another master)
	}
	return lost(err)
}

// TaskFunc runs one task and returns its result.
type TaskFunc func(ctx context.Context, task string, data []byte) ([]byte, error)

// RunWorker registers a worker named name and runs the tasks assigned to
// it, one at a time, until ctx ends (nil) or the session does. A task whose
// function fails gets a status beginning with "error: ".
func (m *MasterWorker) RunWorker(ctx context.Context, name string, fn TaskFunc) error {
	if err := m.ensure(ctx); err != nil {
		return err
	}
	mine := join(m.dir("assign"), name)
	if err := ensurePath(ctx, m.c, mine, m.opts.acl); err != nil {
		return err
	}
	member, err := NewGroup(m.c, m.dir("workers"), WithACL(m.opts.acl)).Join(ctx, name, m.opts.data)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := cleanupCtx()
		defer cancel()
		_ = member.Leave(cctx)
	}()
	for {
		var tasks []string
		var w <-chan Event
		err := retry(ctx, m.c, func() (err error) {
			tasks, _, w, err = m.c.ChildrenW(ctx, mine)
			return err
		})
		if errors.Is(err, vocab.NoNode) {
			// The master took our directory back (it thought us dead):
			// make it again.
			if err := ensurePath(ctx, m.c, mine, m.opts.acl); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, t := range sortSeq(tasks, "task-") {
			if err := m.work(ctx, mine, t.name, fn); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		if err := waitWatch(ctx, m.c, w); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

func (m *MasterWorker) work(ctx context.Context, mine, task string, fn TaskFunc) error {
	path := join(mine, task)
	var data []byte
	err := retry(ctx, m.c, func() (err error) {
		data, _, err = m.c.Get(ctx, path)
		return err
	})
	if errors.Is(err, vocab.NoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	result, ferr := fn(ctx, task, data)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if ferr != nil {
		result = []byte("error: " + ferr.Error())
	}
	err = retry(ctx, m.c, func() error {
		_, err := m.c.Multi(ctx, CreateOp{Path: join(m.dir("status"), task), Data: result, Mode: vocab.ModePersistent, ACL: m.opts.acl},
			DeleteOp{Path: path, Version: AnyVersion})
		return err
	})
	switch {
	case errors.Is(err, vocab.NodeExists):
		return deleteNode(ctx, m.c, path) // finished before (a retried multi, or a second run)
	case errors.Is(err, vocab.NoNode):
		return nil // taken back by the master meanwhile
	}
	return lost(err)
}
